/*
 * coll.c: barrier_all, sync_all, team sync, and the team collectives
 * (broadcast, collect, fcollect, alltoall, alltoalls, reductions) on
 * memwire's teams and collectives: mw_bcast, mw_allgather(v),
 * mw_alltoall, mw_allreduce. Reductions memwire has no datatype for
 * (long double; complex products) gather every member's data with
 * mw_allgather and combine it here in team order, so every PE computes
 * the same result; complex sums are sums of the real and imaginary parts,
 * which memwire's F32/F64 sums do.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void shmem_barrier_all(void) {
    mwshmem_require_init("shmem_barrier_all");
    shmem_quiet();
    mwshmem_check("shmem_barrier_all", mw_barrier(mwshmem.ep));
}

void shmem_sync_all(void) {
    mwshmem_require_init("shmem_sync_all");
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    mwshmem_check("shmem_sync_all", mw_barrier(mwshmem.ep));
}

int shmem_team_sync(shmem_team_t team) {
    struct mwshmem_team *t = mwshmem_team("shmem_team_sync", team);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    mwshmem_check("shmem_team_sync", mw_team_barrier(mwshmem.ep, t->mt));
    return 0;
}

static void *scratch(const char *routine, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) mwshmem_fail(routine, "out of local memory (%zu bytes)", bytes);
    return p;
}

static int broadcast(const char *routine, shmem_team_t team, void *dest, const void *source, size_t bytes, int root) {
    struct mwshmem_team *t = mwshmem_team(routine, team);
    if (root < 0 || root >= t->n_pes) mwshmem_fail(routine, "PE_root %d is not in the team (0..%d)", root, t->n_pes - 1);
    if (t->my_pe == root && dest != source) memmove(dest, source, bytes);
    mwshmem_check(routine, mw_bcast(mwshmem.ep, t->mt, (uint32_t)root, dest, bytes));
    return 0;
}

static int fcollect(const char *routine, shmem_team_t team, void *dest, const void *source, size_t bytes) {
    struct mwshmem_team *t = mwshmem_team(routine, team);
    mwshmem_check(routine, mw_allgather(mwshmem.ep, t->mt, source, bytes, dest));
    return 0;
}

static int collect(const char *routine, shmem_team_t team, void *dest, const void *source, size_t bytes) {
    struct mwshmem_team *t = mwshmem_team(routine, team);
    size_t n = (size_t)t->n_pes;
    uint64_t mine = bytes, *all = scratch(routine, n * sizeof *all);
    size_t *counts = scratch(routine, n * sizeof *counts), *displs = scratch(routine, n * sizeof *displs);
    mwshmem_check(routine, mw_allgather(mwshmem.ep, t->mt, &mine, sizeof mine, all));
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        counts[i] = (size_t)all[i];
        displs[i] = at;
        at += counts[i];
    }
    mwshmem_check(routine, mw_allgatherv(mwshmem.ep, t->mt, source, bytes, dest, counts, displs));
    free(all);
    free(counts);
    free(displs);
    return 0;
}

static int alltoall(const char *routine, shmem_team_t team, void *dest, const void *source, size_t bytes) {
    struct mwshmem_team *t = mwshmem_team(routine, team);
    mwshmem_check(routine, mw_alltoall(mwshmem.ep, t->mt, source, dest, bytes));
    return 0;
}

/* Element i of the block for (or from) member j is at index j*nelems + i,
 * counted in strides of sst (dst) elements. */
static int alltoalls(const char *routine, shmem_team_t team, void *dest, const void *source, ptrdiff_t dst,
                     ptrdiff_t sst, size_t elem, size_t nelems) {
    struct mwshmem_team *t = mwshmem_team(routine, team);
    if (dst < 1 || sst < 1) mwshmem_fail(routine, "strides dst %td and sst %td must be at least 1", dst, sst);
    size_t total = (size_t)t->n_pes * nelems;
    char *packed = scratch(routine, total * elem), *got = scratch(routine, total * elem);
    for (size_t k = 0; k < total; k++) memcpy(packed + k * elem, (const char *)source + k * (size_t)sst * elem, elem);
    mwshmem_check(routine, mw_alltoall(mwshmem.ep, t->mt, packed, got, nelems * elem));
    for (size_t k = 0; k < total; k++) memcpy((char *)dest + k * (size_t)dst * elem, got + k * elem, elem);
    free(packed);
    free(got);
    return 0;
}

int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems, int PE_root) {
    return broadcast("shmem_broadcastmem", team, dest, source, nelems, PE_root);
}
int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems) {
    return collect("shmem_collectmem", team, dest, source, nelems);
}
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems) {
    return fcollect("shmem_fcollectmem", team, dest, source, nelems);
}
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems) {
    return alltoall("shmem_alltoallmem", team, dest, source, nelems);
}
int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,
                       size_t nelems) {
    return alltoalls("shmem_alltoallsmem", team, dest, source, dst, sst, 1, nelems);
}

