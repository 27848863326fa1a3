/*
 * comm_memwire.c: comm.h over memwire's C API (include/memwire.h).
 *
 * Barrier, allreduce, allgather and alltoall are the library's collectives
 * (`mw_barrier`, `mw_allreduce`, `mw_allgather`, `mw_alltoall`: algorithms
 * chosen by size and team, single-copy on one host where that pays, and
 * allreduce results bit-identical on every rank). memwire has no `v`
 * variants, so allgatherv and alltoallv are one all-to-all exchange on a
 * symmetric staging region (same key on every rank), laid out as
 *
 *     [signal words: 2 parities x size ranks x u64] [data: 2 x size slots]
 *
 * Rank s sends to rank d with one put_signal: the bytes land in d's slot
 * (parity, s) and the signal word (parity, s) is then set to the exchange's
 * epoch; d waits until that word reaches the epoch and copies the slot out.
 * Exchanges alternate between the two parities, which makes reuse safe
 * without an extra barrier: every exchange is all-to-all (empty messages
 * included), so a rank that starts exchange e+2 has received everybody's
 * e+1 message, which each sent only after copying out exchange e.
 *
 * The slot grows (collectively; every rank asks for the same size) when a
 * message does not fit. Errors are fatal for a benchmark: the message from
 * mw_strerror/mw_last_error is printed and the rank exits 2.
 */
#include "comm.h"

#include <memwire.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIN_SLOT ((size_t)64 * 1024)

static mw_endpoint *g_ep;
static mw_region *g_stage;
static mw_key g_key;
static unsigned char *g_base;
static size_t g_slot, g_hdr;
static uint64_t g_epoch;
static int g_rank, g_size;
static mw_handle **g_handles;
static const void **g_sendp;
static size_t *g_sendlen;
static void **g_recvp;
static size_t *g_recvlen;

static void fail(const char *what, mw_status st) {
    fprintf(stderr, "nas(memwire) rank %d: %s failed: %s (%s)\n", g_rank, what, mw_strerror(st),
            mw_last_error());
    exit(2);
}

#define MW(call)                                                                                   \
    do {                                                                                           \
        mw_status st_ = (call);                                                                    \
        if (st_ != MW_OK) fail(#call, st_);                                                        \
    } while (0)

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "nas(memwire) rank %d: out of memory (%zu bytes)\n", g_rank, n);
        exit(2);
    }
    return p;
}

static uint64_t sig_off(int parity, int src) {
    return ((uint64_t)parity * (uint64_t)g_size + (uint64_t)src) * 8u;
}

static uint64_t data_off(int parity, int src) {
    return g_hdr + ((uint64_t)parity * (uint64_t)g_size + (uint64_t)src) * g_slot;
}

/* Collective: every rank passes the same `need`. */
static void stage_reserve(size_t need) {
    if (g_stage && need <= g_slot) return;
    size_t slot = g_slot ? g_slot : MIN_SLOT;
    while (slot < need) slot *= 2;
    if (g_stage) {
        /* Nobody may still be writing into the old region. */
        MW(mw_barrier(g_ep));
        MW(mw_region_free(&g_stage));
    }
    g_slot = slot;
    size_t len = g_hdr + 2u * (size_t)g_size * g_slot;
    MW(mw_region_alloc_symmetric(g_ep, len, MW_ACCESS_READ_WRITE, &g_stage));
    MW(mw_region_key(g_stage, &g_key));
    void *p = NULL;
    MW(mw_region_ptr(g_stage, &p));
    g_base = p;
}

/* The one primitive: g_sendp/g_sendlen[d] go to rank d; from rank s,
 * g_recvlen[s] bytes land at g_recvp[s]. Every message must fit the slot. */
