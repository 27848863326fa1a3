/*
 * rma.c: put, get, p, g, iput, iget, ibput, ibget, put_nbi, get_nbi and
 * put-with-signal, typed, sized and mem forms, with and without a context.
 * A blocking put returns once the data is in the target's memory
 * (memwire's mw_put), which is stronger than the spec asks; put_nbi and
 * put_signal_nbi are memwire's implicit puts (completed by mw_quiet at the
 * context's quiet), get_nbi keeps its handle on the context until then. Strided forms
 * are memwire's strided put and get: one operation, not one per element.
 */
#include <string.h>

#include "internal.h"

struct target {
    int pe; /* world PE */
    struct mwshmem_remote at;
};

static struct target locate(const char *routine, shmem_ctx_t ctx, const char *arg, const void *addr, size_t bytes,
                            int pe) {
    mwshmem_require_init(routine);
    struct mwshmem_ctx *c = mwshmem_ctx(routine, ctx);
    struct target t;
    t.pe = mwshmem_ctx_world_pe(routine, c, pe);
    t.at = mwshmem_translate(routine, arg, addr, bytes, t.pe);
    return t;
}

static void put_bytes(const char *routine, shmem_ctx_t ctx, void *dest, const void *source, size_t bytes, int pe) {
    struct target t = locate(routine, ctx, "dest", dest, bytes, pe);
    if (bytes == 0) return;
    mwshmem_check(routine, mw_put(mwshmem.ep, (uint32_t)t.pe, t.at.key, t.at.offset, source, bytes));
}

static void get_bytes(const char *routine, shmem_ctx_t ctx, void *dest, const void *source, size_t bytes, int pe) {
    struct target t = locate(routine, ctx, "source", source, bytes, pe);
    if (bytes == 0) return;
    mwshmem_check(routine, mw_get(mwshmem.ep, (uint32_t)t.pe, t.at.key, t.at.offset, dest, bytes));
}

/* memwire's implicit put: no handle to keep; the context's quiet calls
 * mw_quiet, which completes it and reports its failure. */
static void put_bytes_nbi(const char *routine, shmem_ctx_t ctx, void *dest, const void *source, size_t bytes, int pe) {
    struct target t = locate(routine, ctx, "dest", dest, bytes, pe);
    if (bytes == 0) return;
    mwshmem_check(routine, mw_put_nbi(mwshmem.ep, (uint32_t)t.pe, t.at.key, t.at.offset, source, bytes));
    __atomic_store_n(&ctx->implicit, 1, __ATOMIC_RELAXED);
}

static void get_bytes_nbi(const char *routine, shmem_ctx_t ctx, void *dest, const void *source, size_t bytes, int pe) {
    struct target t = locate(routine, ctx, "source", source, bytes, pe);
    if (bytes == 0) return;
    mw_handle *h;
    mwshmem_check(routine, mw_get_nb(mwshmem.ep, (uint32_t)t.pe, t.at.key, t.at.offset, dest, bytes, &h));
    mwshmem_ctx_add(ctx, h, NULL, 0);
}

/* `nblocks` blocks of `block` bytes, `dst`/`sst` bytes apart at the target
 * and here (iput is the case of one-element blocks). */
static void put_blocks(const char *routine, shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t block, size_t nblocks, int pe) {
    if (dst < (ptrdiff_t)block || sst < (ptrdiff_t)block)
        mwshmem_fail(routine, "strides (dst %td, sst %td bytes) must be at least the block (%zu bytes)", dst, sst, block);
    size_t extent = nblocks == 0 ? 0 : (nblocks - 1) * (size_t)dst + block;
    struct target t = locate(routine, ctx, "dest", dest, extent, pe);
    if (nblocks == 0 || block == 0) return;
    mwshmem_check(routine, mw_put_strided(mwshmem.ep, (uint32_t)t.pe, t.at.key, t.at.offset, source, block, nblocks,
                                          (size_t)sst, (size_t)dst));
}

static void get_blocks(const char *routine, shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t block, size_t nblocks, int pe) {
    if (dst < (ptrdiff_t)block || sst < (ptrdiff_t)block)
        mwshmem_fail(routine, "strides (dst %td, sst %td bytes) must be at least the block (%zu bytes)", dst, sst, block);
    size_t extent = nblocks == 0 ? 0 : (nblocks - 1) * (size_t)sst + block;
    struct target t = locate(routine, ctx, "source", source, extent, pe);
    if (nblocks == 0 || block == 0) return;
    mwshmem_check(routine, mw_get_strided(mwshmem.ep, (uint32_t)t.pe, t.at.key, t.at.offset, dest, block, nblocks,
                                          (size_t)sst, (size_t)dst));
}

