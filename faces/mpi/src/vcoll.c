/*
 * vcoll.c: collectives that move data without reducing it, on nbc.c's
 * engine: the v-forms (gatherv, scatterv, allgatherv, alltoallv,
 * alltoallw), blocking and nonblocking, and the nonblocking forms of
 * barrier, bcast, gather, scatter, allgather and alltoall. Each is one
 * exchange: for every member a block to send it and a block to receive
 * from it (either may be absent), this process's own block copied
 * locally. Blocks travel packed; a non-contiguous receive is unpacked when
 * the collective completes.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* One member's block: `count` elements of `type` at `buf` (type NULL: none). */
struct block {
    const void *buf;
    MPI_Count count;
    struct mwmpi_type *type;
};

/* A staged receive to unpack at the end. */
struct unpack {
    void *buf;
    MPI_Count count;
    struct mwmpi_type *type;
    void *staging;
    size_t len;
};

struct xchg {
    struct mwmpi_nbc base;
    struct unpack *unpacks;
    int nunpacks;
};

static int xchg_finish(struct mwmpi_nbc *b) {
    struct xchg *x = (struct xchg *)b;
    for (int i = 0; i < x->nunpacks; i++)
        mwmpi_unpack(x->unpacks[i].type, x->unpacks[i].count, x->unpacks[i].staging, x->unpacks[i].len,
                     x->unpacks[i].buf);
    return MPI_SUCCESS;
}

/* Posts the exchange: sends[p] to member p, recvs[p] from it. */
static int xchg_post(struct xchg *x, const struct block *sends, const struct block *recvs) {
    struct mwmpi_nbc *b = &x->base;
    struct mwmpi_comm *c = b->comm;
    int n = c->size, me = c->rank;
    x->unpacks = mwmpi_nbc_alloc(b, (size_t)n * sizeof *x->unpacks);
    if (x->unpacks == NULL) return MPI_ERR_NO_MEM;
    b->finish = xchg_finish;
    /* Receives first: a member's send to itself or a quick peer finds them. */
    for (int i = 0; i < n; i++) {
        int p = (me + n - i) % n;
        const struct block *r = &recvs[p];
        if (r->type == NULL || p == me) continue;
        size_t len = (size_t)r->count * r->type->size;
        void *data;
        if (mwmpi_type_contiguous(r->type, r->count)) {
            data = len > 0 ? (char *)r->buf + r->type->true_lb : NULL;
        } else {
            data = mwmpi_nbc_alloc(b, len);
            if (data == NULL || !mwmpi_nbc_keep_type(b, r->type)) return MPI_ERR_NO_MEM;
            x->unpacks[x->nunpacks++] = (struct unpack){(void *)r->buf, r->count, r->type, data, len};
        }
        int err = mwmpi_nbc_recv(b, p, data, len);
        if (err != MPI_SUCCESS) return err;
    }
    for (int i = 0; i < n; i++) {
        int p = (me + i) % n;
        const struct block *s = &sends[p];
        if (s->type == NULL) continue;
        size_t len = (size_t)s->count * s->type->size;
        if (p == me) {
            const struct block *r = &recvs[me];
            if (r->type == NULL) continue;
            size_t rlen = (size_t)r->count * r->type->size;
            void *tmp = mwmpi_nbc_alloc(b, len);
            if (tmp == NULL) return MPI_ERR_NO_MEM;
            mwmpi_pack(s->type, s->count, s->buf, tmp);
            if (len > rlen) return MPI_ERR_TRUNCATE;
            mwmpi_unpack(r->type, r->count, tmp, len, (void *)r->buf);
            continue;
        }
        const void *data;
        if (mwmpi_type_contiguous(s->type, s->count)) {
            data = len > 0 ? (const char *)s->buf + s->type->true_lb : NULL;
        } else {
            void *packed = mwmpi_nbc_alloc(b, len);
            if (packed == NULL) return MPI_ERR_NO_MEM;
            mwmpi_pack(s->type, s->count, s->buf, packed);
            data = packed;
        }
        int err = mwmpi_nbc_send(b, p, data, len);
        if (err != MPI_SUCCESS) return err;
    }
    return MPI_SUCCESS;
}

/* ---- arguments ------------------------------------------------------------ */

