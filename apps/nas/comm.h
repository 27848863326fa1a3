/*
 * comm.h: the small communication layer the NAS kernels (cg.c, ft.c, is.c)
 * are written against, so that each kernel exists once and is built twice:
 * over memwire (comm_memwire.c, puts with signals into a symmetric staging
 * region) and over MPI (comm_mpi.c, for MPICH and Open MPI).
 *
 * Every function is collective over all ranks unless it says otherwise, and
 * every rank must call the collectives in the same order with matching
 * sizes. A communication failure is not recoverable for a benchmark: the
 * backend prints the reason and exits the process with status 2 (a run that
 * merely fails verification exits with 1, see npb.h).
 */
#ifndef NAS_COMM_H
#define NAS_COMM_H

#include <stddef.h>
#include <stdint.h>

typedef enum { COMM_SUM, COMM_MAX } comm_op;

/* Joins the job. Call first, before anything else in this header. */
void comm_init(int *argc, char ***argv);
/* Leaves the job (collective). */
void comm_finalize(void);

/* This rank, 0..size-1, and the number of ranks (local, not collective). */
int comm_rank(void);
int comm_size(void);
/* Name of the backend: "memwire", "mpich" or "openmpi" (local). */
const char *comm_name(void);

/* Wall-clock seconds from an arbitrary origin (local). */
double comm_wtime(void);

void comm_barrier(void);

/* In place: buf[i] = op over all ranks of buf[i], for i < n. Every rank
 * gets bit-identical results. */
void comm_allreduce_double(double *buf, size_t n, comm_op op);
void comm_allreduce_i64(int64_t *buf, size_t n, comm_op op);

/* Every rank sends `bytes` bytes from `send`; recv (size * bytes) receives
 * rank r's bytes at r * bytes. */
void comm_allgather(const void *send, void *recv, size_t bytes);

/* Rank r sends `sendbytes` bytes (which must equal counts[r] everywhere);
 * they land at recv + displs[r] on every rank. Counts and displacements are
 * in bytes and the same on every rank. */
void comm_allgatherv(const void *send, size_t sendbytes, void *recv, const size_t *counts,
                     const size_t *displs);

/* Block d of `send` (bytes each, at d * bytes) goes to rank d, landing at
 * recv + r * bytes where r is the sender. */
void comm_alltoall(const void *send, void *recv, size_t bytes);

/* scounts[d] bytes from send + sdispls[d] go to rank d; from rank s,
 * rcounts[s] bytes land at recv + rdispls[s]. rcounts[s] must equal what s
 * sends here. All in bytes. */
void comm_alltoallv(const void *send, const size_t *scounts, const size_t *sdispls, void *recv,
                    const size_t *rcounts, const size_t *rdispls);

#endif /* NAS_COMM_H */