static void put_signal(const char *routine, shmem_ctx_t ctx, void *dest, const void *source, size_t bytes,
                       uint64_t *sig_addr, uint64_t signal, int sig_op, int pe, bool nbi) {
    struct target t = locate(routine, ctx, "dest", dest, bytes, pe);
    if (sig_op != SHMEM_SIGNAL_SET && sig_op != SHMEM_SIGNAL_ADD)
        mwshmem_fail(routine, "sig_op %d is neither SHMEM_SIGNAL_SET nor SHMEM_SIGNAL_ADD", sig_op);
    if ((uintptr_t)sig_addr % 8 != 0) mwshmem_fail(routine, "sig_addr %p is not 8-byte aligned", (void *)sig_addr);
    struct mwshmem_remote sig = mwshmem_translate(routine, "sig_addr", sig_addr, 8, t.pe);
    mw_signal s = {sig.key, sig.offset, sig_op == SHMEM_SIGNAL_SET ? MW_SIGNAL_SET : MW_SIGNAL_ADD, signal};
    if (!nbi) {
        mwshmem_check(routine, mw_put_signal(mwshmem.ep, (uint32_t)t.pe, t.at.key, t.at.offset, source, bytes, s));
        return;
    }
    mwshmem_check(routine, mw_put_signal_nbi(mwshmem.ep, (uint32_t)t.pe, t.at.key, t.at.offset, source, bytes, s));
    __atomic_store_n(&ctx->implicit, 1, __ATOMIC_RELAXED);
}

#define D SHMEM_CTX_DEFAULT

