/*
 * amo.c: atomic memory operations on every standard, extended and bitwise
 * AMO type, blocking and _nbi, with and without a context, plus the
 * deprecated typed names (shmem_int_fadd, ...). Each is one memwire
 * atomic (mw_atomic_nb) on the 32- or 64-bit word the type occupies:
 * signed types wrap as two's complement, float and double travel as their
 * bits (fetch is an atomic load, set an atomic store, swap a swap).
 * Fetching AMOs wait for their value; non-fetching ones are completed by
 * the context's quiet, as the spec allows.
 */
#include <string.h>

#include "internal.h"

enum mode { FETCH, NO_FETCH, FETCH_NBI };

static uint64_t amo(const char *routine, shmem_ctx_t ctx, const void *dest, unsigned width, mw_atomic_op op,
                    uint64_t operand, uint64_t compare, int pe, enum mode mode, void *fetch_out) {
    mwshmem_require_init(routine);
    struct mwshmem_ctx *c = mwshmem_ctx(routine, ctx);
    int world = mwshmem_ctx_world_pe(routine, c, pe);
    if ((uintptr_t)dest % width != 0) mwshmem_fail(routine, "dest %p is not %u-byte aligned", dest, width);
    struct mwshmem_remote at = mwshmem_translate(routine, "dest", dest, width, world);
    mw_handle *h;
    mwshmem_check(routine, mw_atomic_nb(mwshmem.ep, (uint32_t)world, at.key, at.offset, op,
                                        width == 4 ? MW_WIDTH_U32 : MW_WIDTH_U64, operand, compare,
                                        mode != NO_FETCH || op == MW_ATOMIC_LOAD, &h));
    if (mode == FETCH) {
        uint64_t old;
        mwshmem_check(routine, mw_wait_value(&h, &old));
        return old;
    }
    mwshmem_ctx_add(c, h, mode == FETCH_NBI ? fetch_out : NULL, width);
    return 0;
}

/* The operand's bits as memwire takes them: the word's width, zero-extended. */
#define BITS(T, v) bits_of(&(T){v}, sizeof(T))
static inline uint64_t bits_of(const void *value, size_t width) {
    if (width == 4) {
        uint32_t b;
        memcpy(&b, value, 4);
        return b;
    }
    uint64_t b;
    memcpy(&b, value, 8);
    return b;
}

#define D SHMEM_CTX_DEFAULT
#define W(T) ((unsigned)sizeof(T))

/* Converts a fetched word back to T (its low sizeof(T) bytes, little-endian). */
#define DEF_FROM_BITS(T, N)                                                \
    static inline T from_bits_##N(uint64_t b) {                            \
        T v;                                                               \
        _Static_assert(sizeof(T) == 4 || sizeof(T) == 8, "AMO word width"); \
        if (sizeof(T) == 4) {                                              \
            uint32_t b32 = (uint32_t)b;                                    \
            memcpy(&v, &b32, 4);                                           \
        } else {                                                           \
            memcpy(&v, &b, sizeof(T));                                     \
        }                                                                  \
        return v;                                                          \
    }
MWSHMEM_EXT_AMO_TYPES(DEF_FROM_BITS)

