/*
 * nred.c: the nonblocking reductions (Ireduce, Iallreduce, Iscan, Iexscan,
 * Ireduce_scatter_block, Ireduce_scatter) on nbc.c's engine. Every member
 * sends its contribution (its whole user-layout span, or for
 * reduce_scatter the block of each member) to the members whose result
 * needs it; when all have arrived, each combines them in rank order,
 * x_lo op (x_lo+1 op (... op x_hi)), so non-commutative user operations
 * get MPI's order, and writes the result into its receive buffer.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum red_kind { RED_REDUCE, RED_ALL, RED_SCAN, RED_EXSCAN, RED_SCATTER };

struct red {
    struct mwmpi_nbc base;
    enum red_kind kind;
    struct mwmpi_type *t;
    struct mwmpi_op *op;
    MPI_Count count; /* elements reduced here */
    void *recvbuf;
    /* Contribution of member i, in user layout at element 0 (NULL: none). */
    const void **from;
    int lo, hi; /* the members reduced here */
};

static int red_finish(struct mwmpi_nbc *b) {
    struct red *r = (struct red *)b;
    if (r->hi < r->lo) return MPI_SUCCESS; /* exscan at rank 0: nothing */
    size_t span = mwmpi_span(r->t, r->count);
    char *acc_mem = mwmpi_nbc_alloc(b, span), *packed = mwmpi_nbc_alloc(b, (size_t)r->count * r->t->size);
    if (acc_mem == NULL || packed == NULL) return MPI_ERR_NO_MEM;
    char *acc = acc_mem - r->t->true_lb;
    if (span > 0) memcpy(acc_mem, (const char *)r->from[r->hi] + r->t->true_lb, span);
    for (int i = r->hi - 1; i >= r->lo; i--) mwmpi_combine(r->op, r->t, r->count, r->from[i], acc);
    /* Through packing, so the gaps of the receive layout keep their bytes. */
    mwmpi_pack(r->t, r->count, acc, packed);
    mwmpi_unpack(r->t, r->count, packed, (size_t)r->count * r->t->size, r->recvbuf);
    return MPI_SUCCESS;
}

/* A received contribution's buffer: `span` bytes placed at element 0. */
static int recv_from(struct red *r, int p, MPI_Count count) {
    size_t span = mwmpi_span(r->t, count);
    char *mem = mwmpi_nbc_alloc(&r->base, span);
    if (mem == NULL) return MPI_ERR_NO_MEM;
    r->from[p] = mem - r->t->true_lb;
    return mwmpi_nbc_recv(&r->base, p, mem, span);
}

static int send_to(struct red *r, int p, const void *buf, MPI_Count count) {
    return mwmpi_nbc_send(&r->base, p, (const char *)buf + r->t->true_lb, mwmpi_span(r->t, count));
}

