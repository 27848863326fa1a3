/*
 * shmem.h: OpenSHMEM 1.5 on memwire (libmwshmem). Build with `oshcc`, run
 * with `oshrun -np N prog`; docs/openshmem.md lists every routine with its
 * status. Every routine of OpenSHMEM 1.5 declared here is implemented;
 * what is missing (the pshmem_ profiling names) is listed there.
 *
 * Typed routines are declared by X-macros over the specification's type
 * tables (MWSHMEM_* names are this header's own, not part of the API);
 * the C11 type-generic names are macros built on _Generic and exist only
 * when compiling C11 or later. From C++ use the typed names.
 */
#ifndef MWSHMEM_SHMEM_H
#define MWSHMEM_SHMEM_H

#include <stddef.h>
#include <stdint.h>
#if !defined(__cplusplus) && !defined(__STDC_NO_COMPLEX__)
#include <complex.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- constants ------------------------------------------------------- */
#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define SHMEM_MAX_NAME_LEN 256
#define SHMEM_VENDOR_STRING "memwire OpenSHMEM"
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

#define SHMEM_SIGNAL_SET 1
#define SHMEM_SIGNAL_ADD 2

#define SHMEM_CTX_SERIALIZED 1L
#define SHMEM_CTX_PRIVATE 2L
#define SHMEM_CTX_NOSTORE 4L

#define SHMEM_TEAM_NUM_CONTEXTS 1L

#define SHMEM_MALLOC_ATOMICS_REMOTE 1L
#define SHMEM_MALLOC_SIGNAL_REMOTE 2L

/* Deprecated active-set collectives (pSync / pWrk). */
#define SHMEM_SYNC_VALUE 0L
#define SHMEM_SYNC_SIZE 4
#define SHMEM_BARRIER_SYNC_SIZE 4
#define SHMEM_BCAST_SYNC_SIZE 4
#define SHMEM_REDUCE_SYNC_SIZE 4
#define SHMEM_COLLECT_SYNC_SIZE 4
#define SHMEM_ALLTOALL_SYNC_SIZE 4
#define SHMEM_ALLTOALLS_SYNC_SIZE 4
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

/* ---- handles --------------------------------------------------------- */
typedef struct mwshmem_ctx *shmem_ctx_t;
typedef struct mwshmem_team *shmem_team_t;
typedef struct {
    int num_contexts;
} shmem_team_config_t;

extern shmem_ctx_t const SHMEM_CTX_DEFAULT;
extern shmem_team_t const SHMEM_TEAM_WORLD;
extern shmem_team_t const SHMEM_TEAM_SHARED;
#define SHMEM_CTX_INVALID ((shmem_ctx_t)0)
#define SHMEM_TEAM_INVALID ((shmem_team_t)0)

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__cplusplus)
#define MWSHMEM_NORETURN _Noreturn
#elif defined(__GNUC__)
#define MWSHMEM_NORETURN __attribute__((noreturn))
#else
#define MWSHMEM_NORETURN
#endif

/* ---- type tables (specification tables T1-T6) ------------------------ */
/* T1, standard RMA types: X(TYPE, TYPENAME). */
#define MWSHMEM_RMA_TYPES(X)                                                                          \
    X(float, float) X(double, double) X(long double, longdouble) X(char, char) X(signed char, schar) \
    X(short, short) X(int, int) X(long, long) X(long long, longlong) X(unsigned char, uchar)       \
    X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong)                         \
    X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16) X(int32_t, int32)            \
    X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) \
    X(size_t, size) X(ptrdiff_t, ptrdiff)
/* T2, standard AMO types (also the point-to-point synchronization types). */
#define MWSHMEM_AMO_TYPES(X)                                                                  \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint) X(unsigned long, ulong) \
    X(unsigned long long, ulonglong) X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32)     \
    X(uint64_t, uint64) X(size_t, size) X(ptrdiff_t, ptrdiff)
/* T3 = T2 + float, double. */
#define MWSHMEM_EXT_AMO_TYPES(X) MWSHMEM_AMO_TYPES(X) X(float, float) X(double, double)
/* T4, bitwise AMO types. */
#define MWSHMEM_BIT_AMO_TYPES(X)                                                                     \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32) \
    X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)
/* T5, team reductions: bitwise rows, max/min rows, sum/prod rows. */
#define MWSHMEM_REDUCE_BIT_TYPES(X)                                                                   \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong) \
    X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16) X(int32_t, int32)            \
    X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) \
    X(size_t, size)
