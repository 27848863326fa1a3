/*
 * reduce.c: reductions (MPI-5.0 6.9-6.11): reduce, allreduce, scan,
 * exscan, reduce_scatter_block, reduce_scatter. memwire's team reductions
 * when it knows the type and operation (contiguous integers and floats with
 * SUM, PROD, MIN, MAX and the bitwise operations), otherwise rank-ordered
 * reductions over the communicator's collective context, which keep MPI's
 * order for non-commutative user operations.
 *
 * Work buffers hold `count` elements in the user's layout: mwmpi_span() bytes
 * starting at the data's true lower bound.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Tags of the face's own messages in a collective context, one per kind
 * (members call collectives in the same order, and memwire keeps each
 * pair's order within a context). */
enum { TAG_REDUCE = 16, TAG_SCAN, TAG_RSCATTER };

#define TRY(expr)                                  \
    do {                                           \
        int err_ = (expr);                         \
        if (err_ != MPI_SUCCESS) return err_;      \
    } while (0)

size_t mwmpi_span(const struct mwmpi_type *t, MPI_Count count) {
    return count == 0 ? 0 : (size_t)((count - 1) * t->extent + t->true_extent);
}

/* A work buffer for `count` elements: `base` is where element 0 starts
 * (what an operation is given), `mem` what was allocated. */
struct work {
    char *mem, *base;
};

static bool work_new(struct work *w, const struct mwmpi_type *t, MPI_Count count, const void *from) {
    size_t n = mwmpi_span(t, count);
    w->mem = malloc(n + 1);
    if (w->mem == NULL) return false;
    w->base = w->mem - t->true_lb;
    if (from != NULL && n > 0) memcpy(w->mem, (const char *)from + t->true_lb, n);
    return true;
}

static void copy_elems(const struct mwmpi_type *t, MPI_Count count, const void *from, void *to) {
    size_t n = mwmpi_span(t, count);
    if (n > 0 && from != to) memmove((char *)to + t->true_lb, (const char *)from + t->true_lb, n);
}

void mwmpi_combine(const struct mwmpi_op *op, const struct mwmpi_type *t, MPI_Count count, const void *in, void *inout) {
    bool kernel_layout = t->predefined || mwmpi_type_contiguous(t, count) || op->user != NULL;
    if (kernel_layout) {
        mwmpi_op_apply(op, t, in, inout, count);
        return;
    }
    /* Basic elements of one kind scattered by the layout: reduce them packed. */
    size_t bytes = (size_t)count * t->size;
    char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        return;
    }
    mwmpi_pack(t, count, in, a);
    mwmpi_pack(t, count, inout, b);
    struct mwmpi_type flat = *t;
    flat.extent = flat.true_extent = (MPI_Aint)t->size;
    flat.lb = flat.true_lb = 0;
    mwmpi_op_apply(op, &flat, a, b, count);
    mwmpi_unpack(t, count, b, bytes, inout);
    free(a);
    free(b);
}

static int send_elems(struct mwmpi_comm *c, int dest, int tag, const struct mwmpi_type *t, MPI_Count count, const void *buf) {
    return mwmpi_coll_send(c, dest, tag, (const char *)buf + t->true_lb, mwmpi_span(t, count));
}

static int recv_elems(struct mwmpi_comm *c, int source, int tag, const struct mwmpi_type *t, MPI_Count count, void *buf) {
    return mwmpi_coll_recv(c, source, tag, (char *)buf + t->true_lb, mwmpi_span(t, count));
}

struct red_args {
    struct mwmpi_comm *c;
    struct mwmpi_type *t;
    struct mwmpi_op *op;
};

static int red_check(const char *routine, MPI_Comm comm, MPI_Datatype datatype, MPI_Count count, MPI_Op op,
                     struct red_args *a) {
    MWMPI_REQUIRE_INIT(routine);
    a->c = mwmpi_comm_of(comm);
    if (a->c == NULL) return mwmpi_raise(NULL, MPI_ERR_COMM, routine, "invalid communicator");
    TRY(mwmpi_type_check(a->c, datatype, routine, &a->t));
    if (count < 0) return mwmpi_raise(a->c, MPI_ERR_COUNT, routine, "negative count");
    a->op = mwmpi_op_of(op);
    if (a->op == NULL) return mwmpi_raise(a->c, MPI_ERR_OP, routine, "invalid operation");
    if (mwmpi_op_check(a->op, a->t) != MPI_SUCCESS)
        return mwmpi_raise(a->c, MPI_ERR_OP, routine, "the operation does not apply to datatype %s", a->t->name);
    if (a->op->user == NULL && a->t->kind == K_NONE)
        return mwmpi_raise(a->c, MPI_ERR_OP, routine, "datatype %s mixes basic types", a->t->name);
    return MPI_SUCCESS;
}

