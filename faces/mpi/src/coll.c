/*
 * coll.c: blocking collectives (MPI-5.0 chapter 6) on intra-communicators:
 * barrier, bcast, gather, scatter, allgather, alltoall go to memwire's
 * team collectives (bytes; other layouts packed and unpacked around them);
 * reduce and allreduce too when memwire knows the type and operation,
 * otherwise rank-ordered reductions over the communicator's collective
 * context (reduce.c).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int mwmpi_coll_send(struct mwmpi_comm *c, int dest, int tag, const void *buf, size_t len) {
    mw_status st = mw_send_in(mwmpi.ep, c->ctx + 1, (uint32_t)c->world[dest], (uint64_t)tag, buf, len);
    return st == MW_OK ? MPI_SUCCESS : mwmpi_class_of(st);
}

int mwmpi_coll_recv(struct mwmpi_comm *c, int source, int tag, void *buf, size_t len) {
    mw_status st = mw_recv_in(mwmpi.ep, c->ctx + 1, (uint32_t)c->world[source], (uint64_t)tag, buf, len, NULL);
    return st == MW_OK ? MPI_SUCCESS : mwmpi_class_of(st);
}

/* ---- data layout helpers ---------------------------------------------------- */

/* `count` elements of a type as packed bytes: `data` is the user's buffer
 * when contiguous, else `own` (malloc'ed; pack/unpack with the user's). */
struct packed {
    void *data;
    size_t len;
    void *own;
};

static int packed_in(struct packed *p, const void *buf, MPI_Count count, const struct mwmpi_type *t, bool fill) {
    p->len = (size_t)count * t->size;
    p->own = NULL;
    if (mwmpi_type_contiguous(t, count)) {
        p->data = p->len > 0 ? (char *)buf + t->true_lb : (void *)buf;
        return MPI_SUCCESS;
    }
    p->own = malloc(p->len + 1);
    if (p->own == NULL) return MPI_ERR_NO_MEM;
    if (fill) mwmpi_pack(t, count, buf, p->own);
    p->data = p->own;
    return MPI_SUCCESS;
}

static void packed_out(struct packed *p, void *buf, MPI_Count count, const struct mwmpi_type *t) {
    if (p->own != NULL) {
        mwmpi_unpack(t, count, p->own, p->len, buf);
        free(p->own);
        p->own = NULL;
    }
}

static void packed_drop(struct packed *p) {
    free(p->own);
    p->own = NULL;
}

/* Common checks: initialized, communicator, committed type, count. */
static int coll_check(const char *routine, MPI_Comm comm, struct mwmpi_comm **c) {
    MWMPI_REQUIRE_INIT(routine);
    *c = mwmpi_comm_of(comm);
    if (*c == NULL) return mwmpi_raise(NULL, MPI_ERR_COMM, routine, "invalid communicator");
    return MPI_SUCCESS;
}

static int type_arg(struct mwmpi_comm *c, MPI_Datatype h, MPI_Count count, const char *routine, struct mwmpi_type **t) {
    int err = mwmpi_type_check(c, h, routine, t);
    if (err != MPI_SUCCESS) return err;
    if (count < 0) return mwmpi_raise(c, MPI_ERR_COUNT, routine, "negative count");
    return MPI_SUCCESS;
}

static int root_arg(struct mwmpi_comm *c, int root, const char *routine) {
    if (root < 0 || root >= c->size) return mwmpi_raise(c, MPI_ERR_ROOT, routine, "root %d is not in 0..%d", root, c->size - 1);
    return MPI_SUCCESS;
}

#define TRY(expr)                                  \
    do {                                           \
        int err_ = (expr);                         \
        if (err_ != MPI_SUCCESS) return err_;      \
    } while (0)

static int mw_result(struct mwmpi_comm *c, mw_status st, const char *routine) {
    return st == MW_OK ? MPI_SUCCESS : mwmpi_raise_mw(c, st, routine);
}

/* ---- barrier, bcast --------------------------------------------------------- */

int PMPI_Barrier(MPI_Comm comm) {
    struct mwmpi_comm *c;
    TRY(coll_check("MPI_Barrier", comm, &c));
    if (c->size == 1) return MPI_SUCCESS;
    return mw_result(c, mw_team_barrier(mwmpi.ep, c->team), "MPI_Barrier");
}

