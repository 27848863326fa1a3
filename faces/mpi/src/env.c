/*
 * env.c: the execution environment: Init, Init_thread, Finalize, their
 * queries, Abort, timers, the processor name, the version and ABI queries,
 * and Pcontrol. Init joins the memwire job (mwrun, Hydra, Slurm or PMI
 * start it) and sets up the predefined objects.
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

struct mwmpi_state mwmpi;

static void on_abort(mw_am_context *ctx, const mw_am_message *msg, void *user) {
    (void)ctx;
    (void)user;
    fflush(stdout);
    fflush(stderr);
    _exit(msg->nargs > 0 ? (int)msg->args[0] : 1);
}

int PMPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    (void)argc;
    (void)argv;
    if (mwmpi.initialized || mwmpi.finalized) {
        fprintf(stderr, "MPI_Init: called twice (MPI may be initialized once per process)\n");
        return MPI_ERR_OTHER;
    }
    mw_status st = mw_init(&mwmpi.ep);
    if (st != MW_OK) {
        fprintf(stderr, "MPI_Init: joining the memwire job failed: %s\n", mw_last_error());
        return MPI_ERR_OTHER;
    }
    uint32_t rank, size;
    if (mw_rank(mwmpi.ep, &rank) != MW_OK || mw_size(mwmpi.ep, &size) != MW_OK) {
        fprintf(stderr, "MPI_Init: %s\n", mw_last_error());
        return MPI_ERR_OTHER;
    }
    mwmpi.world_rank = (int)rank;
    mwmpi.world_size = (int)size;
    /* memwire's endpoint takes calls from any thread, but this face's
     * communicator-creation and request bookkeeping are not yet made safe
     * for concurrent calls: SERIALIZED is the most it promises. */
    int level = required;
    if (level != MPI_THREAD_SINGLE && level != MPI_THREAD_FUNNELED && level != MPI_THREAD_SERIALIZED)
        level = MPI_THREAD_SERIALIZED;
    mwmpi.thread_level = level;
    mwmpi.main_thread = (unsigned long)pthread_self();
    if (gethostname(mwmpi.processor_name, sizeof mwmpi.processor_name - 1) != 0)
        snprintf(mwmpi.processor_name, sizeof mwmpi.processor_name, "rank%d", mwmpi.world_rank);
    mwmpi.processor_name[sizeof mwmpi.processor_name - 1] = '\0';
    st = mw_register_handler(mwmpi.ep, MWMPI_AM_ABORT, on_abort, NULL);
    if (st != MW_OK) {
        fprintf(stderr, "MPI_Init: %s\n", mw_last_error());
        return MPI_ERR_OTHER;
    }
    mwmpi_types_init();
    mwmpi_ops_init();
    mwmpi_comms_init();
    mwmpi.initialized = 1;
    if (provided != NULL) *provided = level;
    st = mw_barrier(mwmpi.ep);
    if (st != MW_OK) return mwmpi_raise_mw(NULL, st, "MPI_Init");
    return MPI_SUCCESS;
}

int PMPI_Init(int *argc, char ***argv) {
    int provided;
    return PMPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
}

/* What the program left behind that holds memwire resources: MPI lets a
 * program finalize with communicators not freed, and a request it never
 * completed is its error, but neither may keep memwire from finalizing. */
static void release_leftover(struct mwmpi_obj *obj) {
    if (obj->magic == MWMPI_MAGIC_COMM) {
        struct mwmpi_comm *c = (struct mwmpi_comm *)obj;
        if (c->team != NULL) mw_team_free(&c->team);
    } else if (obj->magic == MWMPI_MAGIC_REQ) {
        struct mwmpi_req *r = (struct mwmpi_req *)obj;
        if (r->mw != NULL) mw_handle_free(&r->mw);
        for (int i = 0; r->nbc != NULL && i < r->nbc->nhandles; i++)
            if (r->nbc->handles[i] != NULL) mw_handle_free(&r->nbc->handles[i]);
    }
}

int PMPI_Finalize(void) {
    MWMPI_REQUIRE_INIT("MPI_Finalize");
    int err = mwmpi_comms_delete_attrs();
    if (err != MPI_SUCCESS) return mwmpi_raise(NULL, err, "MPI_Finalize", "an attribute delete callback failed");
    mwmpi_requests_fini();
    /* MPI-5.0 11.2.2: Finalize is collective over the connected processes. */
    mw_status st = mw_barrier(mwmpi.ep);
    if (st != MW_OK) return mwmpi_raise_mw(NULL, st, "MPI_Finalize");
    mwmpi_comms_fini();
    mwmpi_objs_each(release_leftover);
    bool removed;
    mw_unregister_handler(mwmpi.ep, MWMPI_AM_ABORT, &removed);
    mwmpi.initialized = 0;
    mwmpi.finalized = 1;
    st = mw_finalize(&mwmpi.ep);
    if (st != MW_OK) {
        fprintf(stderr, "MPI_Finalize: memwire: %s (%s)\n", mw_strerror(st), mw_last_error());
        return mwmpi_class_of(st);
    }
    return MPI_SUCCESS;
}