/* Rank-ordered reduction to `root` of every member's `send` (user layout)
 * into `recv` at root: result = x0 op (x1 op (... op x_{n-1})). */
static int reduce_ordered(struct red_args *a, const void *send, void *recv, MPI_Count count, int root) {
    struct mwmpi_comm *c = a->c;
    if (c->rank != root) return send_elems(c, root, TAG_REDUCE, a->t, count, send);
    struct work acc, in;
    if (!work_new(&acc, a->t, count, NULL) || !work_new(&in, a->t, count, NULL)) return MPI_ERR_NO_MEM;
    int err = MPI_SUCCESS;
    for (int i = c->size - 1; i >= 0 && err == MPI_SUCCESS; i--) {
        void *dst = i == c->size - 1 ? acc.base : in.base;
        if (i == c->rank) copy_elems(a->t, count, send, dst);
        else err = recv_elems(c, i, TAG_REDUCE, a->t, count, dst);
        if (err == MPI_SUCCESS && i != c->size - 1) mwmpi_combine(a->op, a->t, count, in.base, acc.base);
    }
    if (err == MPI_SUCCESS) copy_elems(a->t, count, acc.base, recv);
    free(acc.mem);
    free(in.mem);
    return err;
}

static int reduce(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root,
                  MPI_Comm comm, bool all, const char *routine) {
    struct red_args a;
    TRY(red_check(routine, comm, datatype, count, op, &a));
    struct mwmpi_comm *c = a.c;
    if (!all && (root < 0 || root >= c->size)) return mwmpi_raise(c, MPI_ERR_ROOT, routine, "root %d out of range", root);
    bool receiver = all || c->rank == root;
    const void *send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    if (c->size == 1) {
        if (receiver) copy_elems(a.t, count, send, recvbuf);
        return MPI_SUCCESS;
    }
    mw_dtype dt;
    mw_op mop;
    if (mwmpi_op_native(a.op, a.t, &dt, &mop) && mwmpi_type_contiguous(a.t, count)) {
        size_t n = (size_t)count * a.t->kind_count;
        const char *s = (const char *)send + a.t->true_lb;
        char *r = receiver ? (char *)recvbuf + a.t->true_lb : NULL;
        mw_status st = all ? mw_allreduce(mwmpi.ep, c->team, dt, mop, s, r, n)
                           : mw_reduce(mwmpi.ep, c->team, (uint32_t)root, dt, mop, s, r, n);
        return st == MW_OK ? MPI_SUCCESS : mwmpi_raise_mw(c, st, routine);
    }
    int err = reduce_ordered(&a, send, recvbuf, count, all ? 0 : root);
    if (err == MPI_SUCCESS && all) err = PMPI_Bcast_c(recvbuf, count, datatype, 0, comm);
    return err == MPI_SUCCESS ? MPI_SUCCESS : mwmpi_raise(c, err, routine, NULL);
}

int PMPI_Reduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root,
                  MPI_Comm comm) {
    return reduce(sendbuf, recvbuf, count, datatype, op, root, comm, false, "MPI_Reduce");
}

int PMPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm) {
    return reduce(sendbuf, recvbuf, count, datatype, op, root, comm, false, "MPI_Reduce");
}

int PMPI_Allreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                     MPI_Comm comm) {
    return reduce(sendbuf, recvbuf, count, datatype, op, 0, comm, true, "MPI_Allreduce");
}

int PMPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    return reduce(sendbuf, recvbuf, count, datatype, op, 0, comm, true, "MPI_Allreduce");
}

/* Scan and exscan (MPI-5.0 6.11): a chain through the ranks in order;
 * rank i gets x0 op ... op x_i (scan) or x0 op ... op x_{i-1} (exscan). */