#define DEF_RMA(T, N)                                                                                            \
    void shmem_ctx_##N##_put(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe) {                \
        put_bytes("shmem_ctx_" #N "_put", ctx, dest, source, nelems * sizeof(T), pe);                           \
    }                                                                                                           \
    void shmem_##N##_put(T *dest, const T *source, size_t nelems, int pe) {                                     \
        put_bytes("shmem_" #N "_put", D, dest, source, nelems * sizeof(T), pe);                                 \
    }                                                                                                           \
    void shmem_ctx_##N##_p(shmem_ctx_t ctx, T *dest, T value, int pe) {                                         \
        put_bytes("shmem_ctx_" #N "_p", ctx, dest, &value, sizeof(T), pe);                                      \
    }                                                                                                           \
    void shmem_##N##_p(T *dest, T value, int pe) { put_bytes("shmem_" #N "_p", D, dest, &value, sizeof(T), pe); } \
    void shmem_ctx_##N##_iput(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,          \
                              size_t nelems, int pe) {                                                          \
        put_blocks("shmem_ctx_" #N "_iput", ctx, dest, source, dst * (ptrdiff_t)sizeof(T),                      \
                   sst * (ptrdiff_t)sizeof(T), sizeof(T), nelems, pe);                                          \
    }                                                                                                           \
    void shmem_##N##_iput(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe) {      \
        put_blocks("shmem_" #N "_iput", D, dest, source, dst * (ptrdiff_t)sizeof(T), sst * (ptrdiff_t)sizeof(T), \
                   sizeof(T), nelems, pe);                                                                      \
    }                                                                                                           \
    void shmem_ctx_##N##_ibput(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,         \
                               size_t bsize, size_t nblocks, int pe) {                                          \
        put_blocks("shmem_ctx_" #N "_ibput", ctx, dest, source, dst * (ptrdiff_t)sizeof(T),                     \
                   sst * (ptrdiff_t)sizeof(T), bsize * sizeof(T), nblocks, pe);                                 \
    }                                                                                                           \
    void shmem_##N##_ibput(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, \
                           int pe) {                                                                            \
        put_blocks("shmem_" #N "_ibput", D, dest, source, dst * (ptrdiff_t)sizeof(T), sst * (ptrdiff_t)sizeof(T), \
                   bsize * sizeof(T), nblocks, pe);                                                             \
    }                                                                                                           \
    void shmem_ctx_##N##_get(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe) {                \
        get_bytes("shmem_ctx_" #N "_get", ctx, dest, source, nelems * sizeof(T), pe);                           \
    }                                                                                                           \
    void shmem_##N##_get(T *dest, const T *source, size_t nelems, int pe) {                                     \
        get_bytes("shmem_" #N "_get", D, dest, source, nelems * sizeof(T), pe);                                 \
    }                                                                                                           \
    T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T *source, int pe) {                                             \
        T value;                                                                                                \
        get_bytes("shmem_ctx_" #N "_g", ctx, &value, source, sizeof(T), pe);                                    \
        return value;                                                                                           \
    }                                                                                                           \
    T shmem_##N##_g(const T *source, int pe) {                                                                  \
        T value;                                                                                                \
        get_bytes("shmem_" #N "_g", D, &value, source, sizeof(T), pe);                                          \
        return value;                                                                                           \
    }                                                                                                           \
    void shmem_ctx_##N##_iget(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,          \
                              size_t nelems, int pe) {                                                          \
        get_blocks("shmem_ctx_" #N "_iget", ctx, dest, source, dst * (ptrdiff_t)sizeof(T),                      \
                   sst * (ptrdiff_t)sizeof(T), sizeof(T), nelems, pe);                                          \
    }                                                                                                           \
    void shmem_##N##_iget(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe) {      \
        get_blocks("shmem_" #N "_iget", D, dest, source, dst * (ptrdiff_t)sizeof(T), sst * (ptrdiff_t)sizeof(T), \
                   sizeof(T), nelems, pe);                                                                      \
    }                                                                                                           \
    void shmem_ctx_##N##_ibget(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,         \
                               size_t bsize, size_t nblocks, int pe) {                                          \
        get_blocks("shmem_ctx_" #N "_ibget", ctx, dest, source, dst * (ptrdiff_t)sizeof(T),                     \
                   sst * (ptrdiff_t)sizeof(T), bsize * sizeof(T), nblocks, pe);                                 \
    }                                                                                                           \
    void shmem_##N##_ibget(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, \
                           int pe) {                                                                            \
        get_blocks("shmem_" #N "_ibget", D, dest, source, dst * (ptrdiff_t)sizeof(T), sst * (ptrdiff_t)sizeof(T), \
                   bsize * sizeof(T), nblocks, pe);                                                             \
    }                                                                                                           \
    void shmem_ctx_##N##_put_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe) {            \
        put_bytes_nbi("shmem_ctx_" #N "_put_nbi", ctx, dest, source, nelems * sizeof(T), pe);                   \
    }                                                                                                           \
    void shmem_##N##_put_nbi(T *dest, const T *source, size_t nelems, int pe) {                                 \
        put_bytes_nbi("shmem_" #N "_put_nbi", D, dest, source, nelems * sizeof(T), pe);                         \
    }                                                                                                           \
    void shmem_ctx_##N##_get_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe) {            \
        get_bytes_nbi("shmem_ctx_" #N "_get_nbi", ctx, dest, source, nelems * sizeof(T), pe);                   \
    }                                                                                                           \
    void shmem_##N##_get_nbi(T *dest, const T *source, size_t nelems, int pe) {                                 \
        get_bytes_nbi("shmem_" #N "_get_nbi", D, dest, source, nelems * sizeof(T), pe);                         \
    }                                                                                                           \
    void shmem_ctx_##N##_put_signal(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,                   \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {                  \
        put_signal("shmem_ctx_" #N "_put_signal", ctx, dest, source, nelems * sizeof(T), sig_addr, signal,      \
                   sig_op, pe, false);                                                                          \
    }                                                                                                           \
    void shmem_##N##_put_signal(T *dest, const T *source, size_t nelems, uint64_t *sig_addr, uint64_t signal,   \
                                int sig_op, int pe) {                                                           \
        put_signal("shmem_" #N "_put_signal", D, dest, source, nelems * sizeof(T), sig_addr, signal, sig_op,    \
                   pe, false);                                                                                  \
    }                                                                                                           \
    void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,               \
                                        uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {              \
        put_signal("shmem_ctx_" #N "_put_signal_nbi", ctx, dest, source, nelems * sizeof(T), sig_addr, signal,  \
                   sig_op, pe, true);                                                                           \
    }                                                                                                           \
    void shmem_##N##_put_signal_nbi(T *dest, const T *source, size_t nelems, uint64_t *sig_addr,                \
                                    uint64_t signal, int sig_op, int pe) {                                      \
        put_signal("shmem_" #N "_put_signal_nbi", D, dest, source, nelems * sizeof(T), sig_addr, signal,        \
                   sig_op, pe, true);                                                                           \
    }