#define MWSHMEM_REDUCE_CMP_TYPES(X)                                                                  \
    X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long)                   \
    X(long long, longlong) X(ptrdiff_t, ptrdiff) MWSHMEM_REDUCE_BIT_TYPES(X) X(float, float)        \
    X(double, double) X(long double, longdouble)
#if defined(__cplusplus) || defined(__STDC_NO_COMPLEX__)
#define MWSHMEM_REDUCE_ARITH_TYPES(X) MWSHMEM_REDUCE_CMP_TYPES(X)
#else
#define MWSHMEM_REDUCE_ARITH_TYPES(X) \
    MWSHMEM_REDUCE_CMP_TYPES(X) X(double _Complex, complexd) X(float _Complex, complexf)
#endif
/* T6, deprecated active-set reductions. */
#define MWSHMEM_TOALL_BIT_TYPES(X) X(short, short) X(int, int) X(long, long) X(long long, longlong)
#define MWSHMEM_TOALL_CMP_TYPES(X) \
    MWSHMEM_TOALL_BIT_TYPES(X) X(float, float) X(double, double) X(long double, longdouble)
#if defined(__cplusplus) || defined(__STDC_NO_COMPLEX__)
#define MWSHMEM_TOALL_ARITH_TYPES(X) MWSHMEM_TOALL_CMP_TYPES(X)
#else
#define MWSHMEM_TOALL_ARITH_TYPES(X) \
    MWSHMEM_TOALL_CMP_TYPES(X) X(double _Complex, complexd) X(float _Complex, complexf)
#endif
/* Deprecated point-to-point types beyond T2. */
#define MWSHMEM_OLD_SYNC_TYPES(X) X(short, short) X(unsigned short, ushort)
/* Sized RMA: X(SIZE). */
#define MWSHMEM_SIZES(X) X(8) X(16) X(32) X(64) X(128)

/* ---- setup, exit and query ------------------------------------------- */
void shmem_init(void);
int shmem_init_thread(int requested, int *provided);
void shmem_query_thread(int *provided);
void shmem_query_initialized(int *initialized);
void shmem_finalize(void);
MWSHMEM_NORETURN void shmem_global_exit(int status);
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void *addr, int pe);
void *shmem_ptr(const void *dest, int pe);
void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe);
void shmem_info_get_version(int *major, int *minor);
void shmem_info_get_name(char *name);
void shmem_pcontrol(int level, ...);

/* ---- symmetric memory ------------------------------------------------ */
void *shmem_malloc(size_t size);
void *shmem_calloc(size_t count, size_t size);
void *shmem_align(size_t alignment, size_t size);
void *shmem_realloc(void *ptr, size_t size);
void *shmem_malloc_with_hints(size_t size, long hints);
void shmem_free(void *ptr);

/* ---- teams and contexts ---------------------------------------------- */
int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t *config, long config_mask, shmem_team_t *new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange, const shmem_team_config_t *xaxis_config,
                        long xaxis_mask, shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config,
                        long yaxis_mask, shmem_team_t *yaxis_team);
void shmem_team_destroy(shmem_team_t team);
int shmem_ctx_create(long options, shmem_ctx_t *ctx);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx);
void shmem_ctx_destroy(shmem_ctx_t ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team);

