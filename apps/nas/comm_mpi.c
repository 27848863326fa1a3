/*
 * comm_mpi.c: comm.h over MPI, built with mpicc.mpich or mpicc.openmpi for
 * the comparison runs. COMM_NAME (set by the Makefile) names the library.
 * Counts are converted from size_t bytes to MPI's int; a size that does not
 * fit is reported as an error rather than truncated.
 */
#include "comm.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef COMM_NAME
#define COMM_NAME "mpi"
#endif

static int g_rank, g_size;
static int *g_ia, *g_ib, *g_ic, *g_id; /* int count/displacement scratch */

static void fail(const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "nas(%s) rank %d: %s failed: %s\n", COMM_NAME, g_rank, what, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS) fail(#call, rc_);                                                  \
    } while (0)

static int to_int(size_t v) {
    if (v > (size_t)INT_MAX) {
        fprintf(stderr, "nas(%s): message of %zu bytes exceeds MPI's int count\n", COMM_NAME, v);
        MPI_Abort(MPI_COMM_WORLD, 2);
        exit(2);
    }
    return (int)v;
}

void comm_init(int *argc, char ***argv) {
    MPI_Init(argc, argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_size));
    g_ia = malloc(sizeof(int) * (size_t)g_size);
    g_ib = malloc(sizeof(int) * (size_t)g_size);
    g_ic = malloc(sizeof(int) * (size_t)g_size);
    g_id = malloc(sizeof(int) * (size_t)g_size);
    if (!g_ia || !g_ib || !g_ic || !g_id) {
        fprintf(stderr, "nas(%s): out of memory\n", COMM_NAME);
        exit(2);
    }
}

void comm_finalize(void) {
    free(g_ia);
    free(g_ib);
    free(g_ic);
    free(g_id);
    MPI_Finalize();
}

int comm_rank(void) { return g_rank; }
int comm_size(void) { return g_size; }
const char *comm_name(void) { return COMM_NAME; }
double comm_wtime(void) { return MPI_Wtime(); }

void comm_barrier(void) { CHECK(MPI_Barrier(MPI_COMM_WORLD)); }

void comm_allreduce_double(double *buf, size_t n, comm_op op) {
    CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, to_int(n), MPI_DOUBLE, op == COMM_SUM ? MPI_SUM : MPI_MAX,
                        MPI_COMM_WORLD));
}

void comm_allreduce_i64(int64_t *buf, size_t n, comm_op op) {
    CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, to_int(n), MPI_INT64_T, op == COMM_SUM ? MPI_SUM : MPI_MAX,
                        MPI_COMM_WORLD));
}

void comm_allgather(const void *send, void *recv, size_t bytes) {
    CHECK(MPI_Allgather(send, to_int(bytes), MPI_BYTE, recv, to_int(bytes), MPI_BYTE,
                        MPI_COMM_WORLD));
}

void comm_allgatherv(const void *send, size_t sendbytes, void *recv, const size_t *counts,
                     const size_t *displs) {
    for (int r = 0; r < g_size; r++) {
        g_ia[r] = to_int(counts[r]);
        g_ib[r] = to_int(displs[r]);
    }
    CHECK(MPI_Allgatherv(send, to_int(sendbytes), MPI_BYTE, recv, g_ia, g_ib, MPI_BYTE,
                         MPI_COMM_WORLD));
}

void comm_alltoall(const void *send, void *recv, size_t bytes) {
    CHECK(MPI_Alltoall(send, to_int(bytes), MPI_BYTE, recv, to_int(bytes), MPI_BYTE,
                       MPI_COMM_WORLD));
}

void comm_alltoallv(const void *send, const size_t *scounts, const size_t *sdispls, void *recv,
                    const size_t *rcounts, const size_t *rdispls) {
    for (int r = 0; r < g_size; r++) {
        g_ia[r] = to_int(scounts[r]);
        g_ib[r] = to_int(sdispls[r]);
        g_ic[r] = to_int(rcounts[r]);
        g_id[r] = to_int(rdispls[r]);
    }
    CHECK(MPI_Alltoallv(send, g_ia, g_ib, MPI_BYTE, recv, g_ic, g_id, MPI_BYTE, MPI_COMM_WORLD));
}
