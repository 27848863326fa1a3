/*
 * p2p.c: point-to-point communication (MPI-5.0 chapter 3): send, ssend,
 * recv, isend, issend, irecv, sendrecv, sendrecv_replace, probe, iprobe,
 * persistent send_init / ssend_init / recv_init, the status fields.
 *
 * Each message is a memwire tagged message in its communicator's context,
 * to and from world ranks; memwire keeps MPI's order between a pair of
 * processes within a context. Contiguous data goes straight from and into
 * the user's buffer; other layouts are packed into a staging buffer.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* MPI_internal of a status: [0] and [1] the byte count, [2] cancelled. */
void mwmpi_status_set_count(MPI_Status *status, MPI_Count bytes) {
    status->MPI_internal[0] = (int)(uint32_t)((uint64_t)bytes & 0xffffffffu);
    status->MPI_internal[1] = (int)(uint32_t)((uint64_t)bytes >> 32);
    status->MPI_internal[2] = 0;
}

MPI_Count mwmpi_status_count(const MPI_Status *status) {
    return (MPI_Count)((uint64_t)(uint32_t)status->MPI_internal[0] | (uint64_t)(uint32_t)status->MPI_internal[1] << 32);
}

void mwmpi_status_empty(MPI_Status *status) {
    if (status == MPI_STATUS_IGNORE) return;
    status->MPI_SOURCE = MPI_ANY_SOURCE;
    status->MPI_TAG = MPI_ANY_TAG;
    status->MPI_ERROR = MPI_SUCCESS;
    mwmpi_status_set_count(status, 0);
}

void mwmpi_status_set(MPI_Status *status, const struct mwmpi_comm *comm, const mw_recv_status *env, int error) {
    if (status == MPI_STATUS_IGNORE) return;
    status->MPI_SOURCE = comm->from_world[env->source];
    status->MPI_TAG = (int)env->tag;
    status->MPI_ERROR = error;
    mwmpi_status_set_count(status, (MPI_Count)env->len);
}

/* A receive from MPI_PROC_NULL: source PROC_NULL, tag ANY_TAG, count 0. */
static void status_proc_null(MPI_Status *status) {
    mwmpi_status_empty(status);
    if (status != MPI_STATUS_IGNORE) {
        status->MPI_SOURCE = MPI_PROC_NULL;
        status->MPI_TAG = MPI_ANY_TAG;
    }
}

void mwmpi_poll(unsigned *spins) {
    mw_progress(mwmpi.ep);
    if (++*spins > 64) sched_yield();
}

/* ---- argument checks ------------------------------------------------------ */

struct xfer {
    struct mwmpi_comm *comm;
    struct mwmpi_type *type;
    /* The bytes memwire moves: the user's buffer when contiguous, else
     * `staging` (allocated here, freed by the caller). */
    void *data;
    size_t len;
    void *staging;
};

static int check_common(const char *routine, MPI_Comm comm, MPI_Datatype datatype, MPI_Count count, struct xfer *x) {
    MWMPI_REQUIRE_INIT(routine);
    struct mwmpi_comm *c = mwmpi_comm_of(comm);
    if (c == NULL) return mwmpi_raise(NULL, MPI_ERR_COMM, routine, "invalid communicator");
    x->comm = c;
    int err = mwmpi_type_check(c, datatype, routine, &x->type);
    if (err != MPI_SUCCESS) return err;
    if (count < 0) return mwmpi_raise(c, MPI_ERR_COUNT, routine, "negative count %lld", (long long)count);
    x->len = (size_t)count * x->type->size;
    x->staging = NULL;
    return MPI_SUCCESS;
}

/* Prepares the bytes of a send: the buffer itself, or a packed copy. */
static int send_data(const char *routine, const void *buf, MPI_Count count, struct xfer *x) {
    if (mwmpi_type_contiguous(x->type, count)) {
        x->data = x->len > 0 ? (char *)buf + x->type->true_lb : NULL;
        return MPI_SUCCESS;
    }
    x->staging = malloc(x->len);
    if (x->staging == NULL) return mwmpi_raise(x->comm, MPI_ERR_NO_MEM, routine, "staging %zu bytes", x->len);
    mwmpi_pack(x->type, count, buf, x->staging);
    x->data = x->staging;
    return MPI_SUCCESS;
}