/* ---- RMA ------------------------------------------------------------- */
#define MWSHMEM_DECL_RMA(T, N)                                                                                    \
    void shmem_##N##_put(T *dest, const T *source, size_t nelems, int pe);                                       \
    void shmem_ctx_##N##_put(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe);                  \
    void shmem_##N##_p(T *dest, T value, int pe);                                                                \
    void shmem_ctx_##N##_p(shmem_ctx_t ctx, T *dest, T value, int pe);                                           \
    void shmem_##N##_iput(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);        \
    void shmem_ctx_##N##_iput(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,           \
                              size_t nelems, int pe);                                                            \
    void shmem_##N##_ibput(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, \
                           int pe);                                                                              \
    void shmem_ctx_##N##_ibput(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,          \
                               size_t bsize, size_t nblocks, int pe);                                            \
    void shmem_##N##_get(T *dest, const T *source, size_t nelems, int pe);                                       \
    void shmem_ctx_##N##_get(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe);                  \
    T shmem_##N##_g(const T *source, int pe);                                                                    \
    T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T *source, int pe);                                               \
    void shmem_##N##_iget(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);        \
    void shmem_ctx_##N##_iget(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,           \
                              size_t nelems, int pe);                                                            \
    void shmem_##N##_ibget(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, \
                           int pe);                                                                              \
    void shmem_ctx_##N##_ibget(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,          \
                               size_t bsize, size_t nblocks, int pe);                                            \
    void shmem_##N##_put_nbi(T *dest, const T *source, size_t nelems, int pe);                                   \
    void shmem_ctx_##N##_put_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe);              \
    void shmem_##N##_get_nbi(T *dest, const T *source, size_t nelems, int pe);                                   \
    void shmem_ctx_##N##_get_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe);              \
    void shmem_##N##_put_signal(T *dest, const T *source, size_t nelems, uint64_t *sig_addr, uint64_t signal,    \
                                int sig_op, int pe);                                                             \
    void shmem_ctx_##N##_put_signal(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,                    \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);                    \
    void shmem_##N##_put_signal_nbi(T *dest, const T *source, size_t nelems, uint64_t *sig_addr,                 \
                                    uint64_t signal, int sig_op, int pe);                                        \
    void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,                \
                                        uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);                \
    int shmem_##N##_alltoall(shmem_team_t team, T *dest, const T *source, size_t nelems);                        \
    int shmem_##N##_alltoalls(shmem_team_t team, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,         \
                              size_t nelems);                                                                    \
    int shmem_##N##_broadcast(shmem_team_t team, T *dest, const T *source, size_t nelems, int PE_root);          \
    int shmem_##N##_collect(shmem_team_t team, T *dest, const T *source, size_t nelems);                         \
    int shmem_##N##_fcollect(shmem_team_t team, T *dest, const T *source, size_t nelems);
MWSHMEM_RMA_TYPES(MWSHMEM_DECL_RMA)

#define MWSHMEM_DECL_SIZED(S)                                                                                  \
    void shmem_put##S(void *dest, const void *source, size_t nelems, int pe);                                 \
    void shmem_ctx_put##S(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);            \
    void shmem_get##S(void *dest, const void *source, size_t nelems, int pe);                                 \
    void shmem_ctx_get##S(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);            \
    void shmem_iput##S(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);  \
    void shmem_ctx_iput##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,     \
                           size_t nelems, int pe);                                                            \
    void shmem_iget##S(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);  \
    void shmem_ctx_iget##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,     \
                           size_t nelems, int pe);                                                            \
    void shmem_ibput##S(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize,           \
                        size_t nblocks, int pe);                                                              \
    void shmem_ctx_ibput##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,    \
                            size_t bsize, size_t nblocks, int pe);                                            \
    void shmem_ibget##S(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize,           \
                        size_t nblocks, int pe);                                                              \
    void shmem_ctx_ibget##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,    \
                            size_t bsize, size_t nblocks, int pe);                                            \
    void shmem_put##S##_nbi(void *dest, const void *source, size_t nelems, int pe);                           \
    void shmem_ctx_put##S##_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);      \
    void shmem_get##S##_nbi(void *dest, const void *source, size_t nelems, int pe);                           \
    void shmem_ctx_get##S##_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);      \
    void shmem_put##S##_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,             \
                               uint64_t signal, int sig_op, int pe);                                          \
    void shmem_ctx_put##S##_signal(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,            \
                                   uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);                  \
    void shmem_put##S##_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,         \
                                   uint64_t signal, int sig_op, int pe);                                      \
    void shmem_ctx_put##S##_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,        \
                                       uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
MWSHMEM_SIZES(MWSHMEM_DECL_SIZED)

void shmem_putmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_putmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_getmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_putmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_getmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_putmem_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal,
                         int sig_op, int pe);
void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                             uint64_t signal, int sig_op, int pe);
void shmem_putmem_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal,
                             int sig_op, int pe);
void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                                 uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);

/* ---- signals ----------------------------------------------------------- */
uint64_t shmem_signal_fetch(const uint64_t *sig_addr);
uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value);
void shmem_signal_add(uint64_t *sig_addr, uint64_t signal, int pe);
void shmem_ctx_signal_add(shmem_ctx_t ctx, uint64_t *sig_addr, uint64_t signal, int pe);
void shmem_signal_set(uint64_t *sig_addr, uint64_t signal, int pe);
void shmem_ctx_signal_set(shmem_ctx_t ctx, uint64_t *sig_addr, uint64_t signal, int pe);

