/*
 * errors.c: error classes and their strings, error handlers (the
 * predefined ERRORS_ARE_FATAL, ERRORS_ABORT, ERRORS_RETURN and user
 * handlers on communicators), and the path every failing routine takes:
 * mwmpi_raise calls the communicator's handler and gives back the code.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct mwmpi_errh mwmpi_errors_are_fatal = {{MWMPI_MAGIC_ERRH, 0}, MPI_ERRORS_ARE_FATAL, NULL, 1};
struct mwmpi_errh mwmpi_errors_return = {{MWMPI_MAGIC_ERRH, 0}, MPI_ERRORS_RETURN, NULL, 1};
static struct mwmpi_errh errors_abort = {{MWMPI_MAGIC_ERRH, 0}, MPI_ERRORS_ABORT, NULL, 1};

static const char *const class_strings[] = {
    [MPI_SUCCESS] = "MPI_SUCCESS: no error",
    [MPI_ERR_BUFFER] = "MPI_ERR_BUFFER: invalid buffer pointer",
    [MPI_ERR_COUNT] = "MPI_ERR_COUNT: invalid count argument",
    [MPI_ERR_TYPE] = "MPI_ERR_TYPE: invalid datatype",
    [MPI_ERR_TAG] = "MPI_ERR_TAG: invalid tag",
    [MPI_ERR_COMM] = "MPI_ERR_COMM: invalid communicator",
    [MPI_ERR_RANK] = "MPI_ERR_RANK: invalid rank",
    [MPI_ERR_REQUEST] = "MPI_ERR_REQUEST: invalid request",
    [MPI_ERR_ROOT] = "MPI_ERR_ROOT: invalid root",
    [MPI_ERR_GROUP] = "MPI_ERR_GROUP: invalid group",
    [MPI_ERR_OP] = "MPI_ERR_OP: invalid operation",
    [MPI_ERR_TOPOLOGY] = "MPI_ERR_TOPOLOGY: invalid topology",
    [MPI_ERR_DIMS] = "MPI_ERR_DIMS: invalid dimension argument",
    [MPI_ERR_ARG] = "MPI_ERR_ARG: invalid argument of some other kind",
    [MPI_ERR_UNKNOWN] = "MPI_ERR_UNKNOWN: unknown error",
    [MPI_ERR_TRUNCATE] = "MPI_ERR_TRUNCATE: message truncated on receive",
    [MPI_ERR_OTHER] = "MPI_ERR_OTHER: known error not in this list",
    [MPI_ERR_INTERN] = "MPI_ERR_INTERN: internal MPI (implementation) error",
    [MPI_ERR_PENDING] = "MPI_ERR_PENDING: pending request",
    [MPI_ERR_IN_STATUS] = "MPI_ERR_IN_STATUS: error code is in status",
    [MPI_ERR_ACCESS] = "MPI_ERR_ACCESS: permission denied",
    [MPI_ERR_AMODE] = "MPI_ERR_AMODE: error related to the amode passed to MPI_FILE_OPEN",
    [MPI_ERR_ASSERT] = "MPI_ERR_ASSERT: invalid assertion argument",
    [MPI_ERR_BAD_FILE] = "MPI_ERR_BAD_FILE: invalid file name",
    [MPI_ERR_BASE] = "MPI_ERR_BASE: invalid base argument",
    [MPI_ERR_CONVERSION] = "MPI_ERR_CONVERSION: error in a user-supplied data conversion function",
    [MPI_ERR_DISP] = "MPI_ERR_DISP: invalid displacement argument",
    [MPI_ERR_DUP_DATAREP] = "MPI_ERR_DUP_DATAREP: data representation identifier already registered",
    [MPI_ERR_FILE_EXISTS] = "MPI_ERR_FILE_EXISTS: file exists",
    [MPI_ERR_FILE_IN_USE] = "MPI_ERR_FILE_IN_USE: file operation could not be completed, file in use",
    [MPI_ERR_FILE] = "MPI_ERR_FILE: invalid file handle",
    [MPI_ERR_INFO_KEY] = "MPI_ERR_INFO_KEY: key longer than MPI_MAX_INFO_KEY",
    [MPI_ERR_INFO_NOKEY] = "MPI_ERR_INFO_NOKEY: key unknown",
    [MPI_ERR_INFO_VALUE] = "MPI_ERR_INFO_VALUE: value longer than MPI_MAX_INFO_VAL",
    [MPI_ERR_INFO] = "MPI_ERR_INFO: invalid info argument",
    [MPI_ERR_IO] = "MPI_ERR_IO: other I/O error",
    [MPI_ERR_KEYVAL] = "MPI_ERR_KEYVAL: invalid keyval",
    [MPI_ERR_LOCKTYPE] = "MPI_ERR_LOCKTYPE: invalid locktype argument",
    [MPI_ERR_NAME] = "MPI_ERR_NAME: invalid service name",
    [MPI_ERR_NO_MEM] = "MPI_ERR_NO_MEM: memory exhausted",
    [MPI_ERR_NOT_SAME] = "MPI_ERR_NOT_SAME: collective argument not identical on all processes",
    [MPI_ERR_NO_SPACE] = "MPI_ERR_NO_SPACE: not enough space",
    [MPI_ERR_NO_SUCH_FILE] = "MPI_ERR_NO_SUCH_FILE: file does not exist",
    [MPI_ERR_PORT] = "MPI_ERR_PORT: invalid port name",
    [MPI_ERR_QUOTA] = "MPI_ERR_QUOTA: quota exceeded",
    [MPI_ERR_READ_ONLY] = "MPI_ERR_READ_ONLY: read-only file or file system",
    [MPI_ERR_RMA_ATTACH] = "MPI_ERR_RMA_ATTACH: memory cannot be attached",
    [MPI_ERR_RMA_CONFLICT] = "MPI_ERR_RMA_CONFLICT: conflicting accesses to window",
    [MPI_ERR_RMA_RANGE] = "MPI_ERR_RMA_RANGE: target memory is not part of the window",
    [MPI_ERR_RMA_SHARED] = "MPI_ERR_RMA_SHARED: memory cannot be shared",
    [MPI_ERR_RMA_SYNC] = "MPI_ERR_RMA_SYNC: wrong synchronization of RMA calls",
    [MPI_ERR_SERVICE] = "MPI_ERR_SERVICE: invalid service name",
    [MPI_ERR_SIZE] = "MPI_ERR_SIZE: invalid size argument",
    [MPI_ERR_SPAWN] = "MPI_ERR_SPAWN: error in spawning processes",
    [MPI_ERR_UNSUPPORTED_DATAREP] = "MPI_ERR_UNSUPPORTED_DATAREP: unsupported datarep",
    [MPI_ERR_UNSUPPORTED_OPERATION] = "MPI_ERR_UNSUPPORTED_OPERATION: unsupported operation",
    [MPI_ERR_WIN] = "MPI_ERR_WIN: invalid window",
    [MPI_ERR_RMA_FLAVOR] = "MPI_ERR_RMA_FLAVOR: wrong type of window",
    [MPI_ERR_PROC_ABORTED] = "MPI_ERR_PROC_ABORTED: a process involved has failed or aborted",
    [MPI_ERR_VALUE_TOO_LARGE] = "MPI_ERR_VALUE_TOO_LARGE: value too large to store",
    [MPI_ERR_SESSION] = "MPI_ERR_SESSION: invalid session",
    [MPI_ERR_ERRHANDLER] = "MPI_ERR_ERRHANDLER: invalid error handler",
    [MPI_ERR_ABI] = "MPI_ERR_ABI: the ABI does not match",
};
#define NCLASSES ((int)(sizeof class_strings / sizeof class_strings[0]))

int mwmpi_class_of(mw_status status) {
    switch (status) {
    case MW_OK: return MPI_SUCCESS;
    case MW_ERR_INVALID_ARGUMENT: return MPI_ERR_ARG;
    case MW_ERR_NULL_POINTER: return MPI_ERR_BUFFER;
    case MW_ERR_BAD_RANK: return MPI_ERR_RANK;
    case MW_ERR_PEER_UNREACHABLE: return MPI_ERR_PROC_ABORTED;
    case MW_ERR_TRUNCATED: return MPI_ERR_TRUNCATE;
    case MW_ERR_UNSUPPORTED: return MPI_ERR_UNSUPPORTED_OPERATION;
    case MW_ERR_TEAM_BROKEN: return MPI_ERR_PROC_ABORTED;
    case MW_ERR_INTERNAL: return MPI_ERR_INTERN;
    default: return MPI_ERR_OTHER;
    }
}

int mwmpi_raise(struct mwmpi_comm *comm, int code, const char *routine, const char *detail, ...) {
    if (comm == NULL) comm = &mwmpi_comm_self;
    struct mwmpi_errh *e = comm->errh != NULL ? comm->errh : &mwmpi_errors_are_fatal;
    if (e->handle == MPI_ERRORS_RETURN) return code;
    if (e->comm_fn != NULL) {
        MPI_Comm h = comm->handle;
        int c = code;
        e->comm_fn(&h, &c, routine);
        return code;
    }
    /* ERRORS_ARE_FATAL and ERRORS_ABORT: name the routine and the reason,
     * then end the job (ABORT: the processes of this communicator, which
     * on memwire is the job too). */
    char text[MPI_MAX_ERROR_STRING];
    int len;
    PMPI_Error_string(code, text, &len);
    fprintf(stderr, "%s: rank %d: %s", routine, mwmpi.world_rank, text);
    if (detail != NULL) {
        va_list args;
        va_start(args, detail);
        fputs(" (", stderr);
        vfprintf(stderr, detail, args);
        fputs(")", stderr);
        va_end(args);
    }
    fputc('\n', stderr);
    PMPI_Abort(comm->handle, code);
    return code;
}

