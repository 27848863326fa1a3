/*
 * p2p_more.c: matched probes and buffered sends (MPI-5.0 3.8.2, 3.6).
 *
 * Mprobe / Improbe find a message as Probe / Iprobe do, then receive it at
 * once with a receive for exactly its source and tag (the first such
 * message is the probed one: memwire keeps each sender's order, and an
 * earlier one would have matched the probe), into a buffer the message
 * handle owns; no later receive can match it. Mrecv / Imrecv copy it out
 * (unpacking a non-contiguous layout).
 *
 * Buffered sends copy the data and send the copy; the attached buffer's
 * size bounds how much may be outstanding (MPI_ERR_BUFFER past it), as
 * MPI requires, and Buffer_detach waits until it has all gone.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct mwmpi_msg {
    struct mwmpi_obj obj;
    struct mwmpi_comm *comm;
    mw_recv_status env;
    void *data;
};

static struct mwmpi_msg *msg_of(MPI_Message h) {
    if ((uintptr_t)h < MWMPI_PREDEFINED_LIMIT) return NULL;
    struct mwmpi_msg *m = (struct mwmpi_msg *)h;
    return m->obj.magic == MWMPI_MAGIC_MSG ? m : NULL;
}

static void status_no_proc(MPI_Status *status) {
    mwmpi_status_empty(status);
    if (status != MPI_STATUS_IGNORE) {
        status->MPI_SOURCE = MPI_PROC_NULL;
        status->MPI_TAG = MPI_ANY_TAG;
    }
}

/* Receives the probed message (env) into a new message object. */
static int take(struct mwmpi_comm *c, const mw_recv_status *env, MPI_Message *message, MPI_Status *status,
                const char *routine) {
    struct mwmpi_msg *m = calloc(1, sizeof *m);
    if (m == NULL) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    m->data = malloc(env->len + 1);
    if (m->data == NULL) {
        free(m);
        return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    }
    mw_status st = mw_recv_in(mwmpi.ep, c->ctx, env->source, env->tag, m->data, env->len, &m->env);
    if (st != MW_OK) {
        free(m->data);
        free(m);
        return mwmpi_raise_mw(c, st, routine);
    }
    m->comm = c;
    mwmpi_obj_register(&m->obj, MWMPI_MAGIC_MSG);
    mwmpi_status_set(status, c, &m->env, MPI_SUCCESS);
    *message = (MPI_Message)m;
    return MPI_SUCCESS;
}

static int probe_args(struct mwmpi_comm *c, int source, int tag, MPI_Message *message, const char *routine) {
    if (message == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL message");
    if (source != MPI_PROC_NULL && source != MPI_ANY_SOURCE && (source < 0 || source >= c->size))
        return mwmpi_raise(c, MPI_ERR_RANK, routine, "source %d is not in 0..%d", source, c->size - 1);
    if (tag < 0 && tag != MPI_ANY_TAG) return mwmpi_raise(c, MPI_ERR_TAG, routine, "tag %d is invalid", tag);
    return MPI_SUCCESS;
}

static uint32_t mw_source(const struct mwmpi_comm *c, int source) {
    return source == MPI_ANY_SOURCE ? (uint32_t)MW_ANY_SOURCE : (uint32_t)c->world[source];
}

int PMPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status) {
    static const char routine[] = "MPI_Mprobe";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    int err = probe_args(c, source, tag, message, routine);
    if (err != MPI_SUCCESS) return err;
    if (source == MPI_PROC_NULL) {
        *message = MPI_MESSAGE_NO_PROC;
        status_no_proc(status);
        return MPI_SUCCESS;
    }
    mw_recv_status env;
    mw_status st;
    do st = mw_probe_timeout(mwmpi.ep, c->ctx, mw_source(c, source), mwmpi_tag(tag), &env, 10000);
    while (st == MW_ERR_TIMEOUT);
    if (st != MW_OK) return mwmpi_raise_mw(c, st, routine);
    return take(c, &env, message, status, routine);
}

int PMPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status) {
    static const char routine[] = "MPI_Improbe";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    if (flag == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL flag");
    int err = probe_args(c, source, tag, message, routine);
    if (err != MPI_SUCCESS) return err;
    if (source == MPI_PROC_NULL) {
        *flag = 1;
        *message = MPI_MESSAGE_NO_PROC;
        status_no_proc(status);
        return MPI_SUCCESS;
    }
    bool found = false;
    mw_recv_status env;
    mw_status st = mw_iprobe_in(mwmpi.ep, c->ctx, mw_source(c, source), mwmpi_tag(tag), &found, &env);
    if (st != MW_OK) return mwmpi_raise_mw(c, st, routine);
    *flag = found;
    if (!found) return MPI_SUCCESS;
    return take(c, &env, message, status, routine);
}

/* Copies the message out and frees it; the receive's error class. */
static int deliver(struct mwmpi_msg *m, void *buf, MPI_Count count, struct mwmpi_type *t, MPI_Status *status) {
    size_t room = (size_t)count * t->size, len = m->env.len;
    int err = MPI_SUCCESS;
    if (len > room) {
        err = MPI_ERR_TRUNCATE;
        len = room;
    }
    mwmpi_unpack(t, count, m->data, len, buf);
    mw_recv_status env = m->env;
    env.len = len;
    mwmpi_status_set(status, m->comm, &env, err);
    free(m->data);
    mwmpi_obj_unregister(&m->obj);
    free(m);
    return err;
}

static int mrecv(void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status,
                 MPI_Request *request, const char *routine) {
    MWMPI_REQUIRE_INIT(routine);
    if (message == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL message");
    MPI_Status local;
    MPI_Status *st = request != NULL ? &local : status;
    if (*message == MPI_MESSAGE_NO_PROC) {
        status_no_proc(st);
        *message = MPI_MESSAGE_NULL;
    } else {
        struct mwmpi_msg *m = msg_of(*message);
        if (m == NULL) return mwmpi_raise(NULL, MPI_ERR_REQUEST, routine, "invalid message");
        struct mwmpi_type *t;
        int err = mwmpi_type_check(m->comm, datatype, routine, &t);
        if (err != MPI_SUCCESS) return err;
        if (count < 0) return mwmpi_raise(m->comm, MPI_ERR_COUNT, routine, "negative count");
        struct mwmpi_comm *c = m->comm;
        *message = MPI_MESSAGE_NULL;
        err = deliver(m, buf, count, t, st);
        if (err != MPI_SUCCESS && request == NULL) return mwmpi_raise(c, err, routine, "message truncated");
        if (request != NULL) local.MPI_ERROR = err;
    }
    if (request == NULL) return MPI_SUCCESS;
    /* The data is already here: the request is complete at once. */
    struct mwmpi_req *r = mwmpi_req_new(REQ_DONE, &mwmpi_comm_self);
    if (r == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    r->status = local;
    r->error = local.MPI_ERROR;
    r->complete = true;
    *request = (MPI_Request)r;
    return MPI_SUCCESS;
}

int PMPI_Mrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status) {
    return mrecv(buf, count, datatype, message, status, NULL, "MPI_Mrecv");
}
int PMPI_Mrecv_c(void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status) {
    return mrecv(buf, count, datatype, message, status, NULL, "MPI_Mrecv");
}
int PMPI_Imrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Request *request) {
    if (request == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Imrecv", "NULL request");
    return mrecv(buf, count, datatype, message, MPI_STATUS_IGNORE, request, "MPI_Imrecv");
}
int PMPI_Imrecv_c(void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Message *message, MPI_Request *request) {
    if (request == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Imrecv", "NULL request");
    return mrecv(buf, count, datatype, message, MPI_STATUS_IGNORE, request, "MPI_Imrecv");
}

/* ---- buffered sends ---------------------------------------------------------- */

static void *attached;
static size_t attached_size, attached_used;
static bool automatic; /* MPI_BUFFER_AUTOMATIC: no bound */

void mwmpi_bsend_release(size_t bytes) { attached_used -= bytes; }

static int attach(void *buffer, MPI_Count size, const char *routine) {
    MWMPI_REQUIRE_INIT(routine);
    if (attached != NULL || automatic) return mwmpi_raise(NULL, MPI_ERR_BUFFER, routine, "a buffer is already attached");
    if (buffer == MPI_BUFFER_AUTOMATIC) {
        automatic = true;
        return MPI_SUCCESS;
    }
    if (size < 0 || (buffer == NULL && size > 0)) return mwmpi_raise(NULL, MPI_ERR_BUFFER, routine, "bad buffer");
    attached = buffer != NULL ? buffer : (void *)&attached;
    attached_size = (size_t)size;
    return MPI_SUCCESS;
}

int PMPI_Buffer_attach(void *buffer, int size) { return attach(buffer, size, "MPI_Buffer_attach"); }
int PMPI_Buffer_attach_c(void *buffer, MPI_Count size) { return attach(buffer, size, "MPI_Buffer_attach"); }

/* Until every buffered send has left. */
static void drain(void) {
    unsigned spins = 0;
    while (attached_used > 0) {
        mwmpi_requests_sweep();
        if (attached_used > 0) mwmpi_poll(&spins);
    }
}

static int detach(void *buffer_addr, MPI_Count *size, const char *routine) {
    MWMPI_REQUIRE_INIT(routine);
    if (buffer_addr == NULL || size == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    if (attached == NULL && !automatic) return mwmpi_raise(NULL, MPI_ERR_BUFFER, routine, "no buffer attached");
    drain();
    if (automatic) {
        *(void **)buffer_addr = MPI_BUFFER_AUTOMATIC;
        *size = 0;
    } else {
        *(void **)buffer_addr = attached == (void *)&attached ? NULL : attached;
        *size = (MPI_Count)attached_size;
    }
    attached = NULL;
    automatic = false;
    attached_size = 0;
    return MPI_SUCCESS;
}

int PMPI_Buffer_detach(void *buffer_addr, int *size) {
    MPI_Count n = 0;
    int err = detach(buffer_addr, &n, "MPI_Buffer_detach");
    if (err == MPI_SUCCESS && size != NULL) *size = (int)n;
    return err;
}
int PMPI_Buffer_detach_c(void *buffer_addr, MPI_Count *size) { return detach(buffer_addr, size, "MPI_Buffer_detach"); }

int PMPI_Buffer_flush(void) {
    MWMPI_REQUIRE_INIT("MPI_Buffer_flush");
    drain();
    return MPI_SUCCESS;
}

int PMPI_Buffer_iflush(MPI_Request *request) {
    static const char routine[] = "MPI_Buffer_iflush";
    MWMPI_REQUIRE_INIT(routine);
    if (request == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL request");
    /* Flushed at the call; the request is complete. */
    drain();
    struct mwmpi_req *r = mwmpi_req_new(REQ_DONE, &mwmpi_comm_self);
    if (r == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    r->complete = true;
    *request = (MPI_Request)r;
    return MPI_SUCCESS;
}

/* Starts a buffered send: a copy sent in the background. */
static int bsend(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                 MPI_Request *request, const char *routine) {
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    struct mwmpi_type *t;
    int err = mwmpi_type_check(c, datatype, routine, &t);
    if (err != MPI_SUCCESS) return err;
    if (count < 0) return mwmpi_raise(c, MPI_ERR_COUNT, routine, "negative count");
    if (dest != MPI_PROC_NULL && (dest < 0 || dest >= c->size))
        return mwmpi_raise(c, MPI_ERR_RANK, routine, "destination %d is not in 0..%d", dest, c->size - 1);
    if (tag < 0) return mwmpi_raise(c, MPI_ERR_TAG, routine, "tag %d is negative", tag);
    struct mwmpi_req *done = NULL;
    if (request != NULL) {
        /* Ibsend's request completes once the data is buffered: now. */
        done = mwmpi_req_new(REQ_DONE, c);
        if (done == NULL) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
        done->complete = true;
    }
    if (dest != MPI_PROC_NULL) {
        size_t len = (size_t)count * t->size, charge = len + MPI_BSEND_OVERHEAD;
        mwmpi_requests_sweep();
        if (!automatic && (attached == NULL || attached_used + charge > attached_size)) {
            if (done != NULL) mwmpi_req_free(done);
            return mwmpi_raise(c, MPI_ERR_BUFFER, routine, "%zu bytes do not fit in the attached buffer (%zu of %zu used)",
                               charge, attached_used, attached_size);
        }
        struct mwmpi_req *r = mwmpi_req_new(REQ_SEND, c);
        void *copy = malloc(len + 1);
        if (r == NULL || copy == NULL) {
            free(copy);
            if (r != NULL) mwmpi_req_free(r);
            if (done != NULL) mwmpi_req_free(done);
            return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
        }
        mwmpi_pack(t, count, buf, copy);
        mw_status st = mw_isend_in(mwmpi.ep, c->ctx, (uint32_t)c->world[dest], (uint64_t)tag, copy, len, &r->mw);
        if (st != MW_OK) {
            free(copy);
            mwmpi_req_free(r);
            if (done != NULL) mwmpi_req_free(done);
            return mwmpi_raise_mw(c, st, routine);
        }
        r->staging = copy;
        r->bsend_charge = automatic ? 0 : charge;
        attached_used += r->bsend_charge;
        mwmpi_req_detach(r);
    }
    if (request != NULL) *request = (MPI_Request)done;
    return MPI_SUCCESS;
}

int PMPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    return bsend(buf, count, datatype, dest, tag, comm, NULL, "MPI_Bsend");
}
int PMPI_Bsend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    return bsend(buf, count, datatype, dest, tag, comm, NULL, "MPI_Bsend");
}
int PMPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request *request) {
    if (request == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Ibsend", "NULL request");
    return bsend(buf, count, datatype, dest, tag, comm, request, "MPI_Ibsend");
}
int PMPI_Ibsend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  MPI_Request *request) {
    if (request == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Ibsend", "NULL request");
    return bsend(buf, count, datatype, dest, tag, comm, request, "MPI_Ibsend");
}

/* ---- memory ------------------------------------------------------------------- */

int PMPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr) {
    (void)info; /* no hint changes where the memory comes from */
    if (size < 0 || baseptr == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Alloc_mem", "bad size or NULL baseptr");
    void *p = malloc(size > 0 ? (size_t)size : 1);
    if (p == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Alloc_mem", "%lld bytes", (long long)size);
    *(void **)baseptr = p;
    return MPI_SUCCESS;
}

int PMPI_Free_mem(void *base) {
    free(base);
    return MPI_SUCCESS;
}
