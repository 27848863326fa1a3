/*
 * request.c: requests (MPI-5.0 3.7, 3.9): wait, test and their any / all /
 * some forms, request_free, get_status, and persistent requests
 * (send_init, ssend_init, rsend_init, recv_init, start, startall).
 *
 * A request holds the memwire handle of its operation until completion,
 * when a receive's envelope becomes its status and a staged receive is
 * unpacked. A request freed while active is kept on a list and completed
 * by later calls (MPI says its operation still happens).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static struct mwmpi_req *detached;

struct mwmpi_req *mwmpi_req_new(enum mwmpi_req_kind kind, struct mwmpi_comm *comm) {
    struct mwmpi_req *r = calloc(1, sizeof *r);
    if (r == NULL) return NULL;
    mwmpi_obj_register(&r->obj, MWMPI_MAGIC_REQ);
    r->kind = kind;
    r->comm = comm;
    mwmpi_status_empty(&r->status);
    return r;
}

void mwmpi_req_free(struct mwmpi_req *r) {
    if (r->mw != NULL) mw_handle_free(&r->mw);
    if (r->bsend_charge > 0) mwmpi_bsend_release(r->bsend_charge);
    mwmpi_nbc_free(r->nbc);
    free(r->staging);
    if (r->type != NULL) mwmpi_type_release(r->type);
    mwmpi_obj_unregister(&r->obj);
    free(r);
}

/* Whether r's operation is done (making progress once when `test`). */
static bool req_done(struct mwmpi_req *r) {
    if (r->persistent) return r->inner == NULL || req_done(r->inner);
    if (r->nbc != NULL) return r->complete || mwmpi_nbc_test(r->nbc);
    if (r->complete || r->mw == NULL) return true;
    bool done = false;
    if (mw_test(r->mw, &done) != MW_OK) return true; /* the wait reports the error */
    return done;
}

/* Completes r, waiting for it if need be: its status and error are set. */
static void req_finish(struct mwmpi_req *r) {
    if (r->complete) return;
    if (r->nbc != NULL) {
        r->error = mwmpi_nbc_wait(r->nbc);
        mwmpi_status_empty(&r->status);
        r->status.MPI_ERROR = r->error;
    }
    if (r->mw != NULL) {
        if (r->kind == REQ_RECV) {
            mw_recv_status env;
            mw_status st = mw_wait_recv(&r->mw, &env);
            if (st == MW_OK) {
                if (r->staging != NULL) mwmpi_unpack(r->type, r->count, r->staging, env.len, r->buf);
                mwmpi_status_set(&r->status, r->comm, &env, MPI_SUCCESS);
            } else {
                r->error = mwmpi_class_of(st);
                r->status.MPI_ERROR = r->error;
            }
        } else {
            mw_status st = mw_wait(&r->mw);
            if (st != MW_OK) r->error = mwmpi_class_of(st);
            r->status.MPI_ERROR = r->error;
        }
    }
    free(r->staging);
    r->staging = NULL;
    if (r->type != NULL) mwmpi_type_release(r->type);
    r->type = NULL;
    r->complete = true;
}

/* Completes what the program freed while active, as far as it has come. */
static void sweep_detached(void) {
    struct mwmpi_req **link = &detached;
    while (*link != NULL) {
        struct mwmpi_req *r = *link;
        if (req_done(r)) {
            *link = r->next_detached;
            req_finish(r);
            mwmpi_req_free(r);
        } else {
            link = &r->next_detached;
        }
    }
}

/* A request argument: NULL (with *r) for MPI_REQUEST_NULL; raises on a bad one. */
static int req_get(MPI_Request h, struct mwmpi_req **r, const char *routine) {
    if (h == MPI_REQUEST_NULL) {
        *r = NULL;
        return MPI_SUCCESS;
    }
    *r = mwmpi_req_of(h);
    if (*r == NULL) return mwmpi_raise(NULL, MPI_ERR_REQUEST, routine, "invalid request");
    return MPI_SUCCESS;
}

/* Whether the request has nothing to complete (null, or persistent and inactive). */
static bool req_inactive(const struct mwmpi_req *r) { return r == NULL || (r->persistent && r->inner == NULL); }

/* Hands a done request's status to the caller and retires it: a plain
 * request is freed and its handle nulled, a persistent one goes inactive. */