static int scan(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                bool exclusive, const char *routine) {
    struct red_args a;
    TRY(red_check(routine, comm, datatype, count, op, &a));
    struct mwmpi_comm *c = a.c;
    const void *send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    struct work prefix, mine;
    if (!work_new(&prefix, a.t, count, NULL) || !work_new(&mine, a.t, count, send))
        return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    int err = MPI_SUCCESS;
    if (c->rank > 0) {
        /* prefix = x0 op ... op x_{rank-1}; then mine = prefix op mine. */
        err = recv_elems(c, c->rank - 1, TAG_SCAN, a.t, count, prefix.base);
        if (err == MPI_SUCCESS) {
            if (exclusive) copy_elems(a.t, count, prefix.base, recvbuf);
            mwmpi_combine(a.op, a.t, count, prefix.base, mine.base);
        }
    }
    if (err == MPI_SUCCESS && c->rank + 1 < c->size) err = send_elems(c, c->rank + 1, TAG_SCAN, a.t, count, mine.base);
    if (err == MPI_SUCCESS && !exclusive) copy_elems(a.t, count, mine.base, recvbuf);
    free(prefix.mem);
    free(mine.mem);
    return err == MPI_SUCCESS ? MPI_SUCCESS : mwmpi_raise(c, err, routine, NULL);
}

int PMPI_Scan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    return scan(sendbuf, recvbuf, count, datatype, op, comm, false, "MPI_Scan");
}

int PMPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    return scan(sendbuf, recvbuf, count, datatype, op, comm, false, "MPI_Scan");
}

int PMPI_Exscan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    return scan(sendbuf, recvbuf, count, datatype, op, comm, true, "MPI_Exscan");
}

int PMPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    return scan(sendbuf, recvbuf, count, datatype, op, comm, true, "MPI_Exscan");
}

/* Reduce-scatter: the whole reduction at rank 0, then each rank's block. */
static int reduce_scatter(const void *sendbuf, void *recvbuf, const MPI_Count *counts, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm, const char *routine) {
    struct mwmpi_comm *c = mwmpi_comm_of(comm);
    if (c == NULL) return mwmpi_raise(NULL, MPI_ERR_COMM, routine, "invalid communicator");
    struct mwmpi_type *t;
    TRY(mwmpi_type_check(c, datatype, routine, &t));
    MPI_Count total = 0;
    for (int i = 0; i < c->size; i++) {
        if (counts[i] < 0) return mwmpi_raise(c, MPI_ERR_COUNT, routine, "negative count");
        total += counts[i];
    }
    const void *send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    struct work all;
    if (!work_new(&all, t, total, NULL)) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    int err = PMPI_Reduce_c(send, all.base, total, datatype, op, 0, comm);
    if (err == MPI_SUCCESS) {
        if (c->rank == 0) {
            for (int i = 1; i < c->size && err == MPI_SUCCESS; i++) {
                MPI_Count at = 0;
                for (int j = 0; j < i; j++) at += counts[j];
                err = send_elems(c, i, TAG_RSCATTER, t, counts[i], all.base + at * t->extent);
            }
            if (err == MPI_SUCCESS) copy_elems(t, counts[0], all.base, recvbuf);
        } else {
            err = recv_elems(c, 0, TAG_RSCATTER, t, counts[c->rank], recvbuf);
        }
    }
    free(all.mem);
    return err == MPI_SUCCESS ? MPI_SUCCESS : mwmpi_raise(c, err, routine, NULL);
}

int PMPI_Reduce_scatter_block_c(const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype,
                                MPI_Op op, MPI_Comm comm) {
    static const char routine[] = "MPI_Reduce_scatter_block";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    MPI_Count *counts = malloc((size_t)c->size * sizeof *counts);
    if (counts == NULL) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    for (int i = 0; i < c->size; i++) counts[i] = recvcount;
    int err = reduce_scatter(sendbuf, recvbuf, counts, datatype, op, comm, routine);
    free(counts);
    return err;
}

int PMPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm) {
    return PMPI_Reduce_scatter_block_c(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int PMPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm) {
    static const char routine[] = "MPI_Reduce_scatter";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    if (recvcounts == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL recvcounts");
    MPI_Count *counts = malloc((size_t)c->size * sizeof *counts);
    if (counts == NULL) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    for (int i = 0; i < c->size; i++) counts[i] = recvcounts[i];
    int err = reduce_scatter(sendbuf, recvbuf, counts, datatype, op, comm, routine);
    free(counts);
    return err;
}

int PMPI_Reduce_scatter_c(const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm) {
    static const char routine[] = "MPI_Reduce_scatter";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    if (recvcounts == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL recvcounts");
    return reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, routine);
}
