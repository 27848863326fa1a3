/*
 * shmem_generic.h: the C11 type-generic interfaces of OpenSHMEM 1.5
 * (included by shmem.h under C11; not for direct use). Each macro selects
 * the typed routine with _Generic on the first pointer argument; the RMA,
 * AMO and signal names also accept a leading shmem_ctx_t and then select
 * the shmem_ctx_ routine on the second. Fixed-width and size types are
 * the base types they are defined as (int32_t is int, and so on), so each
 * list names every distinct C type once.
 */
#ifndef MWSHMEM_SHMEM_GENERIC_H
#define MWSHMEM_SHMEM_GENERIC_H

/* Selected when no type matches: calling it is a compile-time error. */
void mwshmem_generic_no_such_type(void);

#define MWSHMEM_A1(a, ...) a
#define MWSHMEM_A2(a, b, ...) b

/* X(TYPE, TYPENAME) lists for selection, one entry per distinct C type. */
#define MWSHMEM_G_RMA(X, P, O)                                                                              \
    X(float, P##float_##O) X(double, P##double_##O) X(long double, P##longdouble_##O) X(char, P##char_##O) \
    X(signed char, P##schar_##O) X(short, P##short_##O) X(int, P##int_##O) X(long, P##long_##O)            \
    X(long long, P##longlong_##O) X(unsigned char, P##uchar_##O) X(unsigned short, P##ushort_##O)           \
    X(unsigned int, P##uint_##O) X(unsigned long, P##ulong_##O) X(unsigned long long, P##ulonglong_##O)
#define MWSHMEM_G_AMO(X, P, O)                                                                              \
    X(int, P##int_##O) X(long, P##long_##O) X(long long, P##longlong_##O) X(unsigned int, P##uint_##O)     \
    X(unsigned long, P##ulong_##O) X(unsigned long long, P##ulonglong_##O)
#define MWSHMEM_G_AMO_EXT(X, P, O) MWSHMEM_G_AMO(X, P, O) X(float, P##float_##O) X(double, P##double_##O)
#define MWSHMEM_G_AMO_BIT(X, P, O)                                                                          \
    X(unsigned int, P##uint_##O) X(unsigned long, P##ulong_##O) X(unsigned long long, P##ulonglong_##O)    \
    X(int, P##int32_##O) X(long, P##int64_##O)
#define MWSHMEM_G_SYNC(X, P, O) MWSHMEM_G_AMO(X, P, O) X(short, P##short_##O) X(unsigned short, P##ushort_##O)
#define MWSHMEM_G_RED_BIT(X, P, O)                                                                          \
    X(unsigned char, P##uchar_##O) X(unsigned short, P##ushort_##O) X(unsigned int, P##uint_##O)           \
    X(unsigned long, P##ulong_##O) X(unsigned long long, P##ulonglong_##O) X(signed char, P##int8_##O)     \
    X(short, P##int16_##O) X(int, P##int32_##O) X(long, P##int64_##O)
#define MWSHMEM_G_RED_CMP(X, P, O)                                                                          \
    X(char, P##char_##O) X(signed char, P##schar_##O) X(short, P##short_##O) X(int, P##int_##O)            \
    X(long, P##long_##O) X(long long, P##longlong_##O) X(unsigned char, P##uchar_##O)                      \
    X(unsigned short, P##ushort_##O) X(unsigned int, P##uint_##O) X(unsigned long, P##ulong_##O)           \
    X(unsigned long long, P##ulonglong_##O) X(float, P##float_##O) X(double, P##double_##O)               \
    X(long double, P##longdouble_##O)
#ifdef __STDC_NO_COMPLEX__
#define MWSHMEM_G_RED_ARITH(X, P, O) MWSHMEM_G_RED_CMP(X, P, O)
#else
#define MWSHMEM_G_RED_ARITH(X, P, O) \
    MWSHMEM_G_RED_CMP(X, P, O) X(double _Complex, P##complexd_##O) X(float _Complex, P##complexf_##O)
#endif
#define MWSHMEM_G_OLD_AMO(X, P, O) X(int, P##int_##O) X(long, P##long_##O) X(long long, P##longlong_##O)
#define MWSHMEM_G_OLD_AMO_EXT(X, P, O) MWSHMEM_G_OLD_AMO(X, P, O) X(float, P##float_##O) X(double, P##double_##O)

#define MWSHMEM_G_PTR(T, F) T *: F,
#define MWSHMEM_G_CPTR(T, F) T *: F, const T *: F,

/* Selection on a pointer (LIST: a list above; P: name prefix; O: operation). */
#define MWSHMEM_SEL(x, LIST, P, O) _Generic((x), LIST(MWSHMEM_G_PTR, P, O) default: mwshmem_generic_no_such_type)
#define MWSHMEM_SELC(x, LIST, P, O) _Generic((x), LIST(MWSHMEM_G_CPTR, P, O) default: mwshmem_generic_no_such_type)

/* With or without a leading context: the first argument's type decides. */
#define MWSHMEM_CTX(SEL, LIST, O, ...)                                                     \
    _Generic((MWSHMEM_A1(__VA_ARGS__, 0)),                                                 \
        shmem_ctx_t: SEL(MWSHMEM_A2(__VA_ARGS__, 0, 0), LIST, shmem_ctx_, O),              \
        default: SEL(MWSHMEM_A1(__VA_ARGS__, 0), LIST, shmem_, O))(__VA_ARGS__)
#define MWSHMEM_NOCTX(SEL, LIST, O, ...) SEL(MWSHMEM_A1(__VA_ARGS__, 0), LIST, shmem_, O)(__VA_ARGS__)

/* RMA */
#define shmem_put(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_RMA, put, __VA_ARGS__)
#define shmem_p(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_RMA, p, __VA_ARGS__)
#define shmem_iput(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_RMA, iput, __VA_ARGS__)
#define shmem_ibput(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_RMA, ibput, __VA_ARGS__)
#define shmem_get(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_RMA, get, __VA_ARGS__)
#define shmem_g(...) MWSHMEM_CTX(MWSHMEM_SELC, MWSHMEM_G_RMA, g, __VA_ARGS__)
#define shmem_iget(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_RMA, iget, __VA_ARGS__)
#define shmem_ibget(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_RMA, ibget, __VA_ARGS__)
#define shmem_put_nbi(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_RMA, put_nbi, __VA_ARGS__)
#define shmem_get_nbi(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_RMA, get_nbi, __VA_ARGS__)
#define shmem_put_signal(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_RMA, put_signal, __VA_ARGS__)
#define shmem_put_signal_nbi(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_RMA, put_signal_nbi, __VA_ARGS__)

/* AMOs */
#define shmem_atomic_fetch(...) MWSHMEM_CTX(MWSHMEM_SELC, MWSHMEM_G_AMO_EXT, atomic_fetch, __VA_ARGS__)
#define shmem_atomic_set(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_EXT, atomic_set, __VA_ARGS__)
#define shmem_atomic_swap(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_EXT, atomic_swap, __VA_ARGS__)
#define shmem_atomic_fetch_nbi(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_EXT, atomic_fetch_nbi, __VA_ARGS__)
#define shmem_atomic_swap_nbi(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_EXT, atomic_swap_nbi, __VA_ARGS__)
#define shmem_atomic_compare_swap(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO, atomic_compare_swap, __VA_ARGS__)
#define shmem_atomic_fetch_inc(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO, atomic_fetch_inc, __VA_ARGS__)
#define shmem_atomic_inc(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO, atomic_inc, __VA_ARGS__)
#define shmem_atomic_fetch_add(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO, atomic_fetch_add, __VA_ARGS__)
#define shmem_atomic_add(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO, atomic_add, __VA_ARGS__)
#define shmem_atomic_compare_swap_nbi(...) \
    MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO, atomic_compare_swap_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_inc_nbi(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO, atomic_fetch_inc_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_add_nbi(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO, atomic_fetch_add_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_and(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_BIT, atomic_fetch_and, __VA_ARGS__)
#define shmem_atomic_and(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_BIT, atomic_and, __VA_ARGS__)
#define shmem_atomic_fetch_or(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_BIT, atomic_fetch_or, __VA_ARGS__)
#define shmem_atomic_or(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_BIT, atomic_or, __VA_ARGS__)
#define shmem_atomic_fetch_xor(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_BIT, atomic_fetch_xor, __VA_ARGS__)
#define shmem_atomic_xor(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_BIT, atomic_xor, __VA_ARGS__)
#define shmem_atomic_fetch_and_nbi(...) \
    MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_BIT, atomic_fetch_and_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_or_nbi(...) MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_BIT, atomic_fetch_or_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_xor_nbi(...) \
    MWSHMEM_CTX(MWSHMEM_SEL, MWSHMEM_G_AMO_BIT, atomic_fetch_xor_nbi, __VA_ARGS__)

/* Deprecated AMO names (no context form). */
#define shmem_fetch(...) MWSHMEM_NOCTX(MWSHMEM_SELC, MWSHMEM_G_OLD_AMO_EXT, fetch, __VA_ARGS__)
#define shmem_set(...) MWSHMEM_NOCTX(MWSHMEM_SEL, MWSHMEM_G_OLD_AMO_EXT, set, __VA_ARGS__)
#define shmem_swap(...) MWSHMEM_NOCTX(MWSHMEM_SEL, MWSHMEM_G_OLD_AMO_EXT, swap, __VA_ARGS__)
#define shmem_cswap(...) MWSHMEM_NOCTX(MWSHMEM_SEL, MWSHMEM_G_OLD_AMO, cswap, __VA_ARGS__)
#define shmem_finc(...) MWSHMEM_NOCTX(MWSHMEM_SEL, MWSHMEM_G_OLD_AMO, finc, __VA_ARGS__)
#define shmem_inc(...) MWSHMEM_NOCTX(MWSHMEM_SEL, MWSHMEM_G_OLD_AMO, inc, __VA_ARGS__)
#define shmem_fadd(...) MWSHMEM_NOCTX(MWSHMEM_SEL, MWSHMEM_G_OLD_AMO, fadd, __VA_ARGS__)
#define shmem_add(...) MWSHMEM_NOCTX(MWSHMEM_SEL, MWSHMEM_G_OLD_AMO, add, __VA_ARGS__)

/* Collectives: the team comes first, the destination decides. */
#define MWSHMEM_TEAM(LIST, O, ...) MWSHMEM_SEL(MWSHMEM_A2(__VA_ARGS__, 0, 0), LIST, shmem_, O)(__VA_ARGS__)
#define shmem_alltoall(...) MWSHMEM_TEAM(MWSHMEM_G_RMA, alltoall, __VA_ARGS__)
#define shmem_alltoalls(...) MWSHMEM_TEAM(MWSHMEM_G_RMA, alltoalls, __VA_ARGS__)
#define shmem_broadcast(...) MWSHMEM_TEAM(MWSHMEM_G_RMA, broadcast, __VA_ARGS__)
#define shmem_collect(...) MWSHMEM_TEAM(MWSHMEM_G_RMA, collect, __VA_ARGS__)
#define shmem_fcollect(...) MWSHMEM_TEAM(MWSHMEM_G_RMA, fcollect, __VA_ARGS__)
#define shmem_and_reduce(...) MWSHMEM_TEAM(MWSHMEM_G_RED_BIT, and_reduce, __VA_ARGS__)
#define shmem_or_reduce(...) MWSHMEM_TEAM(MWSHMEM_G_RED_BIT, or_reduce, __VA_ARGS__)
#define shmem_xor_reduce(...) MWSHMEM_TEAM(MWSHMEM_G_RED_BIT, xor_reduce, __VA_ARGS__)
#define shmem_max_reduce(...) MWSHMEM_TEAM(MWSHMEM_G_RED_CMP, max_reduce, __VA_ARGS__)
#define shmem_min_reduce(...) MWSHMEM_TEAM(MWSHMEM_G_RED_CMP, min_reduce, __VA_ARGS__)
#define shmem_sum_reduce(...) MWSHMEM_TEAM(MWSHMEM_G_RED_ARITH, sum_reduce, __VA_ARGS__)
#define shmem_prod_reduce(...) MWSHMEM_TEAM(MWSHMEM_G_RED_ARITH, prod_reduce, __VA_ARGS__)

/* shmem_sync(team) is the team form; four arguments, the deprecated active-set one. */
#define shmem_sync(...)                                                                      \
    _Generic((MWSHMEM_A1(__VA_ARGS__, 0)), shmem_team_t: shmem_team_sync, default: shmem_sync)(__VA_ARGS__)

/* Point-to-point synchronization (T2, plus the deprecated short types). */
#define MWSHMEM_P2P(O, x, ...) MWSHMEM_SEL(x, MWSHMEM_G_AMO, shmem_, O)
#define shmem_wait_until(...) MWSHMEM_SEL(MWSHMEM_A1(__VA_ARGS__, 0), MWSHMEM_G_SYNC, shmem_, wait_until)(__VA_ARGS__)
#define shmem_wait_until_all(...) MWSHMEM_P2P(wait_until_all, __VA_ARGS__, 0)(__VA_ARGS__)
#define shmem_wait_until_any(...) MWSHMEM_P2P(wait_until_any, __VA_ARGS__, 0)(__VA_ARGS__)
#define shmem_wait_until_some(...) MWSHMEM_P2P(wait_until_some, __VA_ARGS__, 0)(__VA_ARGS__)
#define shmem_wait_until_all_vector(...) MWSHMEM_P2P(wait_until_all_vector, __VA_ARGS__, 0)(__VA_ARGS__)
#define shmem_wait_until_any_vector(...) MWSHMEM_P2P(wait_until_any_vector, __VA_ARGS__, 0)(__VA_ARGS__)
#define shmem_wait_until_some_vector(...) MWSHMEM_P2P(wait_until_some_vector, __VA_ARGS__, 0)(__VA_ARGS__)
#define shmem_test(...) MWSHMEM_SEL(MWSHMEM_A1(__VA_ARGS__, 0), MWSHMEM_G_SYNC, shmem_, test)(__VA_ARGS__)
#define shmem_test_all(...) MWSHMEM_P2P(test_all, __VA_ARGS__, 0)(__VA_ARGS__)
#define shmem_test_any(...) MWSHMEM_P2P(test_any, __VA_ARGS__, 0)(__VA_ARGS__)
#define shmem_test_some(...) MWSHMEM_P2P(test_some, __VA_ARGS__, 0)(__VA_ARGS__)
#define shmem_test_all_vector(...) MWSHMEM_P2P(test_all_vector, __VA_ARGS__, 0)(__VA_ARGS__)
#define shmem_test_any_vector(...) MWSHMEM_P2P(test_any_vector, __VA_ARGS__, 0)(__VA_ARGS__)
#define shmem_test_some_vector(...) MWSHMEM_P2P(test_some_vector, __VA_ARGS__, 0)(__VA_ARGS__)

/* 1.6 signal updates without data: (ctx,) sig_addr, signal, pe. */
#define shmem_signal_add(...)                                                                        \
    _Generic((MWSHMEM_A1(__VA_ARGS__, 0)), shmem_ctx_t: shmem_ctx_signal_add, default: shmem_signal_add)( \
        __VA_ARGS__)
#define shmem_signal_set(...)                                                                        \
    _Generic((MWSHMEM_A1(__VA_ARGS__, 0)), shmem_ctx_t: shmem_ctx_signal_set, default: shmem_signal_set)( \
        __VA_ARGS__)

#endif /* MWSHMEM_SHMEM_GENERIC_H */
