/*
 * comm_memwire.c: comm.h over memwire's C API (include/memwire.h).
 *
 * Every collective is the library's own (`mw_barrier`, `mw_allreduce`,
 * `mw_allgather`, `mw_allgatherv`, `mw_alltoall`, `mw_alltoallv`): algorithms
 * chosen by size and team, single-copy on one host where that pays, and
 * allreduce results bit-identical on every rank. Errors are fatal for a
 * benchmark: the message from mw_strerror/mw_last_error is printed and the
 * rank exits 2.
 */
#include "comm.h"

#include <memwire.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static mw_endpoint *g_ep;
static int g_rank, g_size;

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

void comm_init(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    MW(mw_init(&g_ep));
    uint32_t r = 0, n = 0;
    MW(mw_rank(g_ep, &r));
    MW(mw_size(g_ep, &n));
    g_rank = (int)r;
    g_size = (int)n;
}

void comm_finalize(void) { MW(mw_finalize(&g_ep)); }

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
    MW(mw_allgatherv(g_ep, NULL, send, sendbytes, recv, counts, displs));
}

void comm_alltoall(const void *send, void *recv, size_t bytes) {
    MW(mw_alltoall(g_ep, NULL, send, recv, bytes));
}

void comm_alltoallv(const void *send, const size_t *scounts, const size_t *sdispls, void *recv,
                    const size_t *rcounts, const size_t *rdispls) {
    MW(mw_alltoallv(g_ep, NULL, send, scounts, sdispls, recv, rcounts, rdispls));
}
