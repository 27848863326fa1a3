/* Messages and collectives from C: a token goes around the ring of ranks
 * with mw_send/mw_recv (each rank adds its rank), then every rank checks
 * the total with an allreduce, and the even and odd ranks each sum their
 * ranks on a team of their own. `make ctest` builds and runs it. */
#include <memwire.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call) do { mw_status s_ = (call); if (s_ != MW_OK) { fprintf(stderr, \
    "%s: %s (%s)\n", #call, mw_strerror(s_), mw_last_error()); exit(1); } } while (0)

int main(void) {
    mw_endpoint *ep;
    uint32_t me, n;
    CHECK(mw_init(&ep));
    CHECK(mw_rank(ep, &me));
    CHECK(mw_size(ep, &n));
    uint32_t left = (me + n - 1) % n, right = (me + 1) % n;

    /* Rank 0 starts the token; every other rank adds its rank and passes it on. */
    uint64_t token = 0;
    mw_recv_status st;
    if (me == 0) {
        CHECK(mw_send(ep, right, 1, &token, sizeof token));
        CHECK(mw_recv(ep, left, 1, &token, sizeof token, &st));
    } else {
        CHECK(mw_recv(ep, left, 1, &token, sizeof token, &st));
        token += me;
        CHECK(mw_send(ep, right, 1, &token, sizeof token));
    }

    /* Everyone learns the total; it must be 0 + 1 + ... + (n - 1). */
    uint64_t total = me == 0 ? token : 0, sum = 0;
    CHECK(mw_allreduce(ep, NULL, MW_DTYPE_U64, MW_OP_SUM, &total, &sum, 1));

    /* The same sum over each parity's team. */
    mw_team *parity;
    uint64_t mine = me, part = 0, want = 0;
    CHECK(mw_team_split(ep, NULL, me % 2, me, &parity));
    CHECK(mw_allreduce(ep, parity, MW_DTYPE_U64, MW_OP_SUM, &mine, &part, 1));
    for (uint32_t r = me % 2; r < n; r += 2) want += r;
    CHECK(mw_team_free(&parity));

    printf("rank %u: token total %llu, %s ranks sum %llu\n", me, (unsigned long long)sum,
           me % 2 ? "odd" : "even", (unsigned long long)part);
    int ok = sum == (uint64_t)n * (n - 1) / 2 && part == want;
    CHECK(mw_finalize(&ep));
    return ok ? 0 : 1;
}