MWSHMEM_RMA_TYPES(DEF_RMA)

#define DEF_SIZED(S)                                                                                            \
    void shmem_ctx_put##S(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) {             \
        put_bytes("shmem_ctx_put" #S, ctx, dest, source, nelems * (S / 8), pe);                                 \
    }                                                                                                           \
    void shmem_put##S(void *dest, const void *source, size_t nelems, int pe) {                                  \
        put_bytes("shmem_put" #S, D, dest, source, nelems * (S / 8), pe);                                       \
    }                                                                                                           \
    void shmem_ctx_get##S(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) {             \
        get_bytes("shmem_ctx_get" #S, ctx, dest, source, nelems * (S / 8), pe);                                 \
    }                                                                                                           \
    void shmem_get##S(void *dest, const void *source, size_t nelems, int pe) {                                  \
        get_bytes("shmem_get" #S, D, dest, source, nelems * (S / 8), pe);                                       \
    }                                                                                                           \
    void shmem_ctx_iput##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,       \
                           size_t nelems, int pe) {                                                             \
        put_blocks("shmem_ctx_iput" #S, ctx, dest, source, dst * (S / 8), sst * (S / 8), S / 8, nelems, pe);    \
    }                                                                                                           \
    void shmem_iput##S(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe) {   \
        put_blocks("shmem_iput" #S, D, dest, source, dst * (S / 8), sst * (S / 8), S / 8, nelems, pe);          \
    }                                                                                                           \
    void shmem_ctx_iget##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,       \
                           size_t nelems, int pe) {                                                             \
        get_blocks("shmem_ctx_iget" #S, ctx, dest, source, dst * (S / 8), sst * (S / 8), S / 8, nelems, pe);    \
    }                                                                                                           \
    void shmem_iget##S(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe) {   \
        get_blocks("shmem_iget" #S, D, dest, source, dst * (S / 8), sst * (S / 8), S / 8, nelems, pe);          \
    }                                                                                                           \
    void shmem_ctx_ibput##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,      \
                            size_t bsize, size_t nblocks, int pe) {                                             \
        put_blocks("shmem_ctx_ibput" #S, ctx, dest, source, dst * (S / 8), sst * (S / 8), bsize * (S / 8),      \
                   nblocks, pe);                                                                                \
    }                                                                                                           \
    void shmem_ibput##S(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize,             \
                        size_t nblocks, int pe) {                                                               \
        put_blocks("shmem_ibput" #S, D, dest, source, dst * (S / 8), sst * (S / 8), bsize * (S / 8), nblocks,   \
                   pe);                                                                                         \
    }                                                                                                           \
    void shmem_ctx_ibget##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,      \
                            size_t bsize, size_t nblocks, int pe) {                                             \
        get_blocks("shmem_ctx_ibget" #S, ctx, dest, source, dst * (S / 8), sst * (S / 8), bsize * (S / 8),      \
                   nblocks, pe);                                                                                \
    }                                                                                                           \
    void shmem_ibget##S(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize,             \
                        size_t nblocks, int pe) {                                                               \
        get_blocks("shmem_ibget" #S, D, dest, source, dst * (S / 8), sst * (S / 8), bsize * (S / 8), nblocks,   \
                   pe);                                                                                         \
    }                                                                                                           \
    void shmem_ctx_put##S##_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) {       \
        put_bytes_nbi("shmem_ctx_put" #S "_nbi", ctx, dest, source, nelems * (S / 8), pe);                      \
    }                                                                                                           \
    void shmem_put##S##_nbi(void *dest, const void *source, size_t nelems, int pe) {                            \
        put_bytes_nbi("shmem_put" #S "_nbi", D, dest, source, nelems * (S / 8), pe);                            \
    }                                                                                                           \
    void shmem_ctx_get##S##_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) {       \
        get_bytes_nbi("shmem_ctx_get" #S "_nbi", ctx, dest, source, nelems * (S / 8), pe);                      \
    }                                                                                                           \
    void shmem_get##S##_nbi(void *dest, const void *source, size_t nelems, int pe) {                            \
        get_bytes_nbi("shmem_get" #S "_nbi", D, dest, source, nelems * (S / 8), pe);                            \
    }                                                                                                           \
    void shmem_ctx_put##S##_signal(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,              \
                                   uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {                   \
        put_signal("shmem_ctx_put" #S "_signal", ctx, dest, source, nelems * (S / 8), sig_addr, signal, sig_op, \
                   pe, false);                                                                                  \
    }                                                                                                           \
    void shmem_put##S##_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,               \
                               uint64_t signal, int sig_op, int pe) {                                           \
        put_signal("shmem_put" #S "_signal", D, dest, source, nelems * (S / 8), sig_addr, signal, sig_op, pe,   \
                   false);                                                                                      \
    }                                                                                                           \
    void shmem_ctx_put##S##_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,          \
                                       uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {               \
        put_signal("shmem_ctx_put" #S "_signal_nbi", ctx, dest, source, nelems * (S / 8), sig_addr, signal,     \
                   sig_op, pe, true);                                                                           \
    }                                                                                                           \
    void shmem_put##S##_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,           \
                                   uint64_t signal, int sig_op, int pe) {                                       \
        put_signal("shmem_put" #S "_signal_nbi", D, dest, source, nelems * (S / 8), sig_addr, signal, sig_op,   \
                   pe, true);                                                                                   \
    }