int PMPI_Initialized(int *flag) {
    if (flag == NULL) return MPI_ERR_ARG;
    *flag = mwmpi.initialized || mwmpi.finalized;
    return MPI_SUCCESS;
}

int PMPI_Finalized(int *flag) {
    if (flag == NULL) return MPI_ERR_ARG;
    *flag = mwmpi.finalized;
    return MPI_SUCCESS;
}

int PMPI_Query_thread(int *provided) {
    MWMPI_REQUIRE_INIT("MPI_Query_thread");
    if (provided == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Query_thread", "NULL argument");
    *provided = mwmpi.thread_level;
    return MPI_SUCCESS;
}

int PMPI_Is_thread_main(int *flag) {
    MWMPI_REQUIRE_INIT("MPI_Is_thread_main");
    if (flag == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Is_thread_main", "NULL argument");
    *flag = (unsigned long)pthread_self() == mwmpi.main_thread;
    return MPI_SUCCESS;
}

int PMPI_Abort(MPI_Comm comm, int errorcode) {
    (void)comm; /* on memwire every process of the job goes */
    fflush(stdout);
    fflush(stderr);
    int code = errorcode != 0 ? errorcode & 0xff : 1;
    if (code == 0) code = 1;
    if (mwmpi.initialized && mwmpi.ep != NULL) {
        uint64_t arg = (uint64_t)code;
        for (int r = 0; r < mwmpi.world_size; r++)
            if (r != mwmpi.world_rank) mw_am_post(mwmpi.ep, (uint32_t)r, MWMPI_AM_ABORT, &arg, 1, NULL, 0);
        /* A one-way message is queued, not yet sent: let it leave. mwrun
         * also stops the other ranks when this one exits with a nonzero status. */
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        do {
            mw_progress(mwmpi.ep);
            sched_yield();
            clock_gettime(CLOCK_MONOTONIC, &now);
        } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 200000000L);
    }
    _exit(code);
}

double PMPI_Wtime(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

double PMPI_Wtick(void) {
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC, &res) != 0) return 1e-9;
    return (double)res.tv_sec + (double)res.tv_nsec * 1e-9;
}

int PMPI_Get_processor_name(char *name, int *resultlen) {
    if (name == NULL || resultlen == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Get_processor_name", "NULL argument");
    if (mwmpi.processor_name[0] == '\0' && gethostname(mwmpi.processor_name, sizeof mwmpi.processor_name - 1) != 0)
        strcpy(mwmpi.processor_name, "localhost");
    snprintf(name, MPI_MAX_PROCESSOR_NAME, "%s", mwmpi.processor_name);
    *resultlen = (int)strlen(name);
    return MPI_SUCCESS;
}

int PMPI_Get_version(int *version, int *subversion) {
    if (version == NULL || subversion == NULL) return MPI_ERR_ARG;
    *version = MPI_VERSION;
    *subversion = MPI_SUBVERSION;
    return MPI_SUCCESS;
}

int PMPI_Get_library_version(char *version, int *resultlen) {
    if (version == NULL || resultlen == NULL) return MPI_ERR_ARG;
    unsigned v = mw_version();
    snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING, "memwire MPI %u.%u.%u (MPI %d.%d, standard ABI %d.%d)", v >> 16,
             (v >> 8) & 0xff, v & 0xff, MPI_VERSION, MPI_SUBVERSION, MPI_ABI_VERSION, MPI_ABI_SUBVERSION);
    *resultlen = (int)strlen(version);
    return MPI_SUCCESS;
}

int PMPI_Abi_get_version(int *abi_major, int *abi_minor) {
    if (abi_major == NULL || abi_minor == NULL) return MPI_ERR_ARG;
    *abi_major = MPI_ABI_VERSION;
    *abi_minor = MPI_ABI_SUBVERSION;
    return MPI_SUCCESS;
}

int PMPI_Pcontrol(const int level, ...) {
    (void)level; /* no profiling library of our own to steer */
    return MPI_SUCCESS;
}

/* MPI_T: this library has no control or performance variables, categories,
 * events or time sources; the interface starts and answers so. */
static int t_initialized;

int PMPI_T_init_thread(int required, int *provided) {
    if (provided == NULL) return MPI_T_ERR_INVALID;
    t_initialized++;
    *provided = required > MPI_THREAD_SERIALIZED ? MPI_THREAD_SERIALIZED : required;
    return MPI_SUCCESS;
}

int PMPI_T_finalize(void) {
    if (t_initialized == 0) return MPI_T_ERR_NOT_INITIALIZED;
    t_initialized--;
    return MPI_SUCCESS;
}

#define T_NONE(fn, arg)                                          \
    int PMPI_T_##fn(int *arg) {                                  \
        if (t_initialized == 0) return MPI_T_ERR_NOT_INITIALIZED; \
        if (arg == NULL) return MPI_T_ERR_INVALID;               \
        *arg = 0;                                                \
        return MPI_SUCCESS;                                      \
    }
T_NONE(cvar_get_num, num_cvar)
T_NONE(pvar_get_num, num_pvar)
T_NONE(category_get_num, num_cat)
T_NONE(event_get_num, num_events)
T_NONE(source_get_num, num_sources)
T_NONE(category_changed, update_number)
