/*
 * deprecated.c: names existing programs still call. start_pes, _my_pe,
 * _num_pes, shmalloc and friends, the cache routines (no-ops: memwire's
 * memory is coherent), and the active-set collectives with pSync/pWrk.
 * Only the active set's members call those, so they cannot form a memwire
 * team (a collective over its parent); they run here on one-sided
 * operations instead: a counter barrier in pSync[0..1] on the set's first
 * PE, then gets of the members' symmetric source arrays.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void finalize_at_exit(void) { shmem_finalize(); }

void start_pes(int npes) {
    (void)npes;
    if (mwshmem.initialized) return;
    shmem_init();
    atexit(finalize_at_exit);
}
int _my_pe(void) { return shmem_my_pe(); }
int _num_pes(void) { return shmem_n_pes(); }
void *shmalloc(size_t size) { return shmem_malloc(size); }
void shfree(void *ptr) { shmem_free(ptr); }
void *shrealloc(void *ptr, size_t size) { return shmem_realloc(ptr, size); }
void *shmemalign(size_t alignment, size_t size) { return shmem_align(alignment, size); }
void shmem_clear_cache_inv(void) {}
void shmem_set_cache_inv(void) {}
void shmem_clear_cache_line_inv(void *dest) { (void)dest; }
void shmem_set_cache_line_inv(void *dest) { (void)dest; }
void shmem_udcflush(void) {}
void shmem_udcflush_line(void *dest) { (void)dest; }

/* ---- active sets ------------------------------------------------------------------ */

struct active_set {
    int start, stride, size, me; /* me: this PE's index in the set */
};

static struct active_set active_set(const char *routine, int PE_start, int logPE_stride, int PE_size, long *pSync) {
    mwshmem_require_init(routine);
    if (logPE_stride < 0 || logPE_stride > 30 || PE_size < 1 || PE_start < 0)
        mwshmem_fail(routine, "bad active set: PE_start %d, logPE_stride %d, PE_size %d", PE_start, logPE_stride, PE_size);
    struct active_set set = {PE_start, 1 << logPE_stride, PE_size, -1};
    if ((long)PE_start + (long)(PE_size - 1) * set.stride >= mwshmem.n_pes)
        mwshmem_fail(routine, "active set PE_start %d, stride %d, PE_size %d runs past the last PE %d", PE_start,
                     set.stride, PE_size, mwshmem.n_pes - 1);
    int offset = mwshmem.my_pe - PE_start;
    if (offset >= 0 && offset % set.stride == 0 && offset / set.stride < PE_size) set.me = offset / set.stride;
    if (set.me < 0) mwshmem_fail(routine, "PE %d is not in the active set it was called with", mwshmem.my_pe);
    if (mwshmem_area_of(pSync, 2 * sizeof(long)) == NULL) mwshmem_fail(routine, "pSync is not symmetric");
    return set;
}

static int member(const struct active_set *set, int i) { return set->start + i * set->stride; }

/* Every member arrives (an atomic add to pSync[0] at the first member),
 * then the first member releases each (pSync[1] = 1); both words are back
 * at SHMEM_SYNC_VALUE when it returns. */
static void set_sync(const struct active_set *set, long *pSync) {
    unsigned spins = 0;
    if (set->size == 1) return;
    if (set->me == 0) {
        while (__atomic_load_n(&pSync[0], __ATOMIC_ACQUIRE) != set->size - 1) mwshmem_poll(&spins);
        __atomic_store_n(&pSync[0], SHMEM_SYNC_VALUE, __ATOMIC_RELAXED);
        for (int i = 1; i < set->size; i++) shmem_long_atomic_set(&pSync[1], 1, member(set, i));
        shmem_quiet();
    } else {
        shmem_long_atomic_add(&pSync[0], 1, member(set, 0));
        shmem_quiet();
        while (__atomic_load_n(&pSync[1], __ATOMIC_ACQUIRE) != 1) mwshmem_poll(&spins);
        __atomic_store_n(&pSync[1], SHMEM_SYNC_VALUE, __ATOMIC_RELAXED);
    }
}

void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync) {
    struct active_set set = active_set("shmem_barrier", PE_start, logPE_stride, PE_size, pSync);
    shmem_quiet();
    set_sync(&set, pSync);
}

void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync) {
    struct active_set set = active_set("shmem_sync", PE_start, logPE_stride, PE_size, pSync);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    set_sync(&set, pSync);
}

static void broadcast_set(const char *routine, void *dest, const void *source, size_t bytes, int root, int PE_start,
                          int logPE_stride, int PE_size, long *pSync) {
    struct active_set set = active_set(routine, PE_start, logPE_stride, PE_size, pSync);
    if (root < 0 || root >= set.size) mwshmem_fail(routine, "PE_root %d is not in the active set (0..%d)", root, set.size - 1);
    set_sync(&set, pSync);
    if (set.me != root) shmem_getmem(dest, source, bytes, member(&set, root));
    set_sync(&set, pSync);
}

void shmem_broadcast32(void *dest, const void *source, size_t nelems, int PE_root, int PE_start, int logPE_stride,
                       int PE_size, long *pSync) {
    broadcast_set("shmem_broadcast32", dest, source, nelems * 4, PE_root, PE_start, logPE_stride, PE_size, pSync);
}
void shmem_broadcast64(void *dest, const void *source, size_t nelems, int PE_root, int PE_start, int logPE_stride,
                       int PE_size, long *pSync) {
    broadcast_set("shmem_broadcast64", dest, source, nelems * 8, PE_root, PE_start, logPE_stride, PE_size, pSync);
}