struct args {
    struct mwmpi_comm *c;
    struct block *sends, *recvs;
    const char *routine;
};

static int args_begin(struct args *a, MPI_Comm comm, const char *routine) {
    MWMPI_REQUIRE_INIT(routine);
    a->routine = routine;
    a->c = mwmpi_comm_of(comm);
    if (a->c == NULL) return mwmpi_raise(NULL, MPI_ERR_COMM, routine, "invalid communicator");
    a->sends = calloc((size_t)a->c->size, sizeof *a->sends);
    a->recvs = calloc((size_t)a->c->size, sizeof *a->recvs);
    if (a->sends == NULL || a->recvs == NULL) {
        free(a->sends);
        free(a->recvs);
        return mwmpi_raise(a->c, MPI_ERR_NO_MEM, routine, NULL);
    }
    return MPI_SUCCESS;
}

static void args_end(struct args *a) {
    free(a->sends);
    free(a->recvs);
}

static int type_of(struct args *a, MPI_Datatype h, struct mwmpi_type **t) {
    return mwmpi_type_check(a->c, h, a->routine, t);
}

static int count_ok(struct args *a, MPI_Count count) {
    return count < 0 ? mwmpi_raise(a->c, MPI_ERR_COUNT, a->routine, "negative count") : MPI_SUCCESS;
}

static int root_ok(struct args *a, int root) {
    if (root < 0 || root >= a->c->size)
        return mwmpi_raise(a->c, MPI_ERR_ROOT, a->routine, "root %d is not in 0..%d", root, a->c->size - 1);
    return MPI_SUCCESS;
}

static const char *at(const void *buf, MPI_Aint bytes) { return (const char *)buf + bytes; }

/* Posts the exchange in `a`, then runs it (request NULL) or hands it over. */
static int go(struct args *a, MPI_Request *request) {
    struct xchg *x = (struct xchg *)mwmpi_nbc_new(a->c, sizeof *x);
    if (x == NULL) {
        args_end(a);
        return mwmpi_raise(a->c, MPI_ERR_NO_MEM, a->routine, NULL);
    }
    int err = xchg_post(x, a->sends, a->recvs);
    args_end(a);
    if (request == NULL) return mwmpi_nbc_run(&x->base, err, a->routine);
    return mwmpi_nbc_start(&x->base, err, request, a->routine);
}

#define TRYA(expr)                          \
    do {                                    \
        int err_ = (expr);                  \
        if (err_ != MPI_SUCCESS) {          \
            args_end(&a);                   \
            return err_;                    \
        }                                   \
    } while (0)

/* ---- the general forms -------------------------------------------------------- */

/* gatherv (all: allgatherv): rcounts/displs (in recv extents) matter at the root (everywhere). */
static int gatherv(const void *sendbuf, MPI_Count scount, MPI_Datatype stype, void *recvbuf, const MPI_Count *rcounts,
                   const MPI_Aint *displs, MPI_Datatype rtype, int root, MPI_Comm comm, bool all, MPI_Request *request,
                   const char *routine) {
    struct args a;
    int err = args_begin(&a, comm, routine);
    if (err != MPI_SUCCESS) return err;
    struct mwmpi_comm *c = a.c;
    if (!all) TRYA(root_ok(&a, root));
    bool receiver = all || c->rank == root;
    struct mwmpi_type *st = NULL, *rt = NULL;
    if (receiver) TRYA(type_of(&a, rtype, &rt));
    bool in_place = sendbuf == MPI_IN_PLACE;
    if (!in_place) {
        TRYA(type_of(&a, stype, &st));
        TRYA(count_ok(&a, scount));
    }
    if (receiver)
        for (int p = 0; p < c->size; p++) {
            TRYA(count_ok(&a, rcounts[p]));
            a.recvs[p] = (struct block){at(recvbuf, displs[p] * rt->extent), rcounts[p], rt};
        }
    if (!in_place) {
        for (int p = 0; p < c->size; p++)
            if (all || p == root) a.sends[p] = (struct block){sendbuf, scount, st};
    } else if (all) {
        /* Each member's block is already in its place in recvbuf. */
        for (int p = 0; p < c->size; p++) a.sends[p] = a.recvs[c->rank];
        a.recvs[c->rank].type = NULL;
    } else if (c->rank == root) {
        a.recvs[root].type = NULL;
    }
    if (all && in_place) a.sends[c->rank].type = NULL;
    return go(&a, request);
}