static int req_collect(MPI_Request *handle, MPI_Status *status) {
    struct mwmpi_req *r = mwmpi_req_of(*handle);
    struct mwmpi_req *op = r->persistent ? r->inner : r;
    req_finish(op);
    if (status != MPI_STATUS_IGNORE) *status = op->status;
    int error = op->error;
    struct mwmpi_comm *comm = op->comm;
    if (r->persistent) {
        mwmpi_req_free(op);
        r->inner = NULL;
    } else {
        mwmpi_req_free(r);
        *handle = MPI_REQUEST_NULL;
    }
    return error != MPI_SUCCESS ? mwmpi_raise(comm, error, "MPI_Wait", "the request's operation failed") : MPI_SUCCESS;
}

int PMPI_Wait(MPI_Request *request, MPI_Status *status) {
    static const char routine[] = "MPI_Wait";
    if (request == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL request");
    struct mwmpi_req *r;
    int err = req_get(*request, &r, routine);
    if (err != MPI_SUCCESS) return err;
    if (req_inactive(r)) {
        mwmpi_status_empty(status);
        return MPI_SUCCESS;
    }
    sweep_detached();
    return req_collect(request, status); /* req_finish blocks in memwire */
}

int PMPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    static const char routine[] = "MPI_Test";
    if (request == NULL || flag == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    struct mwmpi_req *r;
    int err = req_get(*request, &r, routine);
    if (err != MPI_SUCCESS) return err;
    sweep_detached();
    if (req_inactive(r)) {
        *flag = 1;
        mwmpi_status_empty(status);
        return MPI_SUCCESS;
    }
    if (!req_done(r)) {
        *flag = 0;
        return MPI_SUCCESS;
    }
    *flag = 1;
    return req_collect(request, status);
}

static MPI_Status *status_at(MPI_Status *statuses, int i) {
    return statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
}

/* Checks every handle of an array; the first bad one is raised. */
static int check_array(int count, MPI_Request requests[], const char *routine) {
    if (count < 0 || (count > 0 && requests == NULL)) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "bad request array");
    for (int i = 0; i < count; i++) {
        struct mwmpi_req *r;
        int err = req_get(requests[i], &r, routine);
        if (err != MPI_SUCCESS) return err;
    }
    return MPI_SUCCESS;
}

/* Collects request i of an array into its status; on failure records the
 * error there and returns it without raising (the caller raises IN_STATUS). */
static int collect_quiet(MPI_Request *handle, MPI_Status *status) {
    struct mwmpi_req *r = mwmpi_req_of(*handle);
    struct mwmpi_req *op = r->persistent ? r->inner : r;
    req_finish(op);
    if (status != MPI_STATUS_IGNORE) *status = op->status;
    int error = op->error;
    if (r->persistent) {
        mwmpi_req_free(op);
        r->inner = NULL;
    } else {
        mwmpi_req_free(r);
        *handle = MPI_REQUEST_NULL;
    }
    if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = error;
    return error;
}

static int raise_in_status(MPI_Request requests[], int count, const char *routine) {
    struct mwmpi_comm *comm = NULL;
    (void)requests;
    (void)count;
    return mwmpi_raise(comm, MPI_ERR_IN_STATUS, routine, "an operation failed; see the statuses");
}

int PMPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
    static const char routine[] = "MPI_Waitall";
    int err = check_array(count, requests, routine);
    if (err != MPI_SUCCESS) return err;
    sweep_detached();
    bool failed = false;
    for (int i = 0; i < count; i++) {
        struct mwmpi_req *r = mwmpi_req_of(requests[i]);
        if (req_inactive(r)) {
            mwmpi_status_empty(status_at(statuses, i));
            continue;
        }
        failed |= collect_quiet(&requests[i], status_at(statuses, i)) != MPI_SUCCESS;
    }
    return failed ? raise_in_status(requests, count, routine) : MPI_SUCCESS;
}

int PMPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[]) {
    static const char routine[] = "MPI_Testall";
    if (flag == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL flag");
    int err = check_array(count, requests, routine);
    if (err != MPI_SUCCESS) return err;
    sweep_detached();
    for (int i = 0; i < count; i++) {
        struct mwmpi_req *r = mwmpi_req_of(requests[i]);
        if (!req_inactive(r) && !req_done(r)) {
            *flag = 0;
            return MPI_SUCCESS;
        }
    }
    *flag = 1;
    return PMPI_Waitall(count, requests, statuses);
}

/* One pass over the array: the first done request's index, -1 if none is,
 * MPI_UNDEFINED if every request is inactive. */
static int find_done(int count, MPI_Request requests[]) {
    bool any_active = false;
    for (int i = 0; i < count; i++) {
        struct mwmpi_req *r = mwmpi_req_of(requests[i]);
        if (req_inactive(r)) continue;
        any_active = true;
        if (req_done(r)) return i;
    }
    return any_active ? -1 : MPI_UNDEFINED;
}

static int any_common(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status, bool block,
                      const char *routine) {
    if (index == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL index");
    int err = check_array(count, requests, routine);
    if (err != MPI_SUCCESS) return err;
    unsigned spins = 0;
    int i;
    for (;;) {
        sweep_detached();
        i = find_done(count, requests);
        if (i != -1 || !block) break;
        mwmpi_poll(&spins);
    }
    if (flag != NULL) *flag = i != -1;
    if (i == -1) return MPI_SUCCESS;
    *index = i;
    if (i == MPI_UNDEFINED) {
        mwmpi_status_empty(status);
        return MPI_SUCCESS;
    }
    return req_collect(&requests[i], status);
}

int PMPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status) {
    return any_common(count, requests, index, NULL, status, true, "MPI_Waitany");
}

int PMPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status) {
    if (flag == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Testany", "NULL flag");
    return any_common(count, requests, index, flag, status, false, "MPI_Testany");
}

static int some_common(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[],
                       bool block, const char *routine) {
    if (outcount == NULL || (incount > 0 && indices == NULL))
        return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    int err = check_array(incount, requests, routine);
    if (err != MPI_SUCCESS) return err;
    unsigned spins = 0;
    for (;;) {
        sweep_detached();
        int n = 0;
        bool any_active = false;
        for (int i = 0; i < incount; i++) {
            struct mwmpi_req *r = mwmpi_req_of(requests[i]);
            if (req_inactive(r)) continue;
            any_active = true;
            if (req_done(r)) indices[n++] = i;
        }
        if (!any_active) {
            *outcount = MPI_UNDEFINED;
            return MPI_SUCCESS;
        }
        if (n > 0 || !block) {
            bool failed = false;
            for (int k = 0; k < n; k++)
                failed |= collect_quiet(&requests[indices[k]], status_at(statuses, k)) != MPI_SUCCESS;
            *outcount = n;
            return failed ? raise_in_status(requests, incount, routine) : MPI_SUCCESS;
        }
        mwmpi_poll(&spins);
    }
}

int PMPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[]) {
    return some_common(incount, requests, outcount, indices, statuses, true, "MPI_Waitsome");
}

int PMPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[]) {
    return some_common(incount, requests, outcount, indices, statuses, false, "MPI_Testsome");
}

int PMPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status) {
    static const char routine[] = "MPI_Request_get_status";
    if (flag == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL flag");
    struct mwmpi_req *r;
    int err = req_get(request, &r, routine);
    if (err != MPI_SUCCESS) return err;
    if (req_inactive(r)) {
        *flag = 1;
        mwmpi_status_empty(status);
        return MPI_SUCCESS;
    }
    struct mwmpi_req *op = r->persistent ? r->inner : r;
    *flag = req_done(r);
    if (*flag) {
        req_finish(op); /* keeps the request: the status is only read */
        if (status != MPI_STATUS_IGNORE) *status = op->status;
    }
    return MPI_SUCCESS;
}

/* The array forms of Request_get_status: like Testall / Testany /
 * Testsome, but the requests stay as they are. */
int PMPI_Request_get_status_all(int count, const MPI_Request requests[], int *flag, MPI_Status statuses[]) {
    static const char routine[] = "MPI_Request_get_status_all";
    if (flag == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL flag");
    int err = check_array(count, (MPI_Request *)requests, routine);
    if (err != MPI_SUCCESS) return err;
    sweep_detached();
    bool all = true;
    for (int i = 0; i < count; i++) all &= req_inactive(mwmpi_req_of(requests[i])) || req_done(mwmpi_req_of(requests[i]));
    *flag = all;
    for (int i = 0; all && i < count; i++) PMPI_Request_get_status(requests[i], &(int){0}, status_at(statuses, i));
    return MPI_SUCCESS;
}

int PMPI_Request_get_status_any(int count, const MPI_Request requests[], int *index, int *flag, MPI_Status *status) {
    static const char routine[] = "MPI_Request_get_status_any";
    if (flag == NULL || index == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    int err = check_array(count, (MPI_Request *)requests, routine);
    if (err != MPI_SUCCESS) return err;
    sweep_detached();
    bool active = false;
    *index = MPI_UNDEFINED;
    *flag = 0;
    for (int i = 0; i < count; i++) {
        struct mwmpi_req *r = mwmpi_req_of(requests[i]);
        if (req_inactive(r)) continue;
        active = true;
        if (req_done(r)) {
            *index = i;
            *flag = 1;
            return PMPI_Request_get_status(requests[i], &(int){0}, status);
        }
    }
    if (!active) {
        *flag = 1;
        mwmpi_status_empty(status);
    }
    return MPI_SUCCESS;
}

int PMPI_Request_get_status_some(int incount, const MPI_Request requests[], int *outcount, int indices[],
                                 MPI_Status statuses[]) {
    static const char routine[] = "MPI_Request_get_status_some";
    if (outcount == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL outcount");
    int err = check_array(incount, (MPI_Request *)requests, routine);
    if (err != MPI_SUCCESS) return err;
    sweep_detached();
    bool active = false;
    *outcount = 0;
    for (int i = 0; i < incount; i++) {
        struct mwmpi_req *r = mwmpi_req_of(requests[i]);
        if (req_inactive(r)) continue;
        active = true;
        if (req_done(r)) {
            indices[*outcount] = i;
            PMPI_Request_get_status(requests[i], &(int){0}, status_at(statuses, *outcount));
            ++*outcount;
        }
    }
    if (!active) *outcount = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

int PMPI_Request_free(MPI_Request *request) {
    static const char routine[] = "MPI_Request_free";
    if (request == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL request");
    struct mwmpi_req *r;
    int err = req_get(*request, &r, routine);
    if (err != MPI_SUCCESS) return err;
    if (r == NULL) return mwmpi_raise(NULL, MPI_ERR_REQUEST, routine, "MPI_REQUEST_NULL");
    struct mwmpi_req *op = r->persistent ? r->inner : r;
    if (r->persistent) {
        if (r->type != NULL) mwmpi_type_release(r->type);
        r->type = NULL;
        r->inner = NULL;
        mwmpi_req_free(r);
    }
    if (op != NULL) {
        if (op->complete) {
            mwmpi_req_free(op);
        } else {
            op->next_detached = detached;
            detached = op;
        }
    }
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

void mwmpi_req_detach(struct mwmpi_req *r) {
    r->next_detached = detached;
    detached = r;
}

void mwmpi_requests_sweep(void) { sweep_detached(); }

/* Completes every detached request (Finalize). */
void mwmpi_requests_fini(void) {
    while (detached != NULL) {
        struct mwmpi_req *r = detached;
        detached = r->next_detached;
        req_finish(r);
        mwmpi_req_free(r);
    }
}

/* ---- persistent requests -------------------------------------------------- */

static int persistent_init(int mode, const void *buf, MPI_Count count, MPI_Datatype datatype, int peer, int tag,
                           MPI_Comm comm, MPI_Request *request, const char *routine) {
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    struct mwmpi_type *t;
    int err = mwmpi_type_check(c, datatype, routine, &t);
    if (err != MPI_SUCCESS) return err;
    if (request == NULL || count < 0) return mwmpi_raise(c, MPI_ERR_ARG, routine, "bad arguments");
    struct mwmpi_req *r = mwmpi_req_new(mode == MWMPI_PERSIST_RECV ? REQ_RECV : REQ_SEND, c);
    if (r == NULL) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    r->persistent = true;
    r->mode = mode;
    r->p_buf = buf;
    r->p_count = count;
    r->p_type = datatype;
    r->type = t; /* held so a freed type outlives the request (MPI-5.0 5.1.9) */
    t->refs++;
    r->peer = peer;
    r->tag = tag;
    *request = (MPI_Request)r;
    return MPI_SUCCESS;
}

int PMPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request *request) {
    return persistent_init(MWMPI_PERSIST_SEND, buf, count, datatype, dest, tag, comm, request, "MPI_Send_init");
}

int PMPI_Send_init_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                     MPI_Request *request) {
    return persistent_init(MWMPI_PERSIST_SEND, buf, count, datatype, dest, tag, comm, request, "MPI_Send_init");
}

int PMPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                    MPI_Request *request) {
    return persistent_init(MWMPI_PERSIST_SEND, buf, count, datatype, dest, tag, comm, request, "MPI_Rsend_init");
}

int PMPI_Rsend_init_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                      MPI_Request *request) {
    return persistent_init(MWMPI_PERSIST_SEND, buf, count, datatype, dest, tag, comm, request, "MPI_Rsend_init");
}

int PMPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                    MPI_Request *request) {
    return persistent_init(MWMPI_PERSIST_SSEND, buf, count, datatype, dest, tag, comm, request, "MPI_Ssend_init");
}

int PMPI_Ssend_init_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                      MPI_Request *request) {
    return persistent_init(MWMPI_PERSIST_SSEND, buf, count, datatype, dest, tag, comm, request, "MPI_Ssend_init");
}

int PMPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                    MPI_Request *request) {
    return persistent_init(MWMPI_PERSIST_BSEND, buf, count, datatype, dest, tag, comm, request, "MPI_Bsend_init");
}