MWSHMEM_SIZES(DEF_SIZED)

void shmem_ctx_putmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) {
    put_bytes("shmem_ctx_putmem", ctx, dest, source, nelems, pe);
}
void shmem_putmem(void *dest, const void *source, size_t nelems, int pe) {
    put_bytes("shmem_putmem", D, dest, source, nelems, pe);
}
void shmem_ctx_getmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) {
    get_bytes("shmem_ctx_getmem", ctx, dest, source, nelems, pe);
}
void shmem_getmem(void *dest, const void *source, size_t nelems, int pe) {
    get_bytes("shmem_getmem", D, dest, source, nelems, pe);
}
void shmem_ctx_putmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) {
    put_bytes_nbi("shmem_ctx_putmem_nbi", ctx, dest, source, nelems, pe);
}
void shmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe) {
    put_bytes_nbi("shmem_putmem_nbi", D, dest, source, nelems, pe);
}
void shmem_ctx_getmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) {
    get_bytes_nbi("shmem_ctx_getmem_nbi", ctx, dest, source, nelems, pe);
}
void shmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe) {
    get_bytes_nbi("shmem_getmem_nbi", D, dest, source, nelems, pe);
}
void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                             uint64_t signal, int sig_op, int pe) {
    put_signal("shmem_ctx_putmem_signal", ctx, dest, source, nelems, sig_addr, signal, sig_op, pe, false);
}
void shmem_putmem_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal,
                         int sig_op, int pe) {
    put_signal("shmem_putmem_signal", D, dest, source, nelems, sig_addr, signal, sig_op, pe, false);
}
void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                                 uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {
    put_signal("shmem_ctx_putmem_signal_nbi", ctx, dest, source, nelems, sig_addr, signal, sig_op, pe, true);
}
void shmem_putmem_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal,
                             int sig_op, int pe) {
    put_signal("shmem_putmem_signal_nbi", D, dest, source, nelems, sig_addr, signal, sig_op, pe, true);
}

/* 1.6 signal updates without data: a put_signal of nothing. */
void shmem_ctx_signal_add(shmem_ctx_t ctx, uint64_t *sig_addr, uint64_t signal, int pe) {
    put_signal("shmem_ctx_signal_add", ctx, sig_addr, NULL, 0, sig_addr, signal, SHMEM_SIGNAL_ADD, pe, false);
}
void shmem_signal_add(uint64_t *sig_addr, uint64_t signal, int pe) { shmem_ctx_signal_add(D, sig_addr, signal, pe); }
void shmem_ctx_signal_set(shmem_ctx_t ctx, uint64_t *sig_addr, uint64_t signal, int pe) {
    put_signal("shmem_ctx_signal_set", ctx, sig_addr, NULL, 0, sig_addr, signal, SHMEM_SIGNAL_SET, pe, false);
}
void shmem_signal_set(uint64_t *sig_addr, uint64_t signal, int pe) { shmem_ctx_signal_set(D, sig_addr, signal, pe); }