/* Where a receive lands: the buffer itself, or a staging area to unpack. */
static int recv_data(const char *routine, void *buf, MPI_Count count, struct xfer *x) {
    if (mwmpi_type_contiguous(x->type, count)) {
        x->data = x->len > 0 ? (char *)buf + x->type->true_lb : NULL;
        return MPI_SUCCESS;
    }
    x->staging = malloc(x->len);
    if (x->staging == NULL) return mwmpi_raise(x->comm, MPI_ERR_NO_MEM, routine, "staging %zu bytes", x->len);
    x->data = x->staging;
    return MPI_SUCCESS;
}

static int check_dest(const char *routine, struct mwmpi_comm *c, int dest, int tag) {
    if (dest != MPI_PROC_NULL && (dest < 0 || dest >= c->size))
        return mwmpi_raise(c, MPI_ERR_RANK, routine, "destination %d is not in 0..%d", dest, c->size - 1);
    if (tag < 0) return mwmpi_raise(c, MPI_ERR_TAG, routine, "tag %d is negative", tag);
    return MPI_SUCCESS;
}

static int check_source(const char *routine, struct mwmpi_comm *c, int source, int tag) {
    if (source != MPI_PROC_NULL && source != MPI_ANY_SOURCE && (source < 0 || source >= c->size))
        return mwmpi_raise(c, MPI_ERR_RANK, routine, "source %d is not in 0..%d", source, c->size - 1);
    if (tag < 0 && tag != MPI_ANY_TAG) return mwmpi_raise(c, MPI_ERR_TAG, routine, "tag %d is invalid", tag);
    return MPI_SUCCESS;
}

static uint32_t mw_source(const struct mwmpi_comm *c, int source) {
    return source == MPI_ANY_SOURCE ? (uint32_t)MW_ANY_SOURCE : (uint32_t)c->world[source];
}

/* ---- blocking ------------------------------------------------------------- */

/* Send modes: MPI's standard send, and the synchronous one, which
 * completes only once the receive has matched. */
enum { MODE_STANDARD = 0, MODE_SYNC = 1 };

static int send_blocking(const char *routine, const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                         MPI_Comm comm, int mode) {
    struct xfer x;
    int err = check_common(routine, comm, datatype, count, &x);
    if (err != MPI_SUCCESS) return err;
    if ((err = check_dest(routine, x.comm, dest, tag)) != MPI_SUCCESS) return err;
    if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
    if ((err = send_data(routine, buf, count, &x)) != MPI_SUCCESS) return err;
    mw_status st = mode == MODE_SYNC
                       ? mw_ssend_in(mwmpi.ep, x.comm->ctx, (uint32_t)x.comm->world[dest], (uint64_t)tag, x.data, x.len)
                       : mw_send_in(mwmpi.ep, x.comm->ctx, (uint32_t)x.comm->world[dest], (uint64_t)tag, x.data, x.len);
    free(x.staging);
    return st == MW_OK ? MPI_SUCCESS : mwmpi_raise_mw(x.comm, st, routine);
}

int PMPI_Send_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    return send_blocking("MPI_Send", buf, count, datatype, dest, tag, comm, MODE_STANDARD);
}

int PMPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    return send_blocking("MPI_Send", buf, count, datatype, dest, tag, comm, MODE_STANDARD);
}

int PMPI_Ssend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    return send_blocking("MPI_Ssend", buf, count, datatype, dest, tag, comm, MODE_SYNC);
}

int PMPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    return send_blocking("MPI_Ssend", buf, count, datatype, dest, tag, comm, MODE_SYNC);
}

/* MPI_Rsend may be a standard send (MPI-5.0 3.4: the matching receive is
 * already posted, so standard semantics are the same). */
int PMPI_Rsend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    return send_blocking("MPI_Rsend", buf, count, datatype, dest, tag, comm, MODE_STANDARD);
}

int PMPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    return send_blocking("MPI_Rsend", buf, count, datatype, dest, tag, comm, MODE_STANDARD);
}