static void collect_set(const char *routine, void *dest, const void *source, size_t bytes, bool fixed, int PE_start,
                        int logPE_stride, int PE_size, long *pSync) {
    struct active_set set = active_set(routine, PE_start, logPE_stride, PE_size, pSync);
    long *count = &mwshmem.scratch[0];
    *count = (long)bytes;
    set_sync(&set, pSync);
    size_t at = 0;
    for (int i = 0; i < set.size; i++) {
        size_t theirs = fixed ? bytes : (size_t)shmem_long_g(count, member(&set, i));
        shmem_getmem((char *)dest + at, source, theirs, member(&set, i));
        at += theirs;
    }
    set_sync(&set, pSync);
}

void shmem_collect32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                     long *pSync) {
    collect_set("shmem_collect32", dest, source, nelems * 4, false, PE_start, logPE_stride, PE_size, pSync);
}
void shmem_collect64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                     long *pSync) {
    collect_set("shmem_collect64", dest, source, nelems * 8, false, PE_start, logPE_stride, PE_size, pSync);
}
void shmem_fcollect32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                      long *pSync) {
    collect_set("shmem_fcollect32", dest, source, nelems * 4, true, PE_start, logPE_stride, PE_size, pSync);
}
void shmem_fcollect64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                      long *pSync) {
    collect_set("shmem_fcollect64", dest, source, nelems * 8, true, PE_start, logPE_stride, PE_size, pSync);
}

/* Member j's block for this PE is element index me*nelems.. of its source
 * (in strides of sst elements); it lands at j*nelems.. of dest (strides of dst). */
static void alltoall_set(const char *routine, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,
                         size_t elem, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync) {
    struct active_set set = active_set(routine, PE_start, logPE_stride, PE_size, pSync);
    if (dst < 1 || sst < 1) mwshmem_fail(routine, "strides dst %td and sst %td must be at least 1", dst, sst);
    set_sync(&set, pSync);
    for (int j = 0; j < set.size; j++) {
        char *to = (char *)dest + (size_t)j * nelems * (size_t)dst * elem;
        const char *from = (const char *)source + (size_t)set.me * nelems * (size_t)sst * elem;
        if (elem == 4) shmem_iget32(to, from, dst, sst, nelems, member(&set, j));
        else shmem_iget64(to, from, dst, sst, nelems, member(&set, j));
    }
    set_sync(&set, pSync);
}

void shmem_alltoall32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                      long *pSync) {
    alltoall_set("shmem_alltoall32", dest, source, 1, 1, 4, nelems, PE_start, logPE_stride, PE_size, pSync);
}
void shmem_alltoall64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                      long *pSync) {
    alltoall_set("shmem_alltoall64", dest, source, 1, 1, 8, nelems, PE_start, logPE_stride, PE_size, pSync);
}
void shmem_alltoalls32(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int PE_start,
                       int logPE_stride, int PE_size, long *pSync) {
    alltoall_set("shmem_alltoalls32", dest, source, dst, sst, 4, nelems, PE_start, logPE_stride, PE_size, pSync);
}
void shmem_alltoalls64(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int PE_start,
                       int logPE_stride, int PE_size, long *pSync) {
    alltoall_set("shmem_alltoalls64", dest, source, dst, sst, 8, nelems, PE_start, logPE_stride, PE_size, pSync);
}

/* Reductions: gather every member's source, combine in set order, and
 * write dest only after the closing sync (dest may be source). */
#define DEF_TOALL(T, N, OP, COMBINE)                                                                           \
    void shmem_##N##_##OP##_to_all(T *dest, const T *source, int nreduce, int PE_start, int logPE_stride,     \
                                   int PE_size, T *pWrk, long *pSync) {                                        \
        const char *routine = "shmem_" #N "_" #OP "_to_all";                                                   \
        (void)pWrk;                                                                                            \
        struct active_set set = active_set(routine, PE_start, logPE_stride, PE_size, pSync);                   \
        if (nreduce < 0) mwshmem_fail(routine, "nreduce %d is negative", nreduce);                             \
        size_t n = (size_t)nreduce;                                                                            \
        T *acc = malloc((n ? n : 1) * sizeof(T)), *theirs = malloc((n ? n : 1) * sizeof(T));                   \
        if (acc == NULL || theirs == NULL) mwshmem_fail(routine, "out of local memory");                       \
        set_sync(&set, pSync);                                                                                 \
        shmem_getmem(acc, source, n * sizeof(T), member(&set, 0));                                             \
        for (int j = 1; j < set.size; j++) {                                                                   \
            shmem_getmem(theirs, source, n * sizeof(T), member(&set, j));                                      \
            for (size_t i = 0; i < n; i++) {                                                                   \
                T a = acc[i], x = theirs[i];                                                                   \
                acc[i] = COMBINE;                                                                              \
            }                                                                                                  \
        }                                                                                                      \
        set_sync(&set, pSync);                                                                                 \
        memcpy(dest, acc, n * sizeof(T));                                                                      \
        free(acc);                                                                                             \
        free(theirs);                                                                                          \
    }
#define DEF_TOALL_BIT(T, N) DEF_TOALL(T, N, and, a & x) DEF_TOALL(T, N, or, a | x) DEF_TOALL(T, N, xor, a ^ x)
#define DEF_TOALL_CMP(T, N) DEF_TOALL(T, N, max, (x > a ? x : a)) DEF_TOALL(T, N, min, (x < a ? x : a))
#define DEF_TOALL_ARITH(T, N) DEF_TOALL(T, N, sum, a + x) DEF_TOALL(T, N, prod, a * x)
MWSHMEM_TOALL_BIT_TYPES(DEF_TOALL_BIT)
MWSHMEM_TOALL_CMP_TYPES(DEF_TOALL_CMP)
MWSHMEM_TOALL_ARITH_TYPES(DEF_TOALL_ARITH)