static int scatterv(const void *sendbuf, const MPI_Count *scounts, const MPI_Aint *displs, MPI_Datatype stype,
                    void *recvbuf, MPI_Count rcount, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *request,
                    const char *routine) {
    struct args a;
    int err = args_begin(&a, comm, routine);
    if (err != MPI_SUCCESS) return err;
    struct mwmpi_comm *c = a.c;
    TRYA(root_ok(&a, root));
    struct mwmpi_type *st = NULL, *rt = NULL;
    bool in_place = recvbuf == MPI_IN_PLACE && c->rank == root;
    if (c->rank == root) {
        TRYA(type_of(&a, stype, &st));
        for (int p = 0; p < c->size; p++) {
            TRYA(count_ok(&a, scounts[p]));
            a.sends[p] = (struct block){at(sendbuf, displs[p] * st->extent), scounts[p], st};
        }
        if (in_place) a.sends[root].type = NULL;
    }
    if (!in_place) {
        TRYA(type_of(&a, rtype, &rt));
        TRYA(count_ok(&a, rcount));
        a.recvs[root] = (struct block){recvbuf, rcount, rt};
    }
    return go(&a, request);
}

/* alltoallw with displacements in bytes; alltoall(v) pass per-member types. */
static int alltoallw(const void *sendbuf, const MPI_Count *scounts, const MPI_Aint *sdispls, const MPI_Datatype *stypes,
                     void *recvbuf, const MPI_Count *rcounts, const MPI_Aint *rdispls, const MPI_Datatype *rtypes,
                     MPI_Comm comm, MPI_Request *request, const char *routine) {
    struct args a;
    int err = args_begin(&a, comm, routine);
    if (err != MPI_SUCCESS) return err;
    struct mwmpi_comm *c = a.c;
    for (int p = 0; p < c->size; p++) {
        struct mwmpi_type *rt;
        TRYA(type_of(&a, rtypes[p], &rt));
        TRYA(count_ok(&a, rcounts[p]));
        a.recvs[p] = (struct block){at(recvbuf, rdispls[p]), rcounts[p], rt};
    }
    if (sendbuf != MPI_IN_PLACE)
        for (int p = 0; p < c->size; p++) {
            struct mwmpi_type *st;
            TRYA(type_of(&a, stypes[p], &st));
            TRYA(count_ok(&a, scounts[p]));
            a.sends[p] = (struct block){at(sendbuf, sdispls[p]), scounts[p], st};
        }
    struct xchg *x = (struct xchg *)mwmpi_nbc_new(c, sizeof *x);
    if (x == NULL) TRYA(mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL));
    if (sendbuf == MPI_IN_PLACE) {
        /* What goes out is what recvbuf holds now: packed aside first. */
        for (int p = 0; p < c->size; p++) {
            if (p == c->rank) continue;
            struct block *r = &a.recvs[p];
            size_t len = (size_t)r->count * r->type->size;
            void *copy = mwmpi_nbc_alloc(&x->base, len);
            if (copy == NULL) {
                mwmpi_nbc_free(&x->base);
                TRYA(mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL));
            }
            mwmpi_pack(r->type, r->count, r->buf, copy);
            a.sends[p] = (struct block){copy, (MPI_Count)len, mwmpi_type_of(MPI_BYTE)};
        }
        a.recvs[c->rank].type = NULL;
    }
    err = xchg_post(x, a.sends, a.recvs);
    args_end(&a);
    if (request == NULL) return mwmpi_nbc_run(&x->base, err, routine);
    return mwmpi_nbc_start(&x->base, err, request, routine);
}

/* ---- array conversions ---------------------------------------------------------- */

/* The forms taking int arrays, or one count for every member, become the
 * general ones: counts as MPI_Count, displacements as MPI_Aint. */
struct conv {
    MPI_Count *sc, *rc;
    MPI_Aint *sd, *rd;
    MPI_Datatype *stypes, *rtypes;
};