/* fetch, set, swap and their _nbi forms: every extended AMO type. */
#define DEF_AMO_EXT(T, N)                                                                                       \
    T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t ctx, const T *source, int pe) {                                 \
        return from_bits_##N(amo("shmem_ctx_" #N "_atomic_fetch", ctx, source, W(T), MW_ATOMIC_LOAD, 0, 0, pe,  \
                                 FETCH, NULL));                                                                 \
    }                                                                                                          \
    T shmem_##N##_atomic_fetch(const T *source, int pe) {                                                      \
        return from_bits_##N(amo("shmem_" #N "_atomic_fetch", D, source, W(T), MW_ATOMIC_LOAD, 0, 0, pe, FETCH, \
                                 NULL));                                                                        \
    }                                                                                                          \
    void shmem_ctx_##N##_atomic_set(shmem_ctx_t ctx, T *dest, T value, int pe) {                               \
        amo("shmem_ctx_" #N "_atomic_set", ctx, dest, W(T), MW_ATOMIC_STORE, BITS(T, value), 0, pe, NO_FETCH,   \
            NULL);                                                                                              \
    }                                                                                                          \
    void shmem_##N##_atomic_set(T *dest, T value, int pe) {                                                    \
        amo("shmem_" #N "_atomic_set", D, dest, W(T), MW_ATOMIC_STORE, BITS(T, value), 0, pe, NO_FETCH, NULL);  \
    }                                                                                                          \
    T shmem_ctx_##N##_atomic_swap(shmem_ctx_t ctx, T *dest, T value, int pe) {                                 \
        return from_bits_##N(amo("shmem_ctx_" #N "_atomic_swap", ctx, dest, W(T), MW_ATOMIC_SWAP,               \
                                 BITS(T, value), 0, pe, FETCH, NULL));                                          \
    }                                                                                                          \
    T shmem_##N##_atomic_swap(T *dest, T value, int pe) {                                                      \
        return from_bits_##N(                                                                                   \
            amo("shmem_" #N "_atomic_swap", D, dest, W(T), MW_ATOMIC_SWAP, BITS(T, value), 0, pe, FETCH, NULL)); \
    }                                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t ctx, T *fetch, const T *source, int pe) {                \
        amo("shmem_ctx_" #N "_atomic_fetch_nbi", ctx, source, W(T), MW_ATOMIC_LOAD, 0, 0, pe, FETCH_NBI, fetch); \
    }                                                                                                          \
    void shmem_##N##_atomic_fetch_nbi(T *fetch, const T *source, int pe) {                                     \
        amo("shmem_" #N "_atomic_fetch_nbi", D, source, W(T), MW_ATOMIC_LOAD, 0, 0, pe, FETCH_NBI, fetch);      \
    }                                                                                                          \
    void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe) {                \
        amo("shmem_ctx_" #N "_atomic_swap_nbi", ctx, dest, W(T), MW_ATOMIC_SWAP, BITS(T, value), 0, pe,         \
            FETCH_NBI, fetch);                                                                                  \
    }                                                                                                          \
    void shmem_##N##_atomic_swap_nbi(T *fetch, T *dest, T value, int pe) {                                     \
        amo("shmem_" #N "_atomic_swap_nbi", D, dest, W(T), MW_ATOMIC_SWAP, BITS(T, value), 0, pe, FETCH_NBI,    \
            fetch);                                                                                             \
    }
MWSHMEM_EXT_AMO_TYPES(DEF_AMO_EXT)

/* A fetching op, its non-fetching twin and its _nbi form. */
#define DEF_FETCH_OP(T, N, NAME, OP, OPERAND)                                                                  \
    T shmem_ctx_##N##_atomic_fetch_##NAME(shmem_ctx_t ctx, T *dest OPERAND##_PARAM(T), int pe) {                  \
        return from_bits_##N(amo("shmem_ctx_" #N "_atomic_fetch_" #NAME, ctx, dest, W(T), OP,                  \
                                 OPERAND##_BITS(T), 0, pe, FETCH, NULL));                                       \
    }                                                                                                          \
    T shmem_##N##_atomic_fetch_##NAME(T *dest OPERAND##_PARAM(T), int pe) {                                       \
        return from_bits_##N(amo("shmem_" #N "_atomic_fetch_" #NAME, D, dest, W(T), OP, OPERAND##_BITS(T), 0,  \
                                 pe, FETCH, NULL));                                                             \
    }                                                                                                          \
    void shmem_ctx_##N##_atomic_##NAME(shmem_ctx_t ctx, T *dest OPERAND##_PARAM(T), int pe) {                     \
        amo("shmem_ctx_" #N "_atomic_" #NAME, ctx, dest, W(T), OP, OPERAND##_BITS(T), 0, pe, NO_FETCH, NULL);  \
    }                                                                                                          \
    void shmem_##N##_atomic_##NAME(T *dest OPERAND##_PARAM(T), int pe) {                                          \
        amo("shmem_" #N "_atomic_" #NAME, D, dest, W(T), OP, OPERAND##_BITS(T), 0, pe, NO_FETCH, NULL);        \
    }                                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_##NAME##_nbi(shmem_ctx_t ctx, T *fetch, T *dest OPERAND##_PARAM(T), int pe) { \
        amo("shmem_ctx_" #N "_atomic_fetch_" #NAME "_nbi", ctx, dest, W(T), OP, OPERAND##_BITS(T), 0, pe,      \
            FETCH_NBI, fetch);                                                                                  \
    }                                                                                                          \
    void shmem_##N##_atomic_fetch_##NAME##_nbi(T *fetch, T *dest OPERAND##_PARAM(T), int pe) {                    \
        amo("shmem_" #N "_atomic_fetch_" #NAME "_nbi", D, dest, W(T), OP, OPERAND##_BITS(T), 0, pe, FETCH_NBI, \
            fetch);                                                                                             \
    }