/* counts: per member's block (RED_SCATTER), else NULL and `count`. */
static int start(enum red_kind kind, const void *sendbuf, void *recvbuf, MPI_Count count, const MPI_Count *counts,
                 MPI_Datatype datatype, MPI_Op oph, int root, MPI_Comm comm, MPI_Request *request, const char *routine) {
    MWMPI_REQUIRE_INIT(routine);
    struct mwmpi_comm *c = mwmpi_comm_of(comm);
    if (c == NULL) return mwmpi_raise(NULL, MPI_ERR_COMM, routine, "invalid communicator");
    if (request == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL request");
    struct mwmpi_type *t;
    int err = mwmpi_type_check(c, datatype, routine, &t);
    if (err != MPI_SUCCESS) return err;
    struct mwmpi_op *op = mwmpi_op_of(oph);
    if (op == NULL) return mwmpi_raise(c, MPI_ERR_OP, routine, "invalid operation");
    if (mwmpi_op_check(op, t) != MPI_SUCCESS || (op->user == NULL && t->kind == K_NONE))
        return mwmpi_raise(c, MPI_ERR_OP, routine, "the operation does not apply to datatype %s", t->name);
    if (kind == RED_REDUCE && (root < 0 || root >= c->size))
        return mwmpi_raise(c, MPI_ERR_ROOT, routine, "root %d is not in 0..%d", root, c->size - 1);
    int n = c->size, me = c->rank;
    MPI_Count total = count;
    MPI_Aint *offset = NULL;
    if (kind == RED_SCATTER) {
        offset = calloc((size_t)n + 1, sizeof *offset);
        if (offset == NULL) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
        total = 0;
        for (int i = 0; i < n; i++) {
            if (counts[i] < 0) {
                free(offset);
                return mwmpi_raise(c, MPI_ERR_COUNT, routine, "negative count");
            }
            offset[i] = (MPI_Aint)total * t->extent;
            total += counts[i];
        }
        count = counts[me];
    } else if (count < 0) {
        return mwmpi_raise(c, MPI_ERR_COUNT, routine, "negative count");
    }
    struct red *r = (struct red *)mwmpi_nbc_new(c, sizeof *r);
    if (r == NULL) {
        free(offset);
        return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    }
    r->kind = kind;
    r->t = t;
    r->op = op;
    r->count = count;
    r->recvbuf = recvbuf;
    r->base.finish = red_finish;
    r->from = mwmpi_nbc_alloc(&r->base, (size_t)n * sizeof *r->from);
    err = r->from == NULL || !mwmpi_nbc_keep_type(&r->base, t) ? MPI_ERR_NO_MEM : MPI_SUCCESS;
    /* MPI_IN_PLACE: the contribution is in recvbuf (at the root for reduce). */
    const void *mine = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    bool receives = kind != RED_REDUCE || me == root;
    r->lo = 0;
    r->hi = kind == RED_SCAN ? me : kind == RED_EXSCAN ? me - 1 : n - 1;
    if (!receives) r->hi = -1;
    for (int p = 0; err == MPI_SUCCESS && p < n; p++) {
        /* From p: does my result include p's contribution? */
        bool need = receives && p >= r->lo && p <= r->hi;
        if (need && p == me) r->from[p] = kind == RED_SCATTER ? (const char *)mine + offset[me] : mine;
        else if (need) err = recv_from(r, p, count);
    }
    for (int p = 0; err == MPI_SUCCESS && p < n; p++) {
        if (p == me) continue;
        /* To p: does p's result include mine? */
        bool to = kind == RED_REDUCE ? p == root : kind == RED_SCAN ? p >= me : kind == RED_EXSCAN ? p > me : true;
        if (!to) continue;
        if (kind == RED_SCATTER) err = send_to(r, p, (const char *)mine + offset[p], counts[p]);
        else err = send_to(r, p, mine, count);
    }
    free(offset);
    return mwmpi_nbc_start(&r->base, err, request, routine);
}

int PMPI_Ireduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root,
                   MPI_Comm comm, MPI_Request *request) {
    return start(RED_REDUCE, sendbuf, recvbuf, count, NULL, datatype, op, root, comm, request, "MPI_Ireduce");
}
int PMPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                 MPI_Comm comm, MPI_Request *request) {
    return start(RED_REDUCE, sendbuf, recvbuf, count, NULL, datatype, op, root, comm, request, "MPI_Ireduce");
}
int PMPI_Iallreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                      MPI_Comm comm, MPI_Request *request) {
    return start(RED_ALL, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iallreduce");
}
int PMPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                    MPI_Request *request) {
    return start(RED_ALL, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iallreduce");
}
int PMPI_Iscan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                 MPI_Request *request) {
    return start(RED_SCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iscan");
}
int PMPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
               MPI_Request *request) {
    return start(RED_SCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iscan");
}
int PMPI_Iexscan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request) {
    return start(RED_EXSCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iexscan");
}
int PMPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                 MPI_Request *request) {
    return start(RED_EXSCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iexscan");
}

/* Reduce_scatter forms: one count for every member, or an int array. */
static int rscatter(const void *sendbuf, void *recvbuf, MPI_Count one, const int *icounts, const MPI_Count *ccounts,
                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request, const char *routine) {
    MWMPI_REQUIRE_INIT(routine);
    struct mwmpi_comm *c = mwmpi_comm_of(comm);
    if (c == NULL) return mwmpi_raise(NULL, MPI_ERR_COMM, routine, "invalid communicator");
    MPI_Count *counts = malloc(((size_t)c->size + 1) * sizeof *counts);
    if (counts == NULL) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    for (int i = 0; i < c->size; i++) counts[i] = icounts != NULL ? icounts[i] : ccounts != NULL ? ccounts[i] : one;
    int err = start(RED_SCATTER, sendbuf, recvbuf, 0, counts, datatype, op, 0, comm, request, routine);
    free(counts);
    return err;
}

int PMPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                               MPI_Comm comm, MPI_Request *request) {
    return rscatter(sendbuf, recvbuf, recvcount, NULL, NULL, datatype, op, comm, request, "MPI_Ireduce_scatter_block");
}
int PMPI_Ireduce_scatter_block_c(const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype,
                                 MPI_Op op, MPI_Comm comm, MPI_Request *request) {
    return rscatter(sendbuf, recvbuf, recvcount, NULL, NULL, datatype, op, comm, request, "MPI_Ireduce_scatter_block");
}
int PMPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                         MPI_Comm comm, MPI_Request *request) {
    return rscatter(sendbuf, recvbuf, 0, recvcounts, NULL, datatype, op, comm, request, "MPI_Ireduce_scatter");
}
int PMPI_Ireduce_scatter_c(const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype,
                           MPI_Op op, MPI_Comm comm, MPI_Request *request) {
    return rscatter(sendbuf, recvbuf, 0, NULL, recvcounts, datatype, op, comm, request, "MPI_Ireduce_scatter");
}
