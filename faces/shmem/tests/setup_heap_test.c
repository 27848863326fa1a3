/* Setup and query, the symmetric heap (every allocation routine, offsets
 * identical on every PE, exhaustion), global and static variables as
 * symmetric objects, and shmem_ptr. Any number of PEs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

long global_array[16];          /* .bss */
int global_initialized = 12345; /* .data */
static double static_value;     /* static, .bss */

int main(void) {
    int provided = -1, initialized = -1;
    shmem_query_initialized(&initialized);
    CHECK(initialized == 0, "before init: %d", initialized);
    CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0, "init_thread failed");
    CHECK(provided == SHMEM_THREAD_MULTIPLE, "provided %d", provided);
    int queried;
    shmem_query_thread(&queried);
    CHECK(queried == provided, "query_thread %d", queried);
    shmem_query_initialized(&initialized);
    CHECK(initialized == 1, "after init: %d", initialized);
    int me = shmem_my_pe(), n = shmem_n_pes(), right = (me + 1) % n, left = (me + n - 1) % n;
    CHECK(me >= 0 && me < n, "my_pe %d n_pes %d", me, n);
    CHECK(_my_pe() == me && _num_pes() == n, "deprecated queries");
    int major, minor;
    char name[SHMEM_MAX_NAME_LEN];
    shmem_info_get_version(&major, &minor);
    CHECK(major == 1 && minor == 5, "version %d.%d", major, minor);
    shmem_info_get_name(name);
    CHECK(strcmp(name, SHMEM_VENDOR_STRING) == 0, "name %s", name);
    for (int pe = 0; pe < n; pe++) CHECK(shmem_pe_accessible(pe) == 1, "pe %d", pe);
    CHECK(shmem_pe_accessible(n) == 0 && shmem_pe_accessible(-1) == 0, "out-of-range PEs");

    /* Heap: identical offsets everywhere (gathered and compared). */
    char *first = shmem_malloc(100);
    long *a = shmem_malloc(10 * sizeof(long));
    long *z = shmem_calloc(32, sizeof(long));
    double *al = shmem_align(4096, 3 * sizeof(double));
    int *h = shmem_malloc_with_hints(8 * sizeof(int), SHMEM_MALLOC_ATOMICS_REMOTE | SHMEM_MALLOC_SIGNAL_REMOTE);
    CHECK(first && a && z && al && h, "allocation failed");
    CHECK(((uintptr_t)al % 4096) == 0, "align %p", (void *)al);
    CHECK(shmem_malloc(0) == NULL, "malloc(0)");
    CHECK(shmem_align(3, 8) == NULL, "bad alignment accepted");
    for (int i = 0; i < 32; i++) CHECK(z[i] == 0, "calloc not zero at %d", i);
    static long offsets[4], all[4 * 64];
    offsets[0] = (char *)a - first;
    offsets[1] = (char *)z - first;
    offsets[2] = (char *)al - first;
    offsets[3] = (char *)h - first;
    shmem_long_fcollect(SHMEM_TEAM_WORLD, all, offsets, 4);
    for (int pe = 0; pe < n && pe < 64; pe++)
        for (int k = 0; k < 4; k++) CHECK(all[4 * pe + k] == offsets[k], "PE %d offset %d differs", pe, k);
    CHECK(shmem_addr_accessible(a, right) == 1, "heap accessible");
    CHECK(shmem_addr_accessible(global_array, right) == 1, "global accessible");
    long local_var;
    CHECK(shmem_addr_accessible(&local_var, right) == 0, "stack variable called accessible");

    /* Heap put/get and realloc keeping contents. */
    for (int i = 0; i < 10; i++) a[i] = me * 100 + i;
    shmem_barrier_all();
    long got[10];
    shmem_long_get(got, a, 10, right);
    for (int i = 0; i < 10; i++) CHECK(got[i] == right * 100 + i, "get %d: %ld", i, got[i]);
    shmem_barrier_all();
    a = shmem_realloc(a, 1000 * sizeof(long));
    CHECK(a != NULL, "realloc");
    for (int i = 0; i < 10; i++) CHECK(a[i] == me * 100 + i, "realloc lost %d", i);
    a[999] = me;
    shmem_barrier_all();
    CHECK(shmem_long_g(&a[999], left) == left, "realloc'd block remote");
    shmem_free(h);
    shmem_free(al);
    shmem_free(z);
    shmem_free(a);
    shmem_free(first);
    /* Exhaustion: NULL on every PE (and a message), then the heap still works. */
    void *huge = shmem_malloc((size_t)1 << 40);
    CHECK(huge == NULL, "a 1 TiB block was granted");
    long *again = shmem_malloc(8);
    CHECK(again != NULL, "heap unusable after exhaustion");
    shmem_free(again);

    /* Globals and statics are symmetric. */
    shmem_long_put(&global_array[me % 16], (long[]){1000 + me}, 1, right);
    shmem_double_p(&static_value, 0.5 + me, right);
    shmem_int_p(&global_initialized, me, right);
    shmem_barrier_all();
    CHECK(global_array[left % 16] == 1000 + left, "global %ld", global_array[left % 16]);
    CHECK(static_value == 0.5 + left, "static %f", static_value);
    CHECK(global_initialized == left, "initialized global %d", global_initialized);
    CHECK(shmem_int_g(&global_initialized, right) == me, "global get");

    /* shmem_ptr: own memory always; a same-host peer's heap unless UDP.
     * SHMEM_TEST_PES_PER_HOST (run.sh, for jobs across hosts) says how many
     * consecutive PEs share a host, as oshrun places them; default all. */
    long *sym = shmem_malloc(sizeof(long) * 4);
    CHECK(shmem_ptr(sym, me) == sym, "own ptr");
    const char *transport = getenv("MW_TRANSPORT");
    int udp = transport && strcmp(transport, "udp") == 0;
    const char *per_host_text = getenv("SHMEM_TEST_PES_PER_HOST");
    int per_host = per_host_text ? atoi(per_host_text) : n;
    CHECK(per_host >= 1 && n % per_host == 0, "SHMEM_TEST_PES_PER_HOST=%s with %d PEs", per_host_text, n);
    int right_shares_host = me / per_host == right / per_host;
    long *peer = shmem_ptr(sym, right);
    if (right != me)
        CHECK((peer == NULL) == (udp || !right_shares_host), "shmem_ptr %p over %s to PE %d (%s host)", (void *)peer,
              udp ? "udp" : "shm", right, right_shares_host ? "same" : "other");
    if (peer != NULL)
        peer[1] = 77 + me;
    else
        shmem_long_p(&sym[1], 77 + me, right);
    shmem_barrier_all();
    CHECK(sym[1] == 77 + left, "store through shmem_ptr or shmem_long_p: %ld", sym[1]);
    CHECK(shmem_team_n_pes(SHMEM_TEAM_SHARED) == (udp ? 1 : per_host), "TEAM_SHARED has %d",
          shmem_team_n_pes(SHMEM_TEAM_SHARED));
    shmem_free(sym);
    PASSED("setup_heap_test");
    shmem_finalize();
    shmem_query_initialized(&initialized);
    if (initialized != 0) return 1;
    return 0;
}