#define VALUE_PARAM(T) , T value
#define VALUE_BITS(T) BITS(T, value)
#define ONE_PARAM(T)
#define ONE_BITS(T) BITS(T, 1)

#define DEF_AMO_STD(T, N)                                                                                      \
    DEF_FETCH_OP(T, N, add, MW_ATOMIC_ADD, VALUE)                                                              \
    DEF_FETCH_OP(T, N, inc, MW_ATOMIC_ADD, ONE)                                                                \
    T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t ctx, T *dest, T cond, T value, int pe) {                 \
        return from_bits_##N(amo("shmem_ctx_" #N "_atomic_compare_swap", ctx, dest, W(T),                      \
                                 MW_ATOMIC_COMPARE_SWAP, BITS(T, value), BITS(T, cond), pe, FETCH, NULL));      \
    }                                                                                                          \
    T shmem_##N##_atomic_compare_swap(T *dest, T cond, T value, int pe) {                                      \
        return from_bits_##N(amo("shmem_" #N "_atomic_compare_swap", D, dest, W(T), MW_ATOMIC_COMPARE_SWAP,    \
                                 BITS(T, value), BITS(T, cond), pe, FETCH, NULL));                              \
    }                                                                                                          \
    void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T cond, T value, int pe) { \
        amo("shmem_ctx_" #N "_atomic_compare_swap_nbi", ctx, dest, W(T), MW_ATOMIC_COMPARE_SWAP,               \
            BITS(T, value), BITS(T, cond), pe, FETCH_NBI, fetch);                                               \
    }                                                                                                          \
    void shmem_##N##_atomic_compare_swap_nbi(T *fetch, T *dest, T cond, T value, int pe) {                     \
        amo("shmem_" #N "_atomic_compare_swap_nbi", D, dest, W(T), MW_ATOMIC_COMPARE_SWAP, BITS(T, value),     \
            BITS(T, cond), pe, FETCH_NBI, fetch);                                                               \
    }
MWSHMEM_AMO_TYPES(DEF_AMO_STD)

#define DEF_AMO_BIT(T, N)                          \
    DEF_FETCH_OP(T, N, and, MW_ATOMIC_AND, VALUE) \
    DEF_FETCH_OP(T, N, or, MW_ATOMIC_OR, VALUE)   \
    DEF_FETCH_OP(T, N, xor, MW_ATOMIC_XOR, VALUE)
MWSHMEM_BIT_AMO_TYPES(DEF_AMO_BIT)

/* ---- deprecated names (since 1.4) -------------------------------------------- */
#define DEF_OLD_EXT(T, N)                                                                               \
    T shmem_##N##_fetch(const T *source, int pe) { return shmem_##N##_atomic_fetch(source, pe); }       \
    void shmem_##N##_set(T *dest, T value, int pe) { shmem_##N##_atomic_set(dest, value, pe); }         \
    T shmem_##N##_swap(T *dest, T value, int pe) { return shmem_##N##_atomic_swap(dest, value, pe); }
MWSHMEM_OLD_AMO_EXT_TYPES(DEF_OLD_EXT)
#define DEF_OLD_STD(T, N)                                                                                             \
    T shmem_##N##_cswap(T *dest, T cond, T value, int pe) { return shmem_##N##_atomic_compare_swap(dest, cond, value, pe); } \
    T shmem_##N##_finc(T *dest, int pe) { return shmem_##N##_atomic_fetch_inc(dest, pe); }                            \
    void shmem_##N##_inc(T *dest, int pe) { shmem_##N##_atomic_inc(dest, pe); }                                      \
    T shmem_##N##_fadd(T *dest, T value, int pe) { return shmem_##N##_atomic_fetch_add(dest, value, pe); }            \
    void shmem_##N##_add(T *dest, T value, int pe) { shmem_##N##_atomic_add(dest, value, pe); }
MWSHMEM_OLD_AMO_STD_TYPES(DEF_OLD_STD)

uint64_t shmem_signal_fetch(const uint64_t *sig_addr) {
    mwshmem_require_init("shmem_signal_fetch");
    if ((uintptr_t)sig_addr % 8 != 0) mwshmem_fail("shmem_signal_fetch", "sig_addr %p is not 8-byte aligned", (const void *)sig_addr);
    mw_progress(mwshmem.ep);
    return __atomic_load_n(sig_addr, __ATOMIC_ACQUIRE);
}