static int recv_blocking(const char *routine, void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                         MPI_Comm comm, MPI_Status *status) {
    struct xfer x;
    int err = check_common(routine, comm, datatype, count, &x);
    if (err != MPI_SUCCESS) return err;
    if ((err = check_source(routine, x.comm, source, tag)) != MPI_SUCCESS) return err;
    if (source == MPI_PROC_NULL) {
        status_proc_null(status);
        return MPI_SUCCESS;
    }
    if ((err = recv_data(routine, buf, count, &x)) != MPI_SUCCESS) return err;
    mw_recv_status env;
    mw_status st = mw_recv_in(mwmpi.ep, x.comm->ctx, mw_source(x.comm, source), mwmpi_tag(tag), x.data, x.len, &env);
    if (st == MW_OK && x.staging != NULL) mwmpi_unpack(x.type, count, x.staging, env.len, buf);
    free(x.staging);
    if (st != MW_OK) {
        if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = mwmpi_class_of(st);
        return mwmpi_raise_mw(x.comm, st, routine);
    }
    mwmpi_status_set(status, x.comm, &env, MPI_SUCCESS);
    return MPI_SUCCESS;
}

int PMPI_Recv_c(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                MPI_Status *status) {
    return recv_blocking("MPI_Recv", buf, count, datatype, source, tag, comm, status);
}

int PMPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status) {
    return recv_blocking("MPI_Recv", buf, count, datatype, source, tag, comm, status);
}

/* ---- nonblocking ------------------------------------------------------------ */

static int isend_common(const char *routine, const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                        MPI_Comm comm, int mode, MPI_Request *request) {
    struct xfer x;
    int err = check_common(routine, comm, datatype, count, &x);
    if (err != MPI_SUCCESS) return err;
    if (request == NULL) return mwmpi_raise(x.comm, MPI_ERR_ARG, routine, "NULL request");
    if ((err = check_dest(routine, x.comm, dest, tag)) != MPI_SUCCESS) return err;
    struct mwmpi_req *r = mwmpi_req_new(REQ_SEND, x.comm);
    if (r == NULL) return mwmpi_raise(x.comm, MPI_ERR_NO_MEM, routine, NULL);
    if (dest != MPI_PROC_NULL) {
        if ((err = send_data(routine, buf, count, &x)) != MPI_SUCCESS) {
            mwmpi_req_free(r);
            return err;
        }
        uint32_t to = (uint32_t)x.comm->world[dest];
        mw_status st = mode == MODE_SYNC ? mw_issend_in(mwmpi.ep, x.comm->ctx, to, (uint64_t)tag, x.data, x.len, &r->mw)
                                         : mw_isend_in(mwmpi.ep, x.comm->ctx, to, (uint64_t)tag, x.data, x.len, &r->mw);
        if (st != MW_OK) {
            free(x.staging);
            mwmpi_req_free(r);
            return mwmpi_raise_mw(x.comm, st, routine);
        }
        r->staging = x.staging;
    } else {
        r->complete = true;
    }
    mwmpi_status_empty(&r->status);
    *request = (MPI_Request)r;
    return MPI_SUCCESS;
}

int PMPI_Isend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                 MPI_Request *request) {
    return isend_common("MPI_Isend", buf, count, datatype, dest, tag, comm, MODE_STANDARD, request);
}

int PMPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request *request) {
    return isend_common("MPI_Isend", buf, count, datatype, dest, tag, comm, MODE_STANDARD, request);
}

int PMPI_Irsend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  MPI_Request *request) {
    return isend_common("MPI_Irsend", buf, count, datatype, dest, tag, comm, MODE_STANDARD, request);
}

int PMPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request *request) {
    return isend_common("MPI_Irsend", buf, count, datatype, dest, tag, comm, MODE_STANDARD, request);
}

int PMPI_Issend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  MPI_Request *request) {
    return isend_common("MPI_Issend", buf, count, datatype, dest, tag, comm, MODE_SYNC, request);
}

int PMPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request *request) {
    return isend_common("MPI_Issend", buf, count, datatype, dest, tag, comm, MODE_SYNC, request);
}

