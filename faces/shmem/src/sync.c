/*
 * sync.c: point-to-point synchronization (wait_until, test and their
 * _all/_any/_some/_vector forms on every type, the deprecated short and
 * shmem_wait forms) and shmem_signal_wait_until. A wait polls the local
 * word with acquire loads while driving memwire's progress (so puts and
 * AMOs arriving over UDP land), and yields the CPU once it has spun a
 * while; a 64-bit unsigned word waits in memwire's own mw_wait_until.
 */
#include <string.h>

#include "internal.h"

static void check_cmp(const char *routine, int cmp) {
    if (cmp < SHMEM_CMP_EQ || cmp > SHMEM_CMP_LE) mwshmem_fail(routine, "cmp %d is not a SHMEM_CMP_* constant", cmp);
}

#define HOLDS(a, cmp, b)                                                                                    \
    ((cmp) == SHMEM_CMP_EQ   ? (a) == (b)                                                                    \
     : (cmp) == SHMEM_CMP_NE ? (a) != (b)                                                                    \
     : (cmp) == SHMEM_CMP_GT ? (a) > (b)                                                                     \
     : (cmp) == SHMEM_CMP_GE ? (a) >= (b)                                                                    \
     : (cmp) == SHMEM_CMP_LT ? (a) < (b)                                                                     \
                             : (a) <= (b))

#define DEF_SYNC_ONE(T, N)                                                                                      \
    static inline T load_##N(const T *ivar) { return __atomic_load_n(ivar, __ATOMIC_ACQUIRE); }                \
    void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value) {                                               \
        const char *routine = "shmem_" #N "_wait_until";                                                       \
        mwshmem_require_init(routine);                                                                         \
        check_cmp(routine, cmp);                                                                               \
        unsigned spins = 0;                                                                                    \
        while (!HOLDS(load_##N(ivar), cmp, cmp_value)) mwshmem_poll(&spins);                                  \
    }                                                                                                          \
    int shmem_##N##_test(T *ivar, int cmp, T cmp_value) {                                                      \
        mwshmem_require_init("shmem_" #N "_test");                                                             \
        check_cmp("shmem_" #N "_test", cmp);                                                                   \
        mw_progress(mwshmem.ep);                                                                               \
        return HOLDS(load_##N(ivar), cmp, cmp_value) ? 1 : 0;                                                  \
    }

/* One pass over the set: how many included elements hold, and which. */
#define DEF_SYNC_SET(T, N)                                                                                      \
    static bool included_##N(const int *status, size_t i) { return status == NULL || status[i] == 0; }        \
    static size_t scan_##N(T *ivars, size_t nelems, const int *status, int cmp, const T *values, T value,    \
                           size_t *indices, size_t *included) {                                                \
        size_t hits = 0;                                                                                       \
        *included = 0;                                                                                         \
        for (size_t i = 0; i < nelems; i++) {                                                                  \
            if (!included_##N(status, i)) continue;                                                            \
            (*included)++;                                                                                     \
            if (HOLDS(load_##N(&ivars[i]), cmp, values ? values[i] : value)) {                                 \
                if (indices) indices[hits] = i;                                                                \
                hits++;                                                                                        \
            }                                                                                                  \
        }                                                                                                      \
        return hits;                                                                                           \
    }                                                                                                          \
    static void all_##N(const char *routine, T *ivars, size_t nelems, const int *status, int cmp,             \
                        const T *values, T value) {                                                            \
        mwshmem_require_init(routine);                                                                         \
        check_cmp(routine, cmp);                                                                               \
        unsigned spins = 0;                                                                                    \
        size_t included;                                                                                       \
        while (scan_##N(ivars, nelems, status, cmp, values, value, NULL, &included) != included)              \
            mwshmem_poll(&spins);                                                                              \
    }                                                                                                          \
    static size_t any_##N(const char *routine, T *ivars, size_t nelems, const int *status, int cmp,           \
                          const T *values, T value, bool wait) {                                               \
        mwshmem_require_init(routine);                                                                         \
        check_cmp(routine, cmp);                                                                               \
        unsigned spins = 0;                                                                                    \
        for (;;) {                                                                                             \
            size_t included = 0;                                                                               \
            for (size_t i = 0; i < nelems; i++) {                                                              \
                if (!included_##N(status, i)) continue;                                                        \
                included++;                                                                                    \
                if (HOLDS(load_##N(&ivars[i]), cmp, values ? values[i] : value)) return i;                     \
            }                                                                                                  \
            if (included == 0 || !wait) return SIZE_MAX;                                                       \
            mwshmem_poll(&spins);                                                                              \
        }                                                                                                      \
    }                                                                                                          \
    static size_t some_##N(const char *routine, T *ivars, size_t nelems, size_t *indices, const int *status, \
                           int cmp, const T *values, T value, bool wait) {                                     \
        mwshmem_require_init(routine);                                                                         \
        check_cmp(routine, cmp);                                                                               \
        unsigned spins = 0;                                                                                    \
        for (;;) {                                                                                             \
            size_t included;                                                                                   \
            size_t hits = scan_##N(ivars, nelems, status, cmp, values, value, indices, &included);             \
            if (hits > 0 || included == 0 || !wait) return hits;                                               \
            mwshmem_poll(&spins);                                                                              \
        }                                                                                                      \
    }                                                                                                          \
    void shmem_##N##_wait_until_all(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value) {        \
        all_##N("shmem_" #N "_wait_until_all", ivars, nelems, status, cmp, NULL, cmp_value);                    \
    }                                                                                                          \
    void shmem_##N##_wait_until_all_vector(T *ivars, size_t nelems, const int *status, int cmp, T *cmp_values) { \
        all_##N("shmem_" #N "_wait_until_all_vector", ivars, nelems, status, cmp, cmp_values, 0);               \
    }                                                                                                          \
    size_t shmem_##N##_wait_until_any(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value) {      \
        return any_##N("shmem_" #N "_wait_until_any", ivars, nelems, status, cmp, NULL, cmp_value, true);       \
    }                                                                                                          \
    size_t shmem_##N##_wait_until_any_vector(T *ivars, size_t nelems, const int *status, int cmp,             \
                                             T *cmp_values) {                                                   \
        return any_##N("shmem_" #N "_wait_until_any_vector", ivars, nelems, status, cmp, cmp_values, 0, true);  \
    }                                                                                                          \
    size_t shmem_##N##_wait_until_some(T *ivars, size_t nelems, size_t *indices, const int *status, int cmp,  \
                                       T cmp_value) {                                                           \
        return some_##N("shmem_" #N "_wait_until_some", ivars, nelems, indices, status, cmp, NULL, cmp_value,  \
                        true);                                                                                  \
    }                                                                                                          \
    size_t shmem_##N##_wait_until_some_vector(T *ivars, size_t nelems, size_t *indices, const int *status,    \
                                              int cmp, T *cmp_values) {                                         \
        return some_##N("shmem_" #N "_wait_until_some_vector", ivars, nelems, indices, status, cmp, cmp_values, \
                        0, true);                                                                               \
    }                                                                                                          \
    int shmem_##N##_test_all(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value) {               \
        mwshmem_require_init("shmem_" #N "_test_all");                                                         \
        check_cmp("shmem_" #N "_test_all", cmp);                                                               \
        mw_progress(mwshmem.ep);                                                                               \
        size_t included;                                                                                       \
        return scan_##N(ivars, nelems, status, cmp, NULL, cmp_value, NULL, &included) == included;             \
    }                                                                                                          \
    int shmem_##N##_test_all_vector(T *ivars, size_t nelems, const int *status, int cmp, T *cmp_values) {      \
        mwshmem_require_init("shmem_" #N "_test_all_vector");                                                  \
        check_cmp("shmem_" #N "_test_all_vector", cmp);                                                        \
        mw_progress(mwshmem.ep);                                                                               \
        size_t included;                                                                                       \
        return scan_##N(ivars, nelems, status, cmp, cmp_values, 0, NULL, &included) == included;               \
    }                                                                                                          \
    size_t shmem_##N##_test_any(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value) {            \
        mw_progress(mwshmem.ep);                                                                               \
        return any_##N("shmem_" #N "_test_any", ivars, nelems, status, cmp, NULL, cmp_value, false);            \
    }                                                                                                          \
    size_t shmem_##N##_test_any_vector(T *ivars, size_t nelems, const int *status, int cmp, T *cmp_values) {   \
        mw_progress(mwshmem.ep);                                                                               \
        return any_##N("shmem_" #N "_test_any_vector", ivars, nelems, status, cmp, cmp_values, 0, false);       \
    }                                                                                                          \
    size_t shmem_##N##_test_some(T *ivars, size_t nelems, size_t *indices, const int *status, int cmp,        \
                                 T cmp_value) {                                                                 \
        mw_progress(mwshmem.ep);                                                                               \
        return some_##N("shmem_" #N "_test_some", ivars, nelems, indices, status, cmp, NULL, cmp_value, false); \
    }                                                                                                          \
    size_t shmem_##N##_test_some_vector(T *ivars, size_t nelems, size_t *indices, const int *status, int cmp, \
                                        T *cmp_values) {                                                        \
        mw_progress(mwshmem.ep);                                                                               \
        return some_##N("shmem_" #N "_test_some_vector", ivars, nelems, indices, status, cmp, cmp_values, 0,   \
                        false);                                                                                 \
    }