/* ---- AMOs -------------------------------------------------------------- */
#define MWSHMEM_DECL_AMO_EXT(T, N)                                                                \
    T shmem_##N##_atomic_fetch(const T *source, int pe);                                         \
    T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t ctx, const T *source, int pe);                    \
    void shmem_##N##_atomic_set(T *dest, T value, int pe);                                       \
    void shmem_ctx_##N##_atomic_set(shmem_ctx_t ctx, T *dest, T value, int pe);                  \
    T shmem_##N##_atomic_swap(T *dest, T value, int pe);                                         \
    T shmem_ctx_##N##_atomic_swap(shmem_ctx_t ctx, T *dest, T value, int pe);                    \
    void shmem_##N##_atomic_fetch_nbi(T *fetch, const T *source, int pe);                        \
    void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t ctx, T *fetch, const T *source, int pe);   \
    void shmem_##N##_atomic_swap_nbi(T *fetch, T *dest, T value, int pe);                        \
    void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe);
MWSHMEM_EXT_AMO_TYPES(MWSHMEM_DECL_AMO_EXT)

#define MWSHMEM_DECL_AMO_STD(T, N)                                                                            \
    T shmem_##N##_atomic_compare_swap(T *dest, T cond, T value, int pe);                                     \
    T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t ctx, T *dest, T cond, T value, int pe);                \
    T shmem_##N##_atomic_fetch_inc(T *dest, int pe);                                                         \
    T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t ctx, T *dest, int pe);                                    \
    void shmem_##N##_atomic_inc(T *dest, int pe);                                                            \
    void shmem_ctx_##N##_atomic_inc(shmem_ctx_t ctx, T *dest, int pe);                                       \
    T shmem_##N##_atomic_fetch_add(T *dest, T value, int pe);                                                \
    T shmem_ctx_##N##_atomic_fetch_add(shmem_ctx_t ctx, T *dest, T value, int pe);                           \
    void shmem_##N##_atomic_add(T *dest, T value, int pe);                                                   \
    void shmem_ctx_##N##_atomic_add(shmem_ctx_t ctx, T *dest, T value, int pe);                              \
    void shmem_##N##_atomic_compare_swap_nbi(T *fetch, T *dest, T cond, T value, int pe);                    \
    void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T cond, T value, int pe); \
    void shmem_##N##_atomic_fetch_inc_nbi(T *fetch, T *dest, int pe);                                        \
    void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t ctx, T *fetch, T *dest, int pe);                   \
    void shmem_##N##_atomic_fetch_add_nbi(T *fetch, T *dest, T value, int pe);                               \
    void shmem_ctx_##N##_atomic_fetch_add_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe);          \
    void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value);                                              \
    void shmem_##N##_wait_until_all(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value);       \
    size_t shmem_##N##_wait_until_any(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value);     \
    size_t shmem_##N##_wait_until_some(T *ivars, size_t nelems, size_t *indices, const int *status, int cmp, \
                                       T cmp_value);                                                         \
    void shmem_##N##_wait_until_all_vector(T *ivars, size_t nelems, const int *status, int cmp,             \
                                           T *cmp_values);                                                   \
    size_t shmem_##N##_wait_until_any_vector(T *ivars, size_t nelems, const int *status, int cmp,           \
                                             T *cmp_values);                                                 \
    size_t shmem_##N##_wait_until_some_vector(T *ivars, size_t nelems, size_t *indices, const int *status,  \
                                              int cmp, T *cmp_values);                                       \
    int shmem_##N##_test(T *ivar, int cmp, T cmp_value);                                                     \
    int shmem_##N##_test_all(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value);              \
    size_t shmem_##N##_test_any(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value);           \
    size_t shmem_##N##_test_some(T *ivars, size_t nelems, size_t *indices, const int *status, int cmp,       \
                                 T cmp_value);                                                               \
    int shmem_##N##_test_all_vector(T *ivars, size_t nelems, const int *status, int cmp, T *cmp_values);     \
    size_t shmem_##N##_test_any_vector(T *ivars, size_t nelems, const int *status, int cmp, T *cmp_values);  \
    size_t shmem_##N##_test_some_vector(T *ivars, size_t nelems, size_t *indices, const int *status, int cmp, \
                                        T *cmp_values);
MWSHMEM_AMO_TYPES(MWSHMEM_DECL_AMO_STD)