int PMPI_Bcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    static const char routine[] = "MPI_Bcast";
    struct mwmpi_comm *c;
    struct mwmpi_type *t;
    TRY(coll_check(routine, comm, &c));
    TRY(type_arg(c, datatype, count, routine, &t));
    TRY(root_arg(c, root, routine));
    if (c->size == 1) return MPI_SUCCESS;
    struct packed p;
    if (packed_in(&p, buffer, count, t, c->rank == root) != MPI_SUCCESS) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    mw_status st = mw_bcast(mwmpi.ep, c->team, (uint32_t)root, p.data, p.len);
    if (st != MW_OK) {
        packed_drop(&p);
        return mwmpi_raise_mw(c, st, routine);
    }
    if (c->rank != root) packed_out(&p, buffer, count, t);
    packed_drop(&p);
    return MPI_SUCCESS;
}

int PMPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    return PMPI_Bcast_c(buffer, count, datatype, root, comm);
}

/* ---- gather, scatter, allgather, alltoall ----------------------------------- */

/* `n` blocks of `count` elements of t, block i at buf + i * count * extent,
 * as one packed run of n * count * size bytes. */
static int blocks_in(struct packed *p, const void *buf, int n, MPI_Count count, const struct mwmpi_type *t, bool fill) {
    return packed_in(p, buf, (MPI_Count)n * count, t, fill);
}

static int gather(const void *sendbuf, MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                  MPI_Datatype rtype, int root, MPI_Comm comm, bool all, const char *routine) {
    struct mwmpi_comm *c;
    struct mwmpi_type *st_, *rt = NULL;
    TRY(coll_check(routine, comm, &c));
    if (!all) TRY(root_arg(c, root, routine));
    bool receiver = all || c->rank == root;
    bool in_place = sendbuf == MPI_IN_PLACE;
    if (receiver) TRY(type_arg(c, rtype, rcount, routine, &rt));
    if (!(in_place && receiver)) TRY(type_arg(c, stype, scount, routine, &st_));
    size_t block = receiver ? (size_t)rcount * rt->size : (size_t)scount * st_->size;
    if (receiver && !in_place && (size_t)scount * st_->size != block)
        return mwmpi_raise(c, MPI_ERR_TRUNCATE, routine, "send and receive sizes differ");
    struct packed r = {0}, s = {0};
    int err = MPI_SUCCESS;
    if (receiver && blocks_in(&r, recvbuf, c->size, rcount, rt, in_place) != MPI_SUCCESS) err = MPI_ERR_NO_MEM;
    const void *send;
    if (in_place && receiver) {
        send = (char *)r.data + (size_t)c->rank * block;
    } else {
        if (err == MPI_SUCCESS && packed_in(&s, sendbuf, scount, st_, true) != MPI_SUCCESS) err = MPI_ERR_NO_MEM;
        send = s.data;
    }
    if (err != MPI_SUCCESS) {
        packed_drop(&r);
        packed_drop(&s);
        return mwmpi_raise(c, err, routine, NULL);
    }
    mw_status ms;
    if (c->size == 1) {
        if (send != r.data) memmove(r.data, send, block);
        ms = MW_OK;
    } else if (all) {
        ms = mw_allgather(mwmpi.ep, c->team, send, block, r.data);
    } else {
        ms = mw_gather(mwmpi.ep, c->team, (uint32_t)root, send, block, receiver ? r.data : NULL);
    }
    packed_drop(&s);
    if (ms != MW_OK) {
        packed_drop(&r);
        return mwmpi_raise_mw(c, ms, routine);
    }
    if (receiver) packed_out(&r, recvbuf, (MPI_Count)c->size * rcount, rt);
    return MPI_SUCCESS;
}

int PMPI_Gather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm) {
    return gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, false, "MPI_Gather");
}

int PMPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
    return gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, false, "MPI_Gather");
}

int PMPI_Allgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                     MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    return gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, 0, comm, true, "MPI_Allgather");
}

int PMPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm) {
    return gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, 0, comm, true, "MPI_Allgather");
}

static int scatter(const void *sendbuf, MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                   MPI_Datatype rtype, int root, MPI_Comm comm) {
    static const char routine[] = "MPI_Scatter";
    struct mwmpi_comm *c;
    struct mwmpi_type *st_ = NULL, *rt = NULL;
    TRY(coll_check(routine, comm, &c));
    TRY(root_arg(c, root, routine));
    bool is_root = c->rank == root;
    bool in_place = is_root && recvbuf == MPI_IN_PLACE;
    if (is_root) TRY(type_arg(c, stype, scount, routine, &st_));
    if (!in_place) TRY(type_arg(c, rtype, rcount, routine, &rt));
    size_t block = is_root ? (size_t)scount * st_->size : (size_t)rcount * rt->size;
    if (is_root && !in_place && (size_t)rcount * rt->size != block)
        return mwmpi_raise(c, MPI_ERR_TRUNCATE, routine, "send and receive sizes differ");
    struct packed s = {0}, r = {0};
    int err = MPI_SUCCESS;
    if (is_root && blocks_in(&s, sendbuf, c->size, scount, st_, true) != MPI_SUCCESS) err = MPI_ERR_NO_MEM;
    void *recv;
    if (in_place) {
        recv = (char *)s.data + (size_t)root * block;
    } else {
        if (err == MPI_SUCCESS && packed_in(&r, recvbuf, rcount, rt, false) != MPI_SUCCESS) err = MPI_ERR_NO_MEM;
        recv = r.data;
    }
    if (err != MPI_SUCCESS) {
        packed_drop(&s);
        packed_drop(&r);
        return mwmpi_raise(c, err, routine, NULL);
    }
    mw_status ms = MW_OK;
    if (c->size == 1) {
        if (recv != s.data) memmove(recv, s.data, block);
    } else {
        ms = mw_scatter(mwmpi.ep, c->team, (uint32_t)root, is_root ? s.data : NULL, recv, block);
    }
    packed_drop(&s);
    if (ms != MW_OK) {
        packed_drop(&r);
        return mwmpi_raise_mw(c, ms, routine);
    }
    if (!in_place) packed_out(&r, recvbuf, rcount, rt);
    return MPI_SUCCESS;
}

int PMPI_Scatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount,
                   MPI_Datatype recvtype, int root, MPI_Comm comm) {
    return scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int PMPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm) {
    return scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

static int alltoall(const void *sendbuf, MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                    MPI_Datatype rtype, MPI_Comm comm) {
    static const char routine[] = "MPI_Alltoall";
    struct mwmpi_comm *c;
    struct mwmpi_type *st_, *rt;
    TRY(coll_check(routine, comm, &c));
    TRY(type_arg(c, rtype, rcount, routine, &rt));
    bool in_place = sendbuf == MPI_IN_PLACE;
    if (!in_place) TRY(type_arg(c, stype, scount, routine, &st_));
    size_t block = (size_t)rcount * rt->size;
    if (!in_place && (size_t)scount * st_->size != block)
        return mwmpi_raise(c, MPI_ERR_TRUNCATE, routine, "send and receive sizes differ");
    struct packed s = {0}, r = {0};
    int err = blocks_in(&r, recvbuf, c->size, rcount, rt, in_place);
    if (err == MPI_SUCCESS && !in_place) err = blocks_in(&s, sendbuf, c->size, scount, st_, true);
    if (err != MPI_SUCCESS) {
        packed_drop(&r);
        return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    }
    const void *send = in_place ? r.data : s.data;
    mw_status ms = MW_OK;
    if (c->size == 1) {
        if (send != r.data) memmove(r.data, send, block);
    } else {
        ms = mw_alltoall(mwmpi.ep, c->team, send, r.data, block);
    }
    packed_drop(&s);
    if (ms != MW_OK) {
        packed_drop(&r);
        return mwmpi_raise_mw(c, ms, routine);
    }
    packed_out(&r, recvbuf, (MPI_Count)c->size * rcount, rt);
    return MPI_SUCCESS;
}

int PMPI_Alltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm) {
    return alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int PMPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
    return alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}
