/*
 * nbc.c: the engine of the nonblocking collectives (MPI-5.0 6.12) and of
 * the v-forms: a collective is one round of point-to-point messages in the
 * communicator's collective context, all posted when it starts (packed
 * blocks of the user's data, or whole user-layout spans for reductions),
 * then a local finishing step (unpacking, reducing in rank order) once
 * every one of them has completed. A request of kind REQ_COLL owns it:
 * Test and Wait drive memwire, so the collective progresses whenever the
 * program calls into MPI.
 *
 * Each collective on a communicator takes the next sequence number as its
 * tag (members start collectives in the same order), so two collectives in
 * flight on one communicator never match each other's messages.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Tags of nonblocking collectives: above the blocking ones' (reduce.c). */
#define NBC_TAG_BASE 0x40000000u

struct mwmpi_nbc *mwmpi_nbc_new(struct mwmpi_comm *c, size_t size) {
    struct mwmpi_nbc *b = calloc(1, size);
    if (b == NULL) return NULL;
    b->comm = c;
    b->tag = NBC_TAG_BASE | (c->nbc_seq++ & 0x3fffffffu);
    return b;
}

static bool grow(void ***arr, int *cap, int n) {
    if (n < *cap) return true;
    int nc = *cap ? *cap * 2 : 8;
    void **g = realloc(*arr, (size_t)nc * sizeof *g);
    if (g == NULL) return false;
    *arr = g;
    *cap = nc;
    return true;
}

void *mwmpi_nbc_alloc(struct mwmpi_nbc *b, size_t len) {
    if (!grow(&b->allocs, &b->allocs_cap, b->nallocs)) return NULL;
    void *p = malloc(len + 1);
    if (p != NULL) b->allocs[b->nallocs++] = p;
    return p;
}

static int post(struct mwmpi_nbc *b, mw_handle *h) {
    if (!grow((void ***)&b->handles, &b->handles_cap, b->nhandles)) {
        mw_handle_free(&h);
        return MPI_ERR_NO_MEM;
    }
    b->handles[b->nhandles++] = h;
    return MPI_SUCCESS;
}

int mwmpi_nbc_send(struct mwmpi_nbc *b, int dest, const void *data, size_t len) {
    mw_handle *h = NULL;
    mw_status st = mw_isend_in(mwmpi.ep, b->comm->ctx + 1, (uint32_t)b->comm->world[dest], b->tag, data, len, &h);
    if (st != MW_OK) return mwmpi_class_of(st);
    return post(b, h);
}

int mwmpi_nbc_recv(struct mwmpi_nbc *b, int source, void *data, size_t len) {
    mw_handle *h = NULL;
    mw_status st = mw_irecv_in(mwmpi.ep, b->comm->ctx + 1, (uint32_t)b->comm->world[source], b->tag, data, len, &h);
    if (st != MW_OK) return mwmpi_class_of(st);
    return post(b, h);
}

/* Completes the handles that are done; true once all are (and finished). */
bool mwmpi_nbc_test(struct mwmpi_nbc *b) {
    if (b->done) return true;
    mw_progress(mwmpi.ep);
    while (b->ncomplete < b->nhandles) {
        mw_handle **h = &b->handles[b->ncomplete];
        bool done = false;
        mw_status st = mw_test(*h, &done);
        if (st == MW_OK && !done) return false;
        st = mw_wait(h); /* done or failed: collect its result */
        if (st != MW_OK && b->error == MPI_SUCCESS) b->error = mwmpi_class_of(st);
        b->ncomplete++;
    }
    if (b->error == MPI_SUCCESS && b->finish != NULL) b->error = b->finish(b);
    b->done = true;
    return true;
}

int mwmpi_nbc_wait(struct mwmpi_nbc *b) {
    unsigned spins = 0;
    while (!mwmpi_nbc_test(b)) mwmpi_poll(&spins);
    return b->error;
}

void mwmpi_nbc_free(struct mwmpi_nbc *b) {
    if (b == NULL) return;
    /* Handles still pending (a collective that failed to start): sends
     * still complete, receives are dropped. */
    for (int i = b->ncomplete; i < b->nhandles; i++) mw_handle_free(&b->handles[i]);
    for (int i = 0; i < b->nallocs; i++) free(b->allocs[i]);
    for (int i = 0; i < b->ntypes; i++) mwmpi_type_release(b->types[i]);
    free(b->handles);
    free(b->allocs);
    free(b->types);
    free(b);
}

bool mwmpi_nbc_keep_type(struct mwmpi_nbc *b, struct mwmpi_type *t) {
    if (t == NULL || t->predefined) return true;
    if (!grow((void ***)&b->types, &b->types_cap, b->ntypes)) return false;
    t->refs++;
    b->types[b->ntypes++] = t;
    return true;
}

int mwmpi_nbc_start(struct mwmpi_nbc *b, int err, MPI_Request *request, const char *routine) {
    struct mwmpi_comm *c = b->comm;
    if (err != MPI_SUCCESS) {
        /* Messages already posted are left to complete on their own. */
        mwmpi_nbc_free(b);
        return mwmpi_raise(c, err, routine, NULL);
    }
    struct mwmpi_req *r = mwmpi_req_new(REQ_COLL, c);
    if (r == NULL) {
        mwmpi_nbc_wait(b);
        mwmpi_nbc_free(b);
        return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    }
    r->nbc = b;
    *request = (MPI_Request)r;
    return MPI_SUCCESS;
}

int mwmpi_nbc_run(struct mwmpi_nbc *b, int err, const char *routine) {
    struct mwmpi_comm *c = b->comm;
    if (err == MPI_SUCCESS) err = mwmpi_nbc_wait(b);
    mwmpi_nbc_free(b);
    return err == MPI_SUCCESS ? MPI_SUCCESS : mwmpi_raise(c, err, routine, NULL);
}