#define DEF_COLL(T, N)                                                                                         \
    int shmem_##N##_broadcast(shmem_team_t team, T *dest, const T *source, size_t nelems, int PE_root) {      \
        return broadcast("shmem_" #N "_broadcast", team, dest, source, nelems * sizeof(T), PE_root);           \
    }                                                                                                          \
    int shmem_##N##_collect(shmem_team_t team, T *dest, const T *source, size_t nelems) {                     \
        return collect("shmem_" #N "_collect", team, dest, source, nelems * sizeof(T));                        \
    }                                                                                                          \
    int shmem_##N##_fcollect(shmem_team_t team, T *dest, const T *source, size_t nelems) {                    \
        return fcollect("shmem_" #N "_fcollect", team, dest, source, nelems * sizeof(T));                      \
    }                                                                                                          \
    int shmem_##N##_alltoall(shmem_team_t team, T *dest, const T *source, size_t nelems) {                    \
        return alltoall("shmem_" #N "_alltoall", team, dest, source, nelems * sizeof(T));                      \
    }                                                                                                          \
    int shmem_##N##_alltoalls(shmem_team_t team, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,      \
                              size_t nelems) {                                                                 \
        return alltoalls("shmem_" #N "_alltoalls", team, dest, source, dst, sst, sizeof(T), nelems);           \
    }
MWSHMEM_RMA_TYPES(DEF_COLL)

/* ---- reductions ---------------------------------------------------------------- */

/* memwire's datatype for an integer of `size` bytes. */
static mw_dtype int_dtype(size_t size, bool is_signed) {
    switch (size) {
    case 1: return is_signed ? MW_DTYPE_I8 : MW_DTYPE_U8;
    case 2: return is_signed ? MW_DTYPE_I16 : MW_DTYPE_U16;
    case 4: return is_signed ? MW_DTYPE_I32 : MW_DTYPE_U32;
    default: return is_signed ? MW_DTYPE_I64 : MW_DTYPE_U64;
    }
}

static int reduce(const char *routine, shmem_team_t team, void *dest, const void *source, size_t count, mw_dtype dtype,
                  mw_op op) {
    struct mwshmem_team *t = mwshmem_team(routine, team);
    mwshmem_check(routine, mw_allreduce(mwshmem.ep, t->mt, dtype, op, source, dest, count));
    return 0;
}

/* Every member's `bytes` of source, in team order (for the local combines). */
static void *gather_all(const char *routine, struct mwshmem_team *t, const void *source, size_t bytes) {
    void *all = scratch(routine, bytes * (size_t)t->n_pes);
    mwshmem_check(routine, mw_allgather(mwshmem.ep, t->mt, source, bytes, all));
    return all;
}

#define IS_SIGNED(T) ((T)-1 < (T)1)
#define DTYPE_OF(T) (((T)0.5 != 0) ? (sizeof(T) == 4 ? MW_DTYPE_F32 : MW_DTYPE_F64) : int_dtype(sizeof(T), IS_SIGNED(T)))

#define DEF_RED(T, N, OP, MWOP)                                                                                \
    int shmem_##N##_##OP##_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce) {              \
        return reduce("shmem_" #N "_" #OP "_reduce", team, dest, source, nreduce, DTYPE_OF(T), MWOP);          \
    }
#define DEF_RED_BIT(T, N) DEF_RED(T, N, and, MW_OP_BAND) DEF_RED(T, N, or, MW_OP_BOR) DEF_RED(T, N, xor, MW_OP_BXOR)
#define DEF_RED_CMP(T, N) DEF_RED(T, N, max, MW_OP_MAX) DEF_RED(T, N, min, MW_OP_MIN)
#define DEF_RED_ARITH(T, N) DEF_RED(T, N, sum, MW_OP_SUM) DEF_RED(T, N, prod, MW_OP_PROD)
MWSHMEM_REDUCE_BIT_TYPES(DEF_RED_BIT)

/* The team reduction rows memwire's datatypes cover (T5 without long double and complex). */
#define MWSHMEM_NATIVE_CMP_TYPES(X)                                                                     \
    X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong) \
    X(ptrdiff_t, ptrdiff) MWSHMEM_REDUCE_BIT_TYPES(X) X(float, float) X(double, double)
MWSHMEM_NATIVE_CMP_TYPES(DEF_RED_CMP)
MWSHMEM_NATIVE_CMP_TYPES(DEF_RED_ARITH)

/* Combined here: long double (all four), complex products. */
#define DEF_LOCAL_RED(T, N, OP, COMBINE)                                                                       \
    int shmem_##N##_##OP##_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce) {              \
        const char *routine = "shmem_" #N "_" #OP "_reduce";                                                   \
        struct mwshmem_team *t = mwshmem_team(routine, team);                                                  \
        T *all = gather_all(routine, t, source, nreduce * sizeof(T));                                          \
        for (size_t i = 0; i < nreduce; i++) {                                                                 \
            T acc = all[i];                                                                                    \
            for (int pe = 1; pe < t->n_pes; pe++) {                                                            \
                T x = all[(size_t)pe * nreduce + i];                                                           \
                acc = COMBINE;                                                                                 \
            }                                                                                                  \
            dest[i] = acc;                                                                                     \
        }                                                                                                      \
        free(all);                                                                                             \
        return 0;                                                                                              \
    }
DEF_LOCAL_RED(long double, longdouble, max, (x > acc ? x : acc))
DEF_LOCAL_RED(long double, longdouble, min, (x < acc ? x : acc))
DEF_LOCAL_RED(long double, longdouble, sum, (acc + x))
DEF_LOCAL_RED(long double, longdouble, prod, (acc * x))
DEF_LOCAL_RED(double _Complex, complexd, prod, (acc * x))
DEF_LOCAL_RED(float _Complex, complexf, prod, (acc * x))

int shmem_complexd_sum_reduce(shmem_team_t team, double _Complex *dest, const double _Complex *source, size_t nreduce) {
    return reduce("shmem_complexd_sum_reduce", team, dest, source, 2 * nreduce, MW_DTYPE_F64, MW_OP_SUM);
}
int shmem_complexf_sum_reduce(shmem_team_t team, float _Complex *dest, const float _Complex *source, size_t nreduce) {
    return reduce("shmem_complexf_sum_reduce", team, dest, source, 2 * nreduce, MW_DTYPE_F32, MW_OP_SUM);
}