static int irecv_common(const char *routine, void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                        MPI_Comm comm, MPI_Request *request) {
    struct xfer x;
    int err = check_common(routine, comm, datatype, count, &x);
    if (err != MPI_SUCCESS) return err;
    if (request == NULL) return mwmpi_raise(x.comm, MPI_ERR_ARG, routine, "NULL request");
    if ((err = check_source(routine, x.comm, source, tag)) != MPI_SUCCESS) return err;
    struct mwmpi_req *r = mwmpi_req_new(REQ_RECV, x.comm);
    if (r == NULL) return mwmpi_raise(x.comm, MPI_ERR_NO_MEM, routine, NULL);
    if (source != MPI_PROC_NULL) {
        if ((err = recv_data(routine, buf, count, &x)) != MPI_SUCCESS) {
            mwmpi_req_free(r);
            return err;
        }
        mw_status st = mw_irecv_in(mwmpi.ep, x.comm->ctx, mw_source(x.comm, source), mwmpi_tag(tag), x.data, x.len, &r->mw);
        if (st != MW_OK) {
            free(x.staging);
            mwmpi_req_free(r);
            return mwmpi_raise_mw(x.comm, st, routine);
        }
        r->staging = x.staging;
        r->buf = buf;
        r->count = count;
        r->type = x.type;
        x.type->refs++;
    } else {
        status_proc_null(&r->status);
        r->complete = true;
    }
    *request = (MPI_Request)r;
    return MPI_SUCCESS;
}

int PMPI_Irecv_c(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                 MPI_Request *request) {
    return irecv_common("MPI_Irecv", buf, count, datatype, source, tag, comm, request);
}

int PMPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request) {
    return irecv_common("MPI_Irecv", buf, count, datatype, source, tag, comm, request);
}

/* ---- send-receive ---------------------------------------------------------- */

static int sendrecv(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                    void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                    MPI_Status *status) {
    static const char routine[] = "MPI_Sendrecv";
    /* The receive is posted first, so a send to oneself (or a ring of
     * large messages) cannot wait for a receive that is not there yet. */
    MPI_Request req;
    int err = irecv_common(routine, recvbuf, recvcount, recvtype, source, recvtag, comm, &req);
    if (err != MPI_SUCCESS) return err;
    err = send_blocking(routine, sendbuf, sendcount, sendtype, dest, sendtag, comm, MODE_STANDARD);
    int werr = PMPI_Wait(&req, status);
    return err != MPI_SUCCESS ? err : werr;
}

int PMPI_Sendrecv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                    void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                    MPI_Status *status) {
    return sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm,
                    status);
}

int PMPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
    return sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm,
                    status);
}

int PMPI_Sendrecv_replace_c(void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int sendtag, int source,
                            int recvtag, MPI_Comm comm, MPI_Status *status) {
    static const char routine[] = "MPI_Sendrecv_replace";
    struct xfer x;
    int err = check_common(routine, comm, datatype, count, &x);
    if (err != MPI_SUCCESS) return err;
    /* The outgoing data is packed aside, then the receive lands in buf. */
    void *copy = malloc(x.len + 1);
    if (copy == NULL) return mwmpi_raise(x.comm, MPI_ERR_NO_MEM, routine, NULL);
    mwmpi_pack(x.type, count, buf, copy);
    err = sendrecv(copy, (MPI_Count)x.len, MPI_BYTE, dest, sendtag, buf, count, datatype, source, recvtag, comm, status);
    free(copy);
    return err;
}

int PMPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag,
                          MPI_Comm comm, MPI_Status *status) {
    return PMPI_Sendrecv_replace_c(buf, count, datatype, dest, sendtag, source, recvtag, comm, status);
}

/* ---- probe ------------------------------------------------------------------ */

int PMPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    static const char routine[] = "MPI_Iprobe";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    if (flag == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL flag");
    int err = check_source(routine, c, source, tag);
    if (err != MPI_SUCCESS) return err;
    if (source == MPI_PROC_NULL) {
        *flag = 1;
        status_proc_null(status);
        return MPI_SUCCESS;
    }
    bool found = false;
    mw_recv_status env;
    mw_status st = mw_iprobe_in(mwmpi.ep, c->ctx, mw_source(c, source), mwmpi_tag(tag), &found, &env);
    if (st != MW_OK) return mwmpi_raise_mw(c, st, routine);
    *flag = found;
    if (found) mwmpi_status_set(status, c, &env, MPI_SUCCESS);
    return MPI_SUCCESS;
}

int PMPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
    static const char routine[] = "MPI_Probe";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    int err = check_source(routine, c, source, tag);
    if (err != MPI_SUCCESS) return err;
    if (source == MPI_PROC_NULL) {
        status_proc_null(status);
        return MPI_SUCCESS;
    }
    mw_recv_status env;
    mw_status st;
    /* memwire bounds one probe; MPI's waits as long as it takes. */
    do st = mw_probe_timeout(mwmpi.ep, c->ctx, mw_source(c, source), mwmpi_tag(tag), &env, 10000);
    while (st == MW_ERR_TIMEOUT);
    if (st != MW_OK) return mwmpi_raise_mw(c, st, routine);
    mwmpi_status_set(status, c, &env, MPI_SUCCESS);
    return MPI_SUCCESS;
}

/* ---- status accessors ------------------------------------------------------- */

int PMPI_Status_get_source(const MPI_Status *status, int *source) {
    if (status == NULL || source == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_get_source", "NULL argument");
    *source = status->MPI_SOURCE;
    return MPI_SUCCESS;
}

int PMPI_Status_get_tag(const MPI_Status *status, int *tag) {
    if (status == NULL || tag == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_get_tag", "NULL argument");
    *tag = status->MPI_TAG;
    return MPI_SUCCESS;
}

int PMPI_Status_get_error(const MPI_Status *status, int *error) {
    if (status == NULL || error == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_get_error", "NULL argument");
    *error = status->MPI_ERROR;
    return MPI_SUCCESS;
}

int PMPI_Status_set_source(MPI_Status *status, int source) {
    if (status == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_set_source", "NULL argument");
    status->MPI_SOURCE = source;
    return MPI_SUCCESS;
}

int PMPI_Status_set_tag(MPI_Status *status, int tag) {
    if (status == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_set_tag", "NULL argument");
    status->MPI_TAG = tag;
    return MPI_SUCCESS;
}

int PMPI_Status_set_error(MPI_Status *status, int error) {
    if (status == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_set_error", "NULL argument");
    status->MPI_ERROR = error;
    return MPI_SUCCESS;
}

int PMPI_Status_set_cancelled(MPI_Status *status, int flag) {
    if (status == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_set_cancelled", "NULL argument");
    status->MPI_internal[2] = flag != 0;
    return MPI_SUCCESS;
}

int PMPI_Test_cancelled(const MPI_Status *status, int *flag) {
    if (status == NULL || flag == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Test_cancelled", "NULL argument");
    *flag = status->MPI_internal[2] != 0;
    return MPI_SUCCESS;
}

int PMPI_Status_set_elements_c(MPI_Status *status, MPI_Datatype datatype, MPI_Count count) {
    struct mwmpi_type *t = mwmpi_type_of(datatype);
    if (t == NULL) return mwmpi_raise(NULL, MPI_ERR_TYPE, "MPI_Status_set_elements", "invalid datatype");
    if (status == NULL || count < 0) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_set_elements", "bad arguments");
    int cancelled = status->MPI_internal[2];
    size_t basic = t->kind_count > 0 ? t->size / t->kind_count : t->size;
    mwmpi_status_set_count(status, count * (MPI_Count)basic);
    status->MPI_internal[2] = cancelled;
    return MPI_SUCCESS;
}

int PMPI_Status_set_elements(MPI_Status *status, MPI_Datatype datatype, int count) {
    return PMPI_Status_set_elements_c(status, datatype, count);
}

int PMPI_Status_set_elements_x(MPI_Status *status, MPI_Datatype datatype, MPI_Count count) {
    return PMPI_Status_set_elements_c(status, datatype, count);
}