int mwmpi_raise_mw(struct mwmpi_comm *comm, mw_status status, const char *routine) {
    return mwmpi_raise(comm, mwmpi_class_of(status), routine, "memwire: %s: %s", mw_strerror(status), mw_last_error());
}

struct mwmpi_errh *mwmpi_errh_of(MPI_Errhandler h) {
    if (h == MPI_ERRORS_ARE_FATAL) return &mwmpi_errors_are_fatal;
    if (h == MPI_ERRORS_RETURN) return &mwmpi_errors_return;
    if (h == MPI_ERRORS_ABORT) return &errors_abort;
    if ((uintptr_t)h < MWMPI_PREDEFINED_LIMIT) return NULL;
    struct mwmpi_errh *e = (struct mwmpi_errh *)h;
    return e->obj.magic == MWMPI_MAGIC_ERRH ? e : NULL;
}

void mwmpi_errh_retain(struct mwmpi_errh *e) {
    if (e->comm_fn != NULL) e->refs++;
}

void mwmpi_errh_release(struct mwmpi_errh *e) {
    if (e->comm_fn == NULL || --e->refs > 0) return;
    mwmpi_obj_unregister(&e->obj);
    free(e);
}

int PMPI_Comm_create_errhandler(MPI_Comm_errhandler_function *fn, MPI_Errhandler *errhandler) {
    if (fn == NULL || errhandler == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Comm_create_errhandler", "NULL argument");
    struct mwmpi_errh *e = calloc(1, sizeof *e);
    if (e == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Comm_create_errhandler", NULL);
    mwmpi_obj_register(&e->obj, MWMPI_MAGIC_ERRH);
    e->handle = (MPI_Errhandler)e;
    e->comm_fn = fn;
    e->refs = 1;
    *errhandler = e->handle;
    return MPI_SUCCESS;
}

int PMPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
    MWMPI_COMM(c, comm, "MPI_Comm_set_errhandler");
    struct mwmpi_errh *e = mwmpi_errh_of(errhandler);
    if (e == NULL) return mwmpi_raise(c, MPI_ERR_ERRHANDLER, "MPI_Comm_set_errhandler", "invalid error handler");
    mwmpi_errh_retain(e);
    if (c->errh != NULL) mwmpi_errh_release(c->errh);
    c->errh = e;
    return MPI_SUCCESS;
}

int PMPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler) {
    MWMPI_COMM(c, comm, "MPI_Comm_get_errhandler");
    if (errhandler == NULL) return mwmpi_raise(c, MPI_ERR_ARG, "MPI_Comm_get_errhandler", "NULL argument");
    mwmpi_errh_retain(c->errh);
    *errhandler = c->errh->handle;
    return MPI_SUCCESS;
}