static bool conv_new(struct conv *v, int n) {
    v->sc = calloc((size_t)n + 1, sizeof *v->sc);
    v->rc = calloc((size_t)n + 1, sizeof *v->rc);
    v->sd = calloc((size_t)n + 1, sizeof *v->sd);
    v->rd = calloc((size_t)n + 1, sizeof *v->rd);
    v->stypes = calloc((size_t)n + 1, sizeof *v->stypes);
    v->rtypes = calloc((size_t)n + 1, sizeof *v->rtypes);
    return v->sc && v->rc && v->sd && v->rd && v->stypes && v->rtypes;
}

static void conv_free(struct conv *v) {
    free(v->sc);
    free(v->rc);
    free(v->sd);
    free(v->rd);
    free(v->stypes);
    free(v->rtypes);
}

static int comm_size_of(MPI_Comm comm, const char *routine, int *n) {
    MWMPI_REQUIRE_INIT(routine);
    struct mwmpi_comm *c = mwmpi_comm_of(comm);
    if (c == NULL) return mwmpi_raise(NULL, MPI_ERR_COMM, routine, "invalid communicator");
    *n = c->size;
    return MPI_SUCCESS;
}

/* Fills counts/displacements from int arrays (NULL: `one` each, block i at i * one). */
static void fill(MPI_Count *counts, MPI_Aint *displs, int n, const int *ic, const int *id, const MPI_Count *cc,
                 const MPI_Aint *cd, MPI_Count one) {
    for (int i = 0; i < n; i++) {
        counts[i] = ic != NULL ? ic[i] : cc != NULL ? cc[i] : one;
        displs[i] = id != NULL ? id[i] : cd != NULL ? cd[i] : (MPI_Aint)(i * one);
    }
}

#define CONV_BEGIN(routine)                                                        \
    int n_;                                                                        \
    int err_ = comm_size_of(comm, routine, &n_);                                   \
    if (err_ != MPI_SUCCESS) return err_;                                          \
    struct conv v;                                                                 \
    if (!conv_new(&v, n_)) {                                                       \
        conv_free(&v);                                                             \
        return mwmpi_raise(mwmpi_comm_of(comm), MPI_ERR_NO_MEM, routine, NULL);    \
    }

/* ---- gather(v), allgather(v) ------------------------------------------------------ */

static int gatherv_any(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, const int *irc, const int *ird,
                       const MPI_Count *crc, const MPI_Aint *crd, MPI_Count one, MPI_Datatype rt, int root, MPI_Comm comm,
                       bool all, MPI_Request *req, const char *routine) {
    CONV_BEGIN(routine);
    /* Counts matter only where they are read (the root, or everyone for all). */
    struct mwmpi_comm *c = mwmpi_comm_of(comm);
    if (all || c->rank == root) fill(v.rc, v.rd, n_, irc, ird, crc, crd, one);
    err_ = gatherv(sb, sc, st, rb, v.rc, v.rd, rt, root, comm, all, req, routine);
    conv_free(&v);
    return err_;
}

int PMPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, NULL, NULL, 0, recvtype, root, comm,
                       false, NULL, "MPI_Gatherv");
}
int PMPI_Gatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, recvcounts, displs, 0, recvtype, root, comm,
                       false, NULL, "MPI_Gatherv");
}
int PMPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, NULL, NULL, 0, recvtype, root, comm,
                       false, request, "MPI_Igatherv");
}
int PMPI_Igatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                    const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                    MPI_Comm comm, MPI_Request *request) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, recvcounts, displs, 0, recvtype, root, comm,
                       false, request, "MPI_Igatherv");
}
int PMPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, NULL, NULL, recvcount, recvtype, root, comm,
                       false, request, "MPI_Igather");
}
int PMPI_Igather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount,
                   MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, NULL, NULL, recvcount, recvtype, root, comm,
                       false, request, "MPI_Igather");
}
int PMPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, NULL, NULL, 0, recvtype, 0, comm, true,
                       NULL, "MPI_Allgatherv");
}
int PMPI_Allgatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                      const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, recvcounts, displs, 0, recvtype, 0, comm, true,
                       NULL, "MPI_Allgatherv");
}
int PMPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                     const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, NULL, NULL, 0, recvtype, 0, comm, true,
                       request, "MPI_Iallgatherv");
}
int PMPI_Iallgatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                       const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm,
                       MPI_Request *request) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, recvcounts, displs, 0, recvtype, 0, comm, true,
                       request, "MPI_Iallgatherv");
}
int PMPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, NULL, NULL, recvcount, recvtype, 0, comm, true,
                       request, "MPI_Iallgather");
}
int PMPI_Iallgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                      MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    return gatherv_any(sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, NULL, NULL, recvcount, recvtype, 0, comm, true,
                       request, "MPI_Iallgather");
}