#define DEF_SYNC(T, N) DEF_SYNC_ONE(T, N) DEF_SYNC_SET(T, N)
MWSHMEM_AMO_TYPES(DEF_SYNC)
MWSHMEM_OLD_SYNC_TYPES(DEF_SYNC_ONE)

/* ---- deprecated forms ---------------------------------------------------------- */
void shmem_wait_until(long *ivar, int cmp, long cmp_value) { shmem_long_wait_until(ivar, cmp, cmp_value); }
void shmem_wait(long *ivar, long cmp_value) { shmem_long_wait_until(ivar, SHMEM_CMP_NE, cmp_value); }
void shmem_short_wait(short *ivar, short cmp_value) { shmem_short_wait_until(ivar, SHMEM_CMP_NE, cmp_value); }
void shmem_int_wait(int *ivar, int cmp_value) { shmem_int_wait_until(ivar, SHMEM_CMP_NE, cmp_value); }
void shmem_long_wait(long *ivar, long cmp_value) { shmem_long_wait_until(ivar, SHMEM_CMP_NE, cmp_value); }
void shmem_longlong_wait(long long *ivar, long long cmp_value) {
    shmem_longlong_wait_until(ivar, SHMEM_CMP_NE, cmp_value);
}

uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value) {
    const char *routine = "shmem_signal_wait_until";
    mwshmem_require_init(routine);
    check_cmp(routine, cmp);
    const struct mwshmem_area *area = mwshmem_area_of(sig_addr, 8);
    if (area == NULL || (uintptr_t)sig_addr % 8 != 0)
        mwshmem_fail(routine, "sig_addr %p is not an aligned symmetric uint64_t", (void *)sig_addr);
    uint64_t seen;
    mwshmem_check(routine, mw_wait_until(mwshmem.ep, area->region, area->local_start + (uint64_t)((char *)sig_addr - area->base),
                                         (mw_cmp)cmp, cmp_value, &seen));
    return seen;
}