#define MWSHMEM_DECL_AMO_BIT(T, N)                                                                 \
    T shmem_##N##_atomic_fetch_and(T *dest, T value, int pe);                                     \
    T shmem_ctx_##N##_atomic_fetch_and(shmem_ctx_t ctx, T *dest, T value, int pe);                \
    void shmem_##N##_atomic_and(T *dest, T value, int pe);                                        \
    void shmem_ctx_##N##_atomic_and(shmem_ctx_t ctx, T *dest, T value, int pe);                   \
    T shmem_##N##_atomic_fetch_or(T *dest, T value, int pe);                                      \
    T shmem_ctx_##N##_atomic_fetch_or(shmem_ctx_t ctx, T *dest, T value, int pe);                 \
    void shmem_##N##_atomic_or(T *dest, T value, int pe);                                         \
    void shmem_ctx_##N##_atomic_or(shmem_ctx_t ctx, T *dest, T value, int pe);                    \
    T shmem_##N##_atomic_fetch_xor(T *dest, T value, int pe);                                     \
    T shmem_ctx_##N##_atomic_fetch_xor(shmem_ctx_t ctx, T *dest, T value, int pe);                \
    void shmem_##N##_atomic_xor(T *dest, T value, int pe);                                        \
    void shmem_ctx_##N##_atomic_xor(shmem_ctx_t ctx, T *dest, T value, int pe);                   \
    void shmem_##N##_atomic_fetch_and_nbi(T *fetch, T *dest, T value, int pe);                    \
    void shmem_ctx_##N##_atomic_fetch_and_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe); \
    void shmem_##N##_atomic_fetch_or_nbi(T *fetch, T *dest, T value, int pe);                     \
    void shmem_ctx_##N##_atomic_fetch_or_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe); \
    void shmem_##N##_atomic_fetch_xor_nbi(T *fetch, T *dest, T value, int pe);                    \
    void shmem_ctx_##N##_atomic_fetch_xor_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe);
MWSHMEM_BIT_AMO_TYPES(MWSHMEM_DECL_AMO_BIT)

/* ---- collectives ------------------------------------------------------- */
void shmem_barrier_all(void);
void shmem_sync_all(void);
int shmem_team_sync(shmem_team_t team);
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,
                       size_t nelems);
int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems, int PE_root);
int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);

#define MWSHMEM_DECL_REDUCE(T, N, OP) int shmem_##N##_##OP##_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);
#define MWSHMEM_DECL_REDUCE_BIT(T, N) MWSHMEM_DECL_REDUCE(T, N, and) MWSHMEM_DECL_REDUCE(T, N, or) MWSHMEM_DECL_REDUCE(T, N, xor)
#define MWSHMEM_DECL_REDUCE_CMP(T, N) MWSHMEM_DECL_REDUCE(T, N, max) MWSHMEM_DECL_REDUCE(T, N, min)
#define MWSHMEM_DECL_REDUCE_ARITH(T, N) MWSHMEM_DECL_REDUCE(T, N, sum) MWSHMEM_DECL_REDUCE(T, N, prod)
MWSHMEM_REDUCE_BIT_TYPES(MWSHMEM_DECL_REDUCE_BIT)
MWSHMEM_REDUCE_CMP_TYPES(MWSHMEM_DECL_REDUCE_CMP)
MWSHMEM_REDUCE_ARITH_TYPES(MWSHMEM_DECL_REDUCE_ARITH)

/* ---- memory ordering, locks, point-to-point ------------------------------ */
void shmem_fence(void);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_quiet(void);
void shmem_ctx_quiet(shmem_ctx_t ctx);
void shmem_pe_quiet(const int *target_pes, size_t npes);
void shmem_ctx_pe_quiet(shmem_ctx_t ctx, const int *target_pes, size_t npes);
void shmem_set_lock(long *lock);
void shmem_clear_lock(long *lock);
int shmem_test_lock(long *lock);

/* ---- deprecated names that existing programs still call ------------------ */
void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);
void *shmalloc(size_t size);
void shfree(void *ptr);
void *shrealloc(void *ptr, size_t size);
void *shmemalign(size_t alignment, size_t size);
void shmem_clear_cache_inv(void);
void shmem_set_cache_inv(void);
void shmem_clear_cache_line_inv(void *dest);
void shmem_set_cache_line_inv(void *dest);
void shmem_udcflush(void);
void shmem_udcflush_line(void *dest);
void shmem_wait(long *ivar, long cmp_value);
/* The deprecated long-only C function; in C11 the generic macro below
 * shadows the name and selects on the argument's type. */
