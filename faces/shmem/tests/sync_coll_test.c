/* Signals (put_signal, _nbi, signal_fetch, signal_wait_until, signal
 * add/set), point-to-point waits and tests of every type and form,
 * barrier/sync, team collectives (broadcast, collect, fcollect, alltoall,
 * alltoalls, reductions on every type), teams (split_strided, split_2d,
 * translate, config, team contexts), locks, and the deprecated
 * active-set collectives. Any number of PEs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int me, npes, right, left;
static uint64_t sig[4];
static long lock;
static long psync[SHMEM_BARRIER_SYNC_SIZE];

#define TEST_WAIT(T, NAME)                                                                                     \
    static void wait_##NAME(void) {                                                                           \
        T *v = shmem_calloc(4, sizeof(T));                                                                    \
        shmem_barrier_all();                                                                                  \
        shmem_##NAME##_atomic_set(&v[me % 4 == 0 ? 1 : 1], (T)(left + 1) * 0 + 5, right);                     \
        shmem_##NAME##_wait_until(&v[1], SHMEM_CMP_EQ, (T)5);                                                 \
        int status[4] = {0, 0, 1, 1};                                                                         \
        T cmps[4] = {0, 5, 9, 9};                                                                             \
        shmem_wait_until_all(v, 2, status, SHMEM_CMP_GE, (T)0);                                               \
        CHECK(shmem_wait_until_any(v, 4, status, SHMEM_CMP_EQ, (T)5) == 1, #NAME " any");                     \
        size_t idx[4];                                                                                        \
        CHECK(shmem_##NAME##_wait_until_some(v, 4, idx, NULL, SHMEM_CMP_NE, (T)0) == 1 && idx[0] == 1, #NAME " some"); \
        shmem_wait_until_all_vector(v, 2, NULL, SHMEM_CMP_EQ, cmps);                                          \
        CHECK(shmem_wait_until_any_vector(v, 4, status, SHMEM_CMP_EQ, cmps) == 0, #NAME " any_vector");       \
        CHECK(shmem_wait_until_some_vector(v, 4, idx, status, SHMEM_CMP_EQ, cmps) == 2, #NAME " some_vector"); \
        CHECK(shmem_test(&v[1], SHMEM_CMP_GT, (T)4) == 1 && shmem_test(&v[1], SHMEM_CMP_LT, (T)5) == 0, #NAME " test"); \
        CHECK(shmem_test_all(v, 4, NULL, SHMEM_CMP_LE, (T)5) == 1, #NAME " test_all");                        \
        CHECK(shmem_test_any(v, 4, NULL, SHMEM_CMP_GT, (T)5) == SIZE_MAX, #NAME " test_any none");            \
        CHECK(shmem_test_some(v, 4, idx, NULL, SHMEM_CMP_EQ, (T)0) == 3, #NAME " test_some");                 \
        CHECK(shmem_test_all_vector(v, 2, NULL, SHMEM_CMP_EQ, cmps) == 1, #NAME " test_all_vector");          \
        CHECK(shmem_test_any_vector(v, 4, status, SHMEM_CMP_NE, cmps) == SIZE_MAX, #NAME " test_any_vector");  \
        CHECK(shmem_test_some_vector(v, 4, idx, NULL, SHMEM_CMP_GE, cmps) == 2, #NAME " test_some_vector");   \
        CHECK(shmem_wait_until_any(v, 4, (int[]){1, 1, 1, 1}, SHMEM_CMP_EQ, (T)0) == SIZE_MAX, #NAME " empty"); \
        shmem_barrier_all();                                                                                  \
        shmem_free(v);                                                                                        \
    }
MWSHMEM_AMO_TYPES(TEST_WAIT)

/* Reductions: PE p contributes p+1+k (small values; products over few PEs). */
#define RED_CHECK(T, NAME, OP, EXPECT)                                                                         \
    {                                                                                                         \
        T *src = shmem_malloc(8 * sizeof(T)), *dst = shmem_malloc(8 * sizeof(T));                              \
        for (int k = 0; k < 8; k++) src[k] = (T)(me + 1 + (k % 2));                                           \
        CHECK(shmem_##NAME##_##OP##_reduce(SHMEM_TEAM_WORLD, dst, src, 8) == 0, #NAME " " #OP);               \
        for (int k = 0; k < 8; k++) {                                                                         \
            T want = (T)(k % 2);                                                                              \
            for (int p = 0; p < npes; p++) {                                                                  \
                T x = (T)(p + 1 + (k % 2));                                                                   \
                want = p == 0 ? x : (T)(EXPECT);                                                              \
            }                                                                                                 \
            CHECK(dst[k] == want, #NAME " " #OP " element %d", k);                                            \
        }                                                                                                     \
        shmem_barrier_all();                                                                                  \
        shmem_free(dst);                                                                                      \
        shmem_free(src);                                                                                      \
    }
#define RED_BIT(T, NAME) RED_CHECK(T, NAME, and, want & x) RED_CHECK(T, NAME, or, want | x) RED_CHECK(T, NAME, xor, want ^ x)
#define RED_CMP(T, NAME) RED_CHECK(T, NAME, max, x > want ? x : want) RED_CHECK(T, NAME, min, x < want ? x : want)
#define RED_ARITH(T, NAME) RED_CHECK(T, NAME, sum, want + x) RED_CHECK(T, NAME, prod, want * x)
static void reductions(void) {
    MWSHMEM_REDUCE_BIT_TYPES(RED_BIT)
    MWSHMEM_REDUCE_CMP_TYPES(RED_CMP)
    MWSHMEM_REDUCE_ARITH_TYPES(RED_ARITH)
    /* In place, generic name. */
    long *x = shmem_malloc(sizeof(long));
    *x = me;
    shmem_sum_reduce(SHMEM_TEAM_WORLD, x, x, 1);
    CHECK(*x == (long)npes * (npes - 1) / 2, "in-place sum %ld", *x);
    shmem_free(x);
}

#define TEST_COLL(T, NAME)                                                                                     \
    static void coll_##NAME(void) {                                                                           \
        size_t n = 3;                                                                                         \
        T *src = shmem_malloc(n * npes * sizeof(T)), *dst = shmem_malloc(n * npes * 2 * sizeof(T));           \
        for (size_t k = 0; k < n * npes; k++) src[k] = (T)(me * 10 + k % 10);                                 \
        int root = npes - 1;                                                                                  \
        shmem_broadcast(SHMEM_TEAM_WORLD, dst, src, n, root);                                                 \
        for (size_t k = 0; k < n; k++) CHECK(dst[k] == (T)(root * 10 + k), #NAME " broadcast");               \
        shmem_##NAME##_fcollect(SHMEM_TEAM_WORLD, dst, src, n);                                               \
        for (int p = 0; p < npes; p++)                                                                        \
            for (size_t k = 0; k < n; k++) CHECK(dst[p * n + k] == (T)(p * 10 + k), #NAME " fcollect");       \
        shmem_collect(SHMEM_TEAM_WORLD, dst, src, (size_t)(me % 3));                                          \
        size_t at = 0;                                                                                        \
        for (int p = 0; p < npes; p++)                                                                        \
            for (size_t k = 0; k < (size_t)(p % 3); k++, at++) CHECK(dst[at] == (T)(p * 10 + k), #NAME " collect"); \
        for (size_t k = 0; k < n * npes; k++) src[k] = (T)(me * 10 + k / n);                                  \
        shmem_alltoall(SHMEM_TEAM_WORLD, dst, src, n);                                                        \
        for (int p = 0; p < npes; p++)                                                                        \
            for (size_t k = 0; k < n; k++) CHECK(dst[p * n + k] == (T)(p * 10 + me), #NAME " alltoall");      \
        shmem_##NAME##_alltoalls(SHMEM_TEAM_WORLD, dst, src, 2, 1, 1);                                        \
        for (int p = 0; p < npes; p++) CHECK(dst[2 * p] == (T)(p * 10 + (me / (int)n) ), #NAME " alltoalls"); \
        shmem_barrier_all();                                                                                  \
        shmem_free(dst);                                                                                      \
        shmem_free(src);                                                                                      \
    }
MWSHMEM_RMA_TYPES(TEST_COLL)

static void signals(void) {
    long *data = shmem_calloc(64, sizeof(long));
    long mine[64];
    for (int k = 0; k < 64; k++) mine[k] = me * 1000 + k;
    shmem_long_put_signal(data, mine, 64, &sig[0], 1, SHMEM_SIGNAL_ADD, right);
    CHECK(shmem_signal_wait_until(&sig[0], SHMEM_CMP_EQ, 1) == 1, "signal value");
    for (int k = 0; k < 64; k++) CHECK(data[k] == left * 1000 + k, "signal data %d", k);
    shmem_putmem_signal_nbi(data, mine, 8, &sig[1], 42, SHMEM_SIGNAL_SET, right);
    shmem_quiet();
    shmem_signal_wait_until(&sig[1], SHMEM_CMP_GE, 42);
    CHECK(shmem_signal_fetch(&sig[1]) == 42, "signal_fetch");
    shmem_signal_add(&sig[2], 3, right);
    shmem_signal_set(SHMEM_CTX_DEFAULT, &sig[3], 7, right);
    shmem_signal_wait_until(&sig[2], SHMEM_CMP_EQ, 3);
    shmem_signal_wait_until(&sig[3], SHMEM_CMP_EQ, 7);
    shmem_barrier_all();
    shmem_free(data);
}

static void teams_and_locks(void) {
    /* Even PEs; then a 2-D split. */
    shmem_team_t even = SHMEM_TEAM_INVALID, xteam, yteam;
    shmem_team_config_t config = {.num_contexts = 2};
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, &config, SHMEM_TEAM_NUM_CONTEXTS, &even) == 0, "split");
    if (me % 2 == 0) {
        CHECK(even != SHMEM_TEAM_INVALID && shmem_team_my_pe(even) == me / 2, "even team pe");
        CHECK(shmem_team_n_pes(even) == (npes + 1) / 2, "even team size");
        CHECK(shmem_team_translate_pe(even, shmem_team_my_pe(even), SHMEM_TEAM_WORLD) == me, "translate");
        shmem_team_config_t got;
        CHECK(shmem_team_get_config(even, SHMEM_TEAM_NUM_CONTEXTS, &got) == 0 && got.num_contexts == 2, "config");
        int *v = shmem_malloc(2 * sizeof(int));
        *v = me;
        shmem_int_sum_reduce(even, v, v, 1);
        int want = 0;
        for (int p = 0; p < npes; p += 2) want += p;
        CHECK(*v == want, "team sum %d", *v);
        shmem_ctx_t tctx;
        CHECK(shmem_team_create_ctx(even, 0, &tctx) == 0, "team ctx");
        int tn = shmem_team_n_pes(even);
        shmem_ctx_int_p(tctx, &v[1], 1000 + me, (shmem_team_my_pe(even) + 1) % tn);
        shmem_ctx_quiet(tctx);
        shmem_sync(even);
        int from = (shmem_team_my_pe(even) + tn - 1) % tn;
        CHECK(v[1] == 1000 + shmem_team_translate_pe(even, from, SHMEM_TEAM_WORLD), "team ctx put %d", v[1]);
        shmem_team_t t;
        CHECK(shmem_ctx_get_team(tctx, &t) == 0 && t == even, "ctx team");
        shmem_ctx_destroy(tctx);
        shmem_sync(even);
        shmem_free(v);
        shmem_team_destroy(even);
    } else {
        CHECK(even == SHMEM_TEAM_INVALID && shmem_team_my_pe(even) == -1, "not a member");
        int *v = shmem_malloc(2 * sizeof(int));
        shmem_free(v);
    }
    CHECK(shmem_team_split_2d(SHMEM_TEAM_WORLD, 2, NULL, 0, &xteam, NULL, 0, &yteam) == 0, "split_2d");
    CHECK(shmem_team_my_pe(xteam) == me % 2 && shmem_team_my_pe(yteam) == me / 2, "2d coordinates");
    CHECK(shmem_team_translate_pe(yteam, 0, SHMEM_TEAM_WORLD) == me % 2, "2d translate");
    shmem_team_sync(xteam);
    shmem_team_destroy(xteam);
    shmem_team_destroy(yteam);
    /* Locks: a read-modify-write under the lock from every PE. */
    static int counter;
    for (int i = 0; i < 20; i++) {
        shmem_set_lock(&lock);
        int c = shmem_int_g(&counter, 0);
        shmem_int_p(&counter, c + 1, 0);
        shmem_clear_lock(&lock);
    }
    while (shmem_test_lock(&lock) != 0) {}
    shmem_int_p(&counter, shmem_int_g(&counter, 0) + 1, 0);
    shmem_clear_lock(&lock);
    shmem_barrier_all();
    if (me == 0) CHECK(counter == 21 * npes, "locked counter %d", counter);
}

static void active_sets(void) {
    static long src[8], dst[8 * 64];
    static int isrc[4], idst[4];
    static long pwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 8];
    for (int k = 0; k < 8; k++) src[k] = me * 8 + k;
    shmem_barrier(0, 0, npes, psync);
    shmem_broadcast64(dst, src, 8, 0, 0, 0, npes, psync);
    if (me != 0) for (int k = 0; k < 8; k++) CHECK(dst[k] == k, "broadcast64");
    shmem_fcollect64(dst, src, 8, 0, 0, npes, psync);
    for (int k = 0; k < 8 * npes; k++) CHECK(dst[k] == k, "fcollect64");
    shmem_collect64(dst, src, (size_t)(me % 2 + 1), 0, 0, npes, psync);
    shmem_alltoall64(dst, src, 1, 0, 0, npes, psync);
    for (int p = 0; p < npes && p < 8; p++) CHECK(dst[p] == p * 8 + me, "alltoall64");
    for (int k = 0; k < 4; k++) isrc[k] = me + k;
    shmem_int_sum_to_all(idst, isrc, 4, 0, 0, npes, (int *)pwrk, psync);
    for (int k = 0; k < 4; k++) CHECK(idst[k] == npes * (npes - 1) / 2 + k * npes, "sum_to_all");
    shmem_int_max_to_all(isrc, isrc, 4, 0, 0, npes, (int *)pwrk, psync);
    CHECK(isrc[0] == npes - 1, "max_to_all in place");
    if (npes >= 2) {
        /* The odd PEs alone (stride 2). */
        if (me % 2 == 1) {
            shmem_sync(1, 1, npes / 2, psync);
            shmem_long_sum_to_all(dst, src, 1, 1, 1, npes / 2, pwrk, psync);
            long want = 0;
            for (int p = 1; p < npes; p += 2) want += p * 8;
            CHECK(dst[0] == want, "odd sum_to_all %ld", dst[0]);
        }
    }
    shmem_barrier_all();
    CHECK(psync[0] == SHMEM_SYNC_VALUE && psync[1] == SHMEM_SYNC_VALUE, "pSync restored");
}

int main(void) {
    start_pes(0);
    me = shmem_my_pe();
    npes = shmem_n_pes();
    right = (me + 1) % npes;
    left = (me + npes - 1) % npes;
    signals();
#define RUN_WAIT(T, NAME) wait_##NAME();
    MWSHMEM_AMO_TYPES(RUN_WAIT)
    reductions();
#define RUN_COLL(T, NAME) coll_##NAME();
    MWSHMEM_RMA_TYPES(RUN_COLL)
    teams_and_locks();
    active_sets();
    shmem_sync_all();
    PASSED("sync_coll_test");
    return 0; /* start_pes: finalized at exit */
}
