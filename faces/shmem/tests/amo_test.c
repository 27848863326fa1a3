/* Every AMO on every type the spec lists: standard (fetch_add, add,
 * fetch_inc, inc, compare_swap and the _nbi forms), extended (fetch, set,
 * swap, _nbi; float and double too), bitwise (and/or/xor, fetch and _nbi),
 * typed, generic and shmem_ctx_ names, and the deprecated typed names.
 * Every PE hits PE 0's words at once; any number of PEs. */
#include <stdint.h>

#include "check.h"

static int me, npes;
static shmem_ctx_t ctx;

#define TEST_STD(T, NAME)                                                                                     \
    static void std_##NAME(void) {                                                                           \
        T *w = shmem_calloc(8, sizeof(T));                                                                   \
        T old = shmem_##NAME##_atomic_fetch_add(&w[0], (T)(me + 1), 0);                                      \
        CHECK((unsigned long long)old < (unsigned long long)(npes * (npes + 1) / 2), #NAME " fetch_add");                                                                 \
        shmem_atomic_add(&w[1], (T)2, 0);                                                                    \
        shmem_ctx_##NAME##_atomic_inc(ctx, &w[2], 0);                                                        \
        T ticket = shmem_atomic_fetch_inc(ctx, &w[3], 0);                                                    \
        T fetched = (T)-1;                                                                                   \
        shmem_##NAME##_atomic_fetch_add_nbi(&fetched, &w[4], (T)1, 0);                                       \
        T finc = (T)-1;                                                                                      \
        shmem_atomic_fetch_inc_nbi(ctx, &finc, &w[5], 0);                                                    \
        shmem_quiet();                                                                                       \
        shmem_ctx_quiet(ctx);                                                                                \
        CHECK((unsigned long long)fetched < (unsigned long long)npes && (unsigned long long)finc < (unsigned long long)npes, #NAME " nbi fetches");       \
        /* compare_swap: exactly one PE wins the swap from 0 to me+1. */                                     \
        T seen = shmem_atomic_compare_swap(&w[6], (T)0, (T)(me + 1), 0);                                     \
        T cs_nbi = (T)-1;                                                                                    \
        shmem_##NAME##_atomic_compare_swap_nbi(&cs_nbi, &w[7], (T)0, (T)(me + 1), 0);                        \
        shmem_quiet();                                                                                       \
        shmem_barrier_all();                                                                                 \
        /* Tickets are unique: gather them and look. */                                                      \
        static long long tickets[1024];                                                                      \
        long long mine = (long long)ticket;                                                                  \
        shmem_longlong_fcollect(SHMEM_TEAM_WORLD, tickets, &mine, 1);                                        \
        for (int i = 0; i < npes; i++)                                                                       \
            for (int j = i + 1; j < npes; j++) CHECK(tickets[i] != tickets[j], #NAME " ticket %lld twice", tickets[i]); \
        if (me == 0) {                                                                                       \
            CHECK(w[0] == (T)(npes * (npes + 1) / 2), #NAME " sum of fetch_add");                            \
            CHECK(w[1] == (T)(2 * npes) && w[2] == (T)npes && w[3] == (T)npes, #NAME " add/inc");            \
            CHECK(w[4] == (T)npes && w[5] == (T)npes, #NAME " nbi adds");                                    \
            CHECK(w[6] >= 1 && w[6] <= (T)npes, #NAME " compare_swap winner");                               \
        }                                                                                                    \
        T winner = shmem_##NAME##_g(&w[6], 0);                                                               \
        CHECK((seen == 0) == (winner == (T)(me + 1)), #NAME " compare_swap result %lld", (long long)seen);   \
        CHECK(cs_nbi == 0 || cs_nbi == shmem_##NAME##_g(&w[7], 0), #NAME " compare_swap_nbi");               \
        shmem_barrier_all();                                                                                 \
        shmem_free(w);                                                                                       \
    }
MWSHMEM_AMO_TYPES(TEST_STD)

#define TEST_EXT(T, NAME)                                                                                     \
    static void ext_##NAME(void) {                                                                           \
        T *w = shmem_calloc(4, sizeof(T));                                                                   \
        int right = (me + 1) % npes, left = (me + npes - 1) % npes;                                          \
        shmem_##NAME##_atomic_set(&w[0], (T)(me + 0.5 * (sizeof(T) == 4)), right);                          \
        shmem_atomic_set(ctx, &w[1], (T)(2 * me + 1), right);                                                \
        shmem_quiet();                                                                                       \
        shmem_ctx_quiet(ctx);                                                                                \
        shmem_barrier_all();                                                                                 \
        CHECK(w[0] == (T)(left + 0.5 * (sizeof(T) == 4)), #NAME " set");                                     \
        CHECK(shmem_atomic_fetch(&w[1], right) == (T)(2 * me + 1), #NAME " fetch");                       \
        CHECK(shmem_##NAME##_atomic_fetch(&w[1], me) == (T)(2 * left + 1), #NAME " fetch own");              \
        T f = 0;                                                                                             \
        shmem_atomic_fetch_nbi(&f, &w[1], right);                                                            \
        shmem_quiet();                                                                                       \
        CHECK(f == (T)(2 * me + 1), #NAME " fetch_nbi");                                                  \
        shmem_barrier_all();                                                                                 \
        T old = shmem_atomic_swap(&w[2], (T)(me + 3), right);                                                \
        CHECK(old == 0, #NAME " swap old");                                                                  \
        T old2 = 0;                                                                                          \
        shmem_ctx_##NAME##_atomic_swap_nbi(ctx, &old2, &w[2], (T)(me + 4), right);                           \
        shmem_ctx_quiet(ctx);                                                                                \
        CHECK(old2 == (T)(me + 3), #NAME " swap_nbi old");                                                   \
        shmem_barrier_all();                                                                                 \
        CHECK(w[2] == (T)(left + 4), #NAME " swapped in");                                                   \
        shmem_barrier_all();                                                                                 \
        shmem_free(w);                                                                                       \
    }
MWSHMEM_EXT_AMO_TYPES(TEST_EXT)

#define TEST_BIT(T, NAME)                                                                                     \
    static void bit_##NAME(void) {                                                                           \
        T *w = shmem_malloc(4 * sizeof(T));                                                                  \
        w[0] = 0;                                                                                            \
        w[1] = (T)~(T)0;                                                                                     \
        w[2] = 0;                                                                                            \
        w[3] = 0;                                                                                            \
        shmem_barrier_all();                                                                                 \
        T bit = (T)((T)1 << (me % 30));                                                                      \
        shmem_atomic_or(&w[0], bit, 0);                                                                      \
        T before = shmem_##NAME##_atomic_fetch_and(&w[1], (T)~bit, 0);                                       \
        shmem_ctx_##NAME##_atomic_xor(ctx, &w[2], bit, 0);                                                   \
        T f1 = 0, f2 = 0;                                                                                    \
        shmem_atomic_fetch_xor_nbi(&f1, &w[3], bit, 0);                                                      \
        shmem_##NAME##_atomic_fetch_or_nbi(&f2, &w[3], 0, 0);                                                \
        T f3 = shmem_atomic_fetch_or(ctx, &w[3], 0, 0);                                                      \
        T f4 = 0;                                                                                            \
        shmem_atomic_fetch_and_nbi(ctx, &f4, &w[3], (T)~(T)0, 0);                                            \
        shmem_##NAME##_atomic_and(&w[3], (T)~(T)0, 0);                                                       \
        shmem_quiet();                                                                                       \
        shmem_ctx_quiet(ctx);                                                                                \
        CHECK((before & bit) != 0 || npes > 30, #NAME " fetch_and saw my bit cleared early");                \
        CHECK((f2 & bit) != 0 && (f3 & bit) != 0 && (f4 & bit) != 0, #NAME " fetched bitwise");              \
        (void)f1;                                                                                            \
        shmem_barrier_all();                                                                                 \
        if (me == 0 && npes <= 30) {                                                                         \
            T all = (T)(((T)1 << npes) - 1);                                                                 \
            CHECK(w[0] == all && w[1] == (T)~all && w[2] == all && w[3] == all, #NAME " bitwise result");    \
        }                                                                                                    \
        shmem_barrier_all();                                                                                 \
        shmem_free(w);                                                                                       \
    }
MWSHMEM_BIT_AMO_TYPES(TEST_BIT)

static int old_counter, old_word;
static long long old_ll;
static double old_d;

int main(void) {
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    CHECK(shmem_ctx_create(0, &ctx) == 0, "ctx_create");
#define RUN_STD(T, NAME) std_##NAME();
#define RUN_EXT(T, NAME) ext_##NAME();
#define RUN_BIT(T, NAME) bit_##NAME();
    MWSHMEM_AMO_TYPES(RUN_STD)
    MWSHMEM_EXT_AMO_TYPES(RUN_EXT)
    MWSHMEM_BIT_AMO_TYPES(RUN_BIT)
    /* Deprecated names, on global variables. */
    int t = shmem_int_finc(&old_counter, 0);
    shmem_int_inc(&old_counter, 0);
    shmem_int_add(&old_counter, 10, 0);
    int f = shmem_int_fadd(&old_counter, 1, 0);
    CHECK(t >= 0 && f >= 0, "old fetches");
    shmem_fadd(&old_ll, 5LL, 0);
    shmem_barrier_all();
    if (me == 0) CHECK(old_counter == 13 * npes && old_ll == 5LL * npes, "deprecated adds: %d", old_counter);
    shmem_barrier_all();
    if (me == 0) {
        CHECK(shmem_int_cswap(&old_word, 0, 9, 0) == 0, "cswap");
        CHECK(shmem_int_swap(&old_word, 4, 0) == 9, "swap");
        CHECK(shmem_int_fetch(&old_word, 0) == 4, "fetch");
        shmem_int_set(&old_word, 6, 0);
        shmem_double_set(&old_d, 2.5, 0);
        shmem_quiet();
        CHECK(shmem_swap(&old_d, 1.5, 0) == 2.5 && shmem_fetch(&old_word, 0) == 6, "generic deprecated");
    }
    shmem_ctx_destroy(ctx);
    PASSED("amo_test");
    shmem_finalize();
    return 0;
}