/* ---- scatter(v) --------------------------------------------------------------------- */

static int scatterv_any(const void *sb, const int *isc, const int *isd, const MPI_Count *csc, const MPI_Aint *csd,
                        MPI_Count one, MPI_Datatype st, void *rb, MPI_Count rc, MPI_Datatype rt, int root, MPI_Comm comm,
                        MPI_Request *req, const char *routine) {
    CONV_BEGIN(routine);
    struct mwmpi_comm *c = mwmpi_comm_of(comm);
    if (c->rank == root) fill(v.sc, v.sd, n_, isc, isd, csc, csd, one);
    err_ = scatterv(sb, v.sc, v.sd, st, rb, rc, rt, root, comm, req, routine);
    conv_free(&v);
    return err_;
}

int PMPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    return scatterv_any(sendbuf, sendcounts, displs, NULL, NULL, 0, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        NULL, "MPI_Scatterv");
}
int PMPI_Scatterv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype,
                    void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    return scatterv_any(sendbuf, NULL, NULL, sendcounts, displs, 0, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        NULL, "MPI_Scatterv");
}
int PMPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
    return scatterv_any(sendbuf, sendcounts, displs, NULL, NULL, 0, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        request, "MPI_Iscatterv");
}
int PMPI_Iscatterv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype,
                     void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                     MPI_Request *request) {
    return scatterv_any(sendbuf, NULL, NULL, sendcounts, displs, 0, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        request, "MPI_Iscatterv");
}
int PMPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
    return scatterv_any(sendbuf, NULL, NULL, NULL, NULL, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        request, "MPI_Iscatter");
}
int PMPI_Iscatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount,
                    MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
    return scatterv_any(sendbuf, NULL, NULL, NULL, NULL, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        request, "MPI_Iscatter");
}

/* ---- alltoall(v, w) ------------------------------------------------------------------ */

/* Displacements in elements of the type (alltoall, alltoallv) become bytes. */
static int alltoallv_any(const void *sb, const int *isc, const int *isd, const MPI_Count *csc, const MPI_Aint *csd,
                         MPI_Count sone, MPI_Datatype st, void *rb, const int *irc, const int *ird, const MPI_Count *crc,
                         const MPI_Aint *crd, MPI_Count rone, MPI_Datatype rt, MPI_Comm comm, MPI_Request *req,
                         const char *routine) {
    CONV_BEGIN(routine);
    struct mwmpi_type *s = mwmpi_type_of(st), *r = mwmpi_type_of(rt);
    if (r == NULL || (sb != MPI_IN_PLACE && s == NULL)) {
        conv_free(&v);
        return mwmpi_raise(mwmpi_comm_of(comm), MPI_ERR_TYPE, routine, "invalid datatype");
    }
    if (sb != MPI_IN_PLACE) fill(v.sc, v.sd, n_, isc, isd, csc, csd, sone);
    fill(v.rc, v.rd, n_, irc, ird, crc, crd, rone);
    for (int i = 0; i < n_; i++) {
        if (sb != MPI_IN_PLACE) v.sd[i] *= s->extent;
        v.rd[i] *= r->extent;
        v.stypes[i] = st;
        v.rtypes[i] = rt;
    }
    err_ = alltoallw(sb, v.sc, v.sd, v.stypes, rb, v.rc, v.rd, v.rtypes, comm, req, routine);
    conv_free(&v);
    return err_;
}

int PMPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
    return alltoallv_any(sendbuf, sendcounts, sdispls, NULL, NULL, 0, sendtype, recvbuf, recvcounts, rdispls, NULL, NULL,
                         0, recvtype, comm, NULL, "MPI_Alltoallv");
}
int PMPI_Alltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype,
                     void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype,
                     MPI_Comm comm) {
    return alltoallv_any(sendbuf, NULL, NULL, sendcounts, sdispls, 0, sendtype, recvbuf, NULL, NULL, recvcounts, rdispls,
                         0, recvtype, comm, NULL, "MPI_Alltoallv");
}
int PMPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                    void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request *request) {
    return alltoallv_any(sendbuf, sendcounts, sdispls, NULL, NULL, 0, sendtype, recvbuf, recvcounts, rdispls, NULL, NULL,
                         0, recvtype, comm, request, "MPI_Ialltoallv");
}
int PMPI_Ialltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype,
                      void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype,
                      MPI_Comm comm, MPI_Request *request) {
    return alltoallv_any(sendbuf, NULL, NULL, sendcounts, sdispls, 0, sendtype, recvbuf, NULL, NULL, recvcounts, rdispls,
                         0, recvtype, comm, request, "MPI_Ialltoallv");
}
int PMPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    return alltoallv_any(sendbuf, NULL, NULL, NULL, NULL, sendcount, sendtype, recvbuf, NULL, NULL, NULL, NULL, recvcount,
                         recvtype, comm, request, "MPI_Ialltoall");
}
int PMPI_Ialltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                     MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    return alltoallv_any(sendbuf, NULL, NULL, NULL, NULL, sendcount, sendtype, recvbuf, NULL, NULL, NULL, NULL, recvcount,
                         recvtype, comm, request, "MPI_Ialltoall");
}

static int alltoallw_int(const void *sb, const int *sc, const int *sd, const MPI_Datatype *st, void *rb, const int *rc,
                         const int *rd, const MPI_Datatype *rt, MPI_Comm comm, MPI_Request *req, const char *routine) {
    CONV_BEGIN(routine);
    if (sb != MPI_IN_PLACE) fill(v.sc, v.sd, n_, sc, sd, NULL, NULL, 0);
    fill(v.rc, v.rd, n_, rc, rd, NULL, NULL, 0);
    err_ = alltoallw(sb, v.sc, v.sd, st, rb, v.rc, v.rd, rt, comm, req, routine);
    conv_free(&v);
    return err_;
}

int PMPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                   void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                   MPI_Comm comm) {
    return alltoallw_int(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, NULL,
                         "MPI_Alltoallw");
}
int PMPI_Alltoallw_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                     const MPI_Datatype sendtypes[], void *recvbuf, const MPI_Count recvcounts[],
                     const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
    return alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, NULL,
                     "MPI_Alltoallw");
}
int PMPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                    void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                    MPI_Comm comm, MPI_Request *request) {
    return alltoallw_int(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request,
                         "MPI_Ialltoallw");
}
int PMPI_Ialltoallw_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                      const MPI_Datatype sendtypes[], void *recvbuf, const MPI_Count recvcounts[],
                      const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request *request) {
    return alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request,
                     "MPI_Ialltoallw");
}

/* ---- barrier, bcast ------------------------------------------------------------------- */

int PMPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
    struct args a;
    int err = args_begin(&a, comm, "MPI_Ibarrier");
    if (err != MPI_SUCCESS) return err;
    if (request == NULL) TRYA(mwmpi_raise(a.c, MPI_ERR_ARG, "MPI_Ibarrier", "NULL request"));
    /* An empty message to and from every other member. */
    struct mwmpi_type *byte = mwmpi_type_of(MPI_BYTE);
    for (int p = 0; p < a.c->size; p++)
        if (p != a.c->rank) a.sends[p] = a.recvs[p] = (struct block){NULL, 0, byte};
    return go(&a, request);
}

int PMPI_Ibcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request) {
    struct args a;
    int err = args_begin(&a, comm, "MPI_Ibcast");
    if (err != MPI_SUCCESS) return err;
    struct mwmpi_type *t;
    TRYA(root_ok(&a, root));
    TRYA(type_of(&a, datatype, &t));
    TRYA(count_ok(&a, count));
    if (a.c->rank == root) {
        for (int p = 0; p < a.c->size; p++)
            if (p != root) a.sends[p] = (struct block){buffer, count, t};
    } else {
        a.recvs[root] = (struct block){buffer, count, t};
    }
    return go(&a, request);
}

int PMPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request) {
    return PMPI_Ibcast_c(buffer, count, datatype, root, comm, request);
}
