/* RMA on every standard RMA type (typed names, the C11 generic names, the
 * shmem_ctx_ forms), the sized and mem forms: put, get, p, g, iput, iget,
 * ibput, ibget, put_nbi, get_nbi, fence, quiet. Each PE writes into its
 * right neighbour and reads back from it; any number of PEs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define N 24
static int me, npes, right, left;
static shmem_ctx_t ctx;

/* Value k of the pattern PE p writes, as type T (small, exact in every type). */
#define VAL(T, p, k) ((T)((p) * 3 + (k) % 40 + 1))

#define TEST_TYPE(T, NAME)                                                                                      \
    static void test_##NAME(void) {                                                                            \
        T *dst = shmem_calloc(4 * N, sizeof(T));                                                               \
        T src[4 * N], got[4 * N];                                                                              \
        for (int k = 0; k < 4 * N; k++) src[k] = VAL(T, me, k);                                                \
        /* put (typed), then get back from the right neighbour. */                                             \
        shmem_##NAME##_put(dst, src, N, right);                                                                \
        shmem_barrier_all();                                                                                   \
        for (int k = 0; k < N; k++) CHECK(dst[k] == VAL(T, left, k), #NAME " put %d", k);                      \
        shmem_##NAME##_get(got, dst, N, right);                                                                \
        for (int k = 0; k < N; k++) CHECK(got[k] == VAL(T, me, k), #NAME " get %d", k);                        \
        /* p / g, generic and ctx forms. */                                                                    \
        shmem_p(&dst[N], VAL(T, me, 7), right);                                                                \
        shmem_ctx_##NAME##_p(ctx, &dst[N + 1], VAL(T, me, 8), right);                                          \
        shmem_barrier_all();                                                                                   \
        CHECK(dst[N] == VAL(T, left, 7) && dst[N + 1] == VAL(T, left, 8), #NAME " p");                         \
        CHECK(shmem_g(&dst[N], right) == VAL(T, me, 7), #NAME " g");                                           \
        CHECK(shmem_g(ctx, &dst[N + 1], right) == VAL(T, me, 8), #NAME " ctx g");                              \
        CHECK(shmem_##NAME##_g(&dst[N], right) == VAL(T, me, 7), #NAME " typed g");                            \
        shmem_barrier_all();                                                                                   \
        /* iput: every 2nd source element to every 3rd destination slot; iget back. */                         \
        memset(dst, 0, 4 * N * sizeof(T));                                                                     \
        shmem_barrier_all();                                                                                   \
        shmem_iput(dst, src, 3, 2, N / 2, right);                                                              \
        shmem_barrier_all();                                                                                   \
        for (int k = 0; k < N / 2; k++) CHECK(dst[3 * k] == VAL(T, left, 2 * k), #NAME " iput %d", k);        \
        for (int k = 0; k < N / 2; k++) CHECK(dst[3 * k + 1] == 0, #NAME " iput wrote between %d", k);         \
        memset(got, 0, sizeof got);                                                                            \
        shmem_ctx_##NAME##_iget(ctx, got, dst, 1, 3, N / 2, right);                                            \
        for (int k = 0; k < N / 2; k++) CHECK(got[k] == VAL(T, me, 2 * k), #NAME " iget %d", k);               \
        shmem_barrier_all();                                                                                   \
        /* ibput / ibget: blocks of 2 elements, 5 apart at the target, 3 apart here. */                        \
        memset(dst, 0, 4 * N * sizeof(T));                                                                     \
        shmem_barrier_all();                                                                                   \
        shmem_##NAME##_ibput(dst, src, 5, 3, 2, 4, right);                                                     \
        shmem_barrier_all();                                                                                   \
        for (int b = 0; b < 4; b++)                                                                            \
            for (int e = 0; e < 2; e++) CHECK(dst[5 * b + e] == VAL(T, left, 3 * b + e), #NAME " ibput");      \
        memset(got, 0, sizeof got);                                                                            \
        shmem_##NAME##_ibget(got, dst, 2, 5, 2, 4, right);                                                     \
        for (int b = 0; b < 4; b++)                                                                            \
            for (int e = 0; e < 2; e++) CHECK(got[2 * b + e] == VAL(T, me, 3 * b + e), #NAME " ibget");        \
        shmem_barrier_all();                                                                                   \
        /* put_nbi / get_nbi on a context, completed by that context's quiet. */                               \
        shmem_put_nbi(ctx, &dst[2 * N], src, N, right);                                                        \
        shmem_ctx_quiet(ctx);                                                                                  \
        shmem_barrier_all();                                                                                   \
        for (int k = 0; k < N; k++) CHECK(dst[2 * N + k] == VAL(T, left, k), #NAME " put_nbi %d", k);          \
        memset(got, 0, sizeof got);                                                                            \
        shmem_get_nbi(got, &dst[2 * N], N, right);                                                             \
        shmem_quiet();                                                                                         \
        for (int k = 0; k < N; k++) CHECK(got[k] == VAL(T, me, k), #NAME " get_nbi %d", k);                    \
        /* generic put/get with a context, and fence ordering two puts. */                                     \
        shmem_put(ctx, &dst[3 * N], src, N, right);                                                            \
        shmem_ctx_fence(ctx);                                                                                  \
        shmem_put(&dst[3 * N], &src[1], 1, right);                                                             \
        shmem_barrier_all();                                                                                   \
        CHECK(dst[3 * N] == VAL(T, left, 1) && dst[3 * N + 5] == VAL(T, left, 5), #NAME " ordered puts");      \
        shmem_get(ctx, got, &dst[3 * N], N, right);                                                            \
        CHECK(got[2] == VAL(T, me, 2), #NAME " ctx get");                                                      \
        shmem_barrier_all();                                                                                   \
        shmem_free(dst);                                                                                       \
    }
MWSHMEM_RMA_TYPES(TEST_TYPE)

#define TEST_SIZED(S)                                                                                          \
    static void test_sized_##S(void) {                                                                         \
        enum { B = S / 8 };                                                                                    \
        unsigned char *dst = shmem_calloc(8 * N, B), src[8 * N * B], got[8 * N * B];                           \
        for (int k = 0; k < 8 * N * B; k++) src[k] = (unsigned char)(me * 7 + k);                              \
        shmem_put##S(dst, src, N, right);                                                                      \
        shmem_barrier_all();                                                                                   \
        for (int k = 0; k < N * B; k++) CHECK(dst[k] == (unsigned char)(left * 7 + k), "put" #S " %d", k);     \
        shmem_get##S(got, dst, N, right);                                                                      \
        CHECK(memcmp(got, src, N * B) == 0, "get" #S);                                                         \
        shmem_ctx_put##S##_nbi(ctx, dst + N * B, src, N, right);                                               \
        shmem_ctx_quiet(ctx);                                                                                  \
        shmem_barrier_all();                                                                                   \
        CHECK(memcmp(dst + N * B, dst, N * B) == 0, "put" #S "_nbi");                                          \
        shmem_iput##S(dst + 2 * N * B, src, 2, 1, 4, right);                                                   \
        shmem_barrier_all();                                                                                   \
        for (int e = 0; e < 4; e++)                                                                            \
            CHECK(memcmp(dst + 2 * N * B + 2 * e * B, dst + e * B, B) == 0, "iput" #S " %d", e);               \
        shmem_iget##S(got, dst + 2 * N * B, 1, 2, 4, right);                                                   \
        CHECK(memcmp(got, src, 4 * B) == 0, "iget" #S);                                                        \
        shmem_get##S##_nbi(got, dst, 2, right);                                                                \
        shmem_quiet();                                                                                         \
        CHECK(memcmp(got, src, 2 * B) == 0, "get" #S "_nbi");                                                  \
        shmem_barrier_all();                                                                                   \
        shmem_free(dst);                                                                                       \
    }
MWSHMEM_SIZES(TEST_SIZED)

int main(void) {
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    right = (me + 1) % npes;
    left = (me + npes - 1) % npes;
    CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) == 0, "ctx_create");
#define RUN(T, NAME) test_##NAME();
    MWSHMEM_RMA_TYPES(RUN)
#define RUN_SIZED(S) test_sized_##S();
    MWSHMEM_SIZES(RUN_SIZED)
    /* mem forms, large enough to be cut into chunks on every path. */
    size_t big = (size_t)1 << 20;
    unsigned char *buf = shmem_malloc(2 * big), *mine = malloc(big), *back = malloc(big);
    for (size_t k = 0; k < big; k++) mine[k] = (unsigned char)(k * 31 + me);
    shmem_putmem(buf, mine, big, right);
    shmem_ctx_putmem_nbi(ctx, buf + big, mine, big, right);
    shmem_ctx_quiet(ctx);
    shmem_barrier_all();
    for (size_t k = 0; k < big; k += 4093) CHECK(buf[k] == (unsigned char)(k * 31 + left), "putmem %zu", k);
    CHECK(memcmp(buf, buf + big, big) == 0, "putmem_nbi");
    shmem_getmem(back, buf, big, right);
    CHECK(memcmp(back, mine, big) == 0, "getmem");
    memset(back, 0, big);
    shmem_getmem_nbi(back, buf + big, big, right);
    shmem_quiet();
    CHECK(memcmp(back, mine, big) == 0, "getmem_nbi");
    shmem_ctx_getmem(ctx, back, buf, 16, right);
    CHECK(memcmp(back, mine, 16) == 0, "ctx getmem");
    shmem_barrier_all();
    shmem_free(buf);
    free(mine);
    free(back);
    shmem_team_t team;
    CHECK(shmem_ctx_get_team(ctx, &team) == 0 && team == SHMEM_TEAM_WORLD, "ctx team");
    shmem_ctx_destroy(ctx);
    PASSED("rma_test");
    shmem_finalize();
    return 0;
}