int PMPI_Bsend_init_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                      MPI_Request *request) {
    return persistent_init(MWMPI_PERSIST_BSEND, buf, count, datatype, dest, tag, comm, request, "MPI_Bsend_init");
}

int PMPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                   MPI_Request *request) {
    return persistent_init(MWMPI_PERSIST_RECV, buf, count, datatype, source, tag, comm, request, "MPI_Recv_init");
}

int PMPI_Recv_init_c(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                     MPI_Request *request) {
    return persistent_init(MWMPI_PERSIST_RECV, buf, count, datatype, source, tag, comm, request, "MPI_Recv_init");
}

int PMPI_Start(MPI_Request *request) {
    static const char routine[] = "MPI_Start";
    if (request == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL request");
    struct mwmpi_req *r;
    int err = req_get(*request, &r, routine);
    if (err != MPI_SUCCESS) return err;
    if (r == NULL || !r->persistent) return mwmpi_raise(NULL, MPI_ERR_REQUEST, routine, "not a persistent request");
    if (r->inner != NULL) return mwmpi_raise(r->comm, MPI_ERR_REQUEST, routine, "the request is already active");
    MPI_Request inner;
    MPI_Comm comm = r->comm->handle;
    switch (r->mode) {
    case MWMPI_PERSIST_SEND:
        err = PMPI_Isend_c(r->p_buf, r->p_count, r->p_type, r->peer, r->tag, comm, &inner);
        break;
    case MWMPI_PERSIST_SSEND:
        err = PMPI_Issend_c(r->p_buf, r->p_count, r->p_type, r->peer, r->tag, comm, &inner);
        break;
    case MWMPI_PERSIST_BSEND:
        err = PMPI_Ibsend_c(r->p_buf, r->p_count, r->p_type, r->peer, r->tag, comm, &inner);
        break;
    default:
        err = PMPI_Irecv_c((void *)r->p_buf, r->p_count, r->p_type, r->peer, r->tag, comm, &inner);
        break;
    }
    if (err != MPI_SUCCESS) return err;
    r->inner = mwmpi_req_of(inner);
    return MPI_SUCCESS;
}

int PMPI_Startall(int count, MPI_Request requests[]) {
    if (count < 0 || (count > 0 && requests == NULL))
        return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Startall", "bad request array");
    for (int i = 0; i < count; i++) {
        int err = PMPI_Start(&requests[i]);
        if (err != MPI_SUCCESS) return err;
    }
    return MPI_SUCCESS;
}

/* MPI_Cancel: a receive that no message has matched is withdrawn (its
 * request completes with Test_cancelled true and nothing in the buffer);
 * one already matched completes with its message. Sends are not
 * cancelled (the standard lets a cancel fail; MPI-4.1 deprecated
 * cancelling them): they complete as sent. Cancelling a collective's
 * request is erroneous (MPI-5.0 6.12). */
int PMPI_Cancel(MPI_Request *request) {
    static const char routine[] = "MPI_Cancel";
    if (request == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL request");
    struct mwmpi_req *r;
    int err = req_get(*request, &r, routine);
    if (err != MPI_SUCCESS) return err;
    if (r == NULL) return mwmpi_raise(NULL, MPI_ERR_REQUEST, routine, "MPI_REQUEST_NULL");
    struct mwmpi_req *op = r->persistent ? r->inner : r;
    if (op == NULL) return MPI_SUCCESS; /* an inactive persistent request */
    if (op->nbc != NULL) return mwmpi_raise(op->comm, MPI_ERR_REQUEST, routine, "a collective cannot be cancelled");
    if (op->kind != REQ_RECV || op->complete || op->mw == NULL) return MPI_SUCCESS;
    bool cancelled = false;
    mw_status st = mw_cancel_recv(&op->mw, &cancelled);
    if (st != MW_OK) return mwmpi_raise_mw(op->comm, st, routine);
    if (cancelled) {
        free(op->staging);
        op->staging = NULL;
        if (op->type != NULL) mwmpi_type_release(op->type);
        op->type = NULL;
        op->complete = true;
        mwmpi_status_empty(&op->status);
        op->status.MPI_internal[2] = 1; /* Test_cancelled */
    }
    return MPI_SUCCESS;
}