int PMPI_Errhandler_free(MPI_Errhandler *errhandler) {
    if (errhandler == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Errhandler_free", "NULL argument");
    struct mwmpi_errh *e = mwmpi_errh_of(*errhandler);
    if (e == NULL) return mwmpi_raise(NULL, MPI_ERR_ERRHANDLER, "MPI_Errhandler_free", "invalid error handler");
    mwmpi_errh_release(e);
    *errhandler = MPI_ERRHANDLER_NULL;
    return MPI_SUCCESS;
}

int PMPI_Comm_call_errhandler(MPI_Comm comm, int errorcode) {
    MWMPI_COMM(c, comm, "MPI_Comm_call_errhandler");
    mwmpi_raise(c, errorcode, "MPI_Comm_call_errhandler", NULL);
    return MPI_SUCCESS;
}

int PMPI_Error_string(int errorcode, char *string, int *resultlen) {
    if (string == NULL || resultlen == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Error_string", "NULL argument");
    const char *text = errorcode >= 0 && errorcode < NCLASSES && class_strings[errorcode] != NULL
                           ? class_strings[errorcode]
                           : NULL;
    if (text == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Error_string", "unknown error code %d", errorcode);
    snprintf(string, MPI_MAX_ERROR_STRING, "%s", text);
    *resultlen = (int)strlen(string);
    return MPI_SUCCESS;
}

int PMPI_Error_class(int errorcode, int *errorclass) {
    if (errorclass == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Error_class", "NULL argument");
    /* Every code this library returns is its class. */
    if (errorcode < 0 || errorcode >= NCLASSES)
        return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Error_class", "unknown error code %d", errorcode);
    *errorclass = errorcode;
    return MPI_SUCCESS;
}