static void exchange(void) {
    g_epoch++;
    int par = (int)(g_epoch & 1u);
    for (int i = 1; i < g_size; i++) {
        int d = (g_rank + i) % g_size;
        mw_signal sig = {g_key, sig_off(par, g_rank), MW_SIGNAL_SET, g_epoch};
        MW(mw_put_signal_nb(g_ep, (uint32_t)d, g_key, data_off(par, g_rank), g_sendp[d],
                            g_sendlen[d], sig, &g_handles[d]));
    }
    if (g_recvlen[g_rank]) memmove(g_recvp[g_rank], g_sendp[g_rank], g_recvlen[g_rank]);
    for (int i = 1; i < g_size; i++) {
        int s = (g_rank - i + g_size) % g_size;
        MW(mw_wait_until(g_ep, g_stage, sig_off(par, s), MW_CMP_GE, g_epoch, NULL));
        if (g_recvlen[s]) memcpy(g_recvp[s], g_base + data_off(par, s), g_recvlen[s]);
    }
    MW(mw_wait_all(g_handles, (size_t)g_size));
}

void comm_init(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    MW(mw_init(&g_ep));
    uint32_t r = 0, n = 0;
    MW(mw_rank(g_ep, &r));
    MW(mw_size(g_ep, &n));
    g_rank = (int)r;
    g_size = (int)n;
    g_hdr = (2u * (size_t)g_size * 8u + 63u) & ~(size_t)63u;
    g_handles = xmalloc(sizeof(*g_handles) * (size_t)g_size);
    for (int i = 0; i < g_size; i++) g_handles[i] = NULL;
    g_sendp = xmalloc(sizeof(*g_sendp) * (size_t)g_size);
    g_sendlen = xmalloc(sizeof(*g_sendlen) * (size_t)g_size);
    g_recvp = xmalloc(sizeof(*g_recvp) * (size_t)g_size);
    g_recvlen = xmalloc(sizeof(*g_recvlen) * (size_t)g_size);
    stage_reserve(MIN_SLOT);
}

void comm_finalize(void) {
    MW(mw_region_free(&g_stage));
    MW(mw_finalize(&g_ep));
    free(g_handles);
    free(g_sendp);
    free(g_sendlen);
    free(g_recvp);
    free(g_recvlen);
}

int comm_rank(void) { return g_rank; }
int comm_size(void) { return g_size; }
const char *comm_name(void) { return "memwire"; }

double comm_wtime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void comm_barrier(void) { MW(mw_barrier(g_ep)); }

static mw_op reduce_op(comm_op op) { return op == COMM_SUM ? MW_OP_SUM : MW_OP_MAX; }

void comm_allreduce_double(double *buf, size_t n, comm_op op) {
    MW(mw_allreduce(g_ep, NULL, MW_DTYPE_F64, reduce_op(op), buf, buf, n));
}

void comm_allreduce_i64(int64_t *buf, size_t n, comm_op op) {
    MW(mw_allreduce(g_ep, NULL, MW_DTYPE_I64, reduce_op(op), buf, buf, n));
}

void comm_allgather(const void *send, void *recv, size_t bytes) {
    MW(mw_allgather(g_ep, NULL, send, bytes, recv));
}

void comm_allgatherv(const void *send, size_t sendbytes, void *recv, const size_t *counts,
                     const size_t *displs) {
    size_t need = 0;
    for (int r = 0; r < g_size; r++)
        if (counts[r] > need) need = counts[r];
    stage_reserve(need);
    for (int r = 0; r < g_size; r++) {
        g_sendp[r] = send;
        g_sendlen[r] = sendbytes;
        g_recvp[r] = (unsigned char *)recv + displs[r];
        g_recvlen[r] = counts[r];
    }
    exchange();
}

void comm_alltoall(const void *send, void *recv, size_t bytes) {
    MW(mw_alltoall(g_ep, NULL, send, recv, bytes));
}

void comm_alltoallv(const void *send, const size_t *scounts, const size_t *sdispls, void *recv,
                    const size_t *rcounts, const size_t *rdispls) {
    /* The slot must hold the largest message anyone sends: agree on it. */
    int64_t need = 0;
    for (int r = 0; r < g_size; r++)
        if ((int64_t)scounts[r] > need) need = (int64_t)scounts[r];
    comm_allreduce_i64(&need, 1, COMM_MAX);
    stage_reserve((size_t)need);
    for (int r = 0; r < g_size; r++) {
        g_sendp[r] = (const unsigned char *)send + sdispls[r];
        g_sendlen[r] = scounts[r];
        g_recvp[r] = (unsigned char *)recv + rdispls[r];
        g_recvlen[r] = rcounts[r];
    }
    exchange();
}