void shmem_wait_until(long *ivar, int cmp, long cmp_value);
#define MWSHMEM_DECL_OLD_WAIT(T, N) void shmem_##N##_wait(T *ivar, T cmp_value);
MWSHMEM_DECL_OLD_WAIT(short, short) MWSHMEM_DECL_OLD_WAIT(int, int) MWSHMEM_DECL_OLD_WAIT(long, long)
MWSHMEM_DECL_OLD_WAIT(long long, longlong)
#define MWSHMEM_DECL_OLD_TEST(T, N)                                 \
    void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value);     \
    int shmem_##N##_test(T *ivar, int cmp, T cmp_value);
MWSHMEM_OLD_SYNC_TYPES(MWSHMEM_DECL_OLD_TEST)
#define MWSHMEM_DECL_OLD_AMO_EXT(T, N)                  \
    T shmem_##N##_fetch(const T *source, int pe);      \
    void shmem_##N##_set(T *dest, T value, int pe);    \
    T shmem_##N##_swap(T *dest, T value, int pe);
#define MWSHMEM_DECL_OLD_AMO_STD(T, N)                      \
    T shmem_##N##_cswap(T *dest, T cond, T value, int pe); \
    T shmem_##N##_finc(T *dest, int pe);                   \
    void shmem_##N##_inc(T *dest, int pe);                 \
    T shmem_##N##_fadd(T *dest, T value, int pe);          \
    void shmem_##N##_add(T *dest, T value, int pe);
#define MWSHMEM_OLD_AMO_STD_TYPES(X) X(int, int) X(long, long) X(long long, longlong)
#define MWSHMEM_OLD_AMO_EXT_TYPES(X) MWSHMEM_OLD_AMO_STD_TYPES(X) X(float, float) X(double, double)
MWSHMEM_OLD_AMO_EXT_TYPES(MWSHMEM_DECL_OLD_AMO_EXT)
MWSHMEM_OLD_AMO_STD_TYPES(MWSHMEM_DECL_OLD_AMO_STD)

/* Active-set collectives (pSync / pWrk). The C symbol shmem_sync is this
 * four-argument form; the C11 macro shmem_sync(team) selects the team form. */
void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync);
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync);
void shmem_broadcast32(void *dest, const void *source, size_t nelems, int PE_root, int PE_start, int logPE_stride,
                       int PE_size, long *pSync);
void shmem_broadcast64(void *dest, const void *source, size_t nelems, int PE_root, int PE_start, int logPE_stride,
                       int PE_size, long *pSync);
void shmem_collect32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                     long *pSync);
void shmem_collect64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                     long *pSync);
void shmem_fcollect32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                      long *pSync);
void shmem_fcollect64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                      long *pSync);
void shmem_alltoall32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                      long *pSync);
void shmem_alltoall64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size,
                      long *pSync);
void shmem_alltoalls32(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int PE_start,
                       int logPE_stride, int PE_size, long *pSync);
void shmem_alltoalls64(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int PE_start,
                       int logPE_stride, int PE_size, long *pSync);
#define MWSHMEM_DECL_TOALL(T, N, OP)                                                                   \
    void shmem_##N##_##OP##_to_all(T *dest, const T *source, int nreduce, int PE_start, int logPE_stride, \
                                   int PE_size, T *pWrk, long *pSync);
#define MWSHMEM_DECL_TOALL_BIT(T, N) MWSHMEM_DECL_TOALL(T, N, and) MWSHMEM_DECL_TOALL(T, N, or) MWSHMEM_DECL_TOALL(T, N, xor)
#define MWSHMEM_DECL_TOALL_CMP(T, N) MWSHMEM_DECL_TOALL(T, N, max) MWSHMEM_DECL_TOALL(T, N, min)
#define MWSHMEM_DECL_TOALL_ARITH(T, N) MWSHMEM_DECL_TOALL(T, N, sum) MWSHMEM_DECL_TOALL(T, N, prod)
MWSHMEM_TOALL_BIT_TYPES(MWSHMEM_DECL_TOALL_BIT)
MWSHMEM_TOALL_CMP_TYPES(MWSHMEM_DECL_TOALL_CMP)
MWSHMEM_TOALL_ARITH_TYPES(MWSHMEM_DECL_TOALL_ARITH)

#ifdef __cplusplus
}
#endif

/* The library's own sources define MWSHMEM_NO_GENERIC: they define the
 * C functions whose names the generic macros take over. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__cplusplus) && !defined(MWSHMEM_NO_GENERIC)
#include "shmem_generic.h"
#endif

#endif /* MWSHMEM_SHMEM_H */
