/* put / get / fetch_add between the ranks of a job (the README's C example). Build and run:
 *   make capi && export PKG_CONFIG_PATH=$PWD/target/release/pkgconfig
 *   gcc -Wall hello_rma.c $(pkg-config --cflags --libs memwire) -o hello_rma
 *   target/release/mwrun -n 4 ./hello_rma                                   */
#include <memwire.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call) do { mw_status s_ = (call); if (s_ != MW_OK) { fprintf(stderr, \
    "%s: %s (%s)\n", #call, mw_strerror(s_), mw_last_error()); exit(1); } } while (0)

int main(void) {
    mw_endpoint *ep;
    mw_region *region;
    mw_key key;
    uint32_t me, n;
    CHECK(mw_init(&ep));                       /* joins the job mwrun started */
    CHECK(mw_rank(ep, &me));
    CHECK(mw_size(ep, &n));
    /* Word 0: a counter; then one 8-byte slot per rank. Same key on every rank. */
    CHECK(mw_region_alloc_symmetric(ep, 8 + 8 * (size_t)n, MW_ACCESS_ALL, &region));
    CHECK(mw_region_key(region, &key));
    uint32_t right = (me + 1) % n;
    uint64_t slot = 8 + 8 * (uint64_t)me, mine = 1000 + me, back = 0, ticket, total;
    CHECK(mw_put(ep, right, key, slot, &mine, sizeof mine));  /* into right's slot */
    CHECK(mw_fetch_add_u64(ep, 0, key, 0, 1, &ticket));       /* rank 0's counter */
    CHECK(mw_barrier(ep));
    CHECK(mw_get(ep, right, key, slot, &back, sizeof back));  /* read it back */
    printf("rank %u: got %llu back, ticket %llu\n", me, (unsigned long long)back, (unsigned long long)ticket);
    CHECK(mw_barrier(ep));
    CHECK(mw_region_load_u64(region, 0, &total));
    if (me == 0) printf("counter = %llu (want %u)\n", (unsigned long long)total, n);
    CHECK(mw_region_free(&region));
    CHECK(mw_finalize(&ep));
    return back == mine && (me != 0 || total == n) ? 0 : 1;
}
