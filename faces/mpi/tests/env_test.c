/* The environment and error handling (MPI-5.0 chapters 9, 11, 20): version
 * and ABI queries, thread levels, timers, the processor name, the
 * predefined attributes, error handlers (ERRORS_RETURN, user handlers),
 * error classes and strings, an unsupported function returning
 * MPI_ERR_UNSUPPORTED_OPERATION, integer handles, and the standard ABI's
 * layout and constants as compiled here. */
#include <stddef.h>
#include <string.h>

#include "check.h"

_Static_assert(sizeof(MPI_Status) == 32, "MPI_Status is 8 ints");
_Static_assert(offsetof(MPI_Status, MPI_SOURCE) == 0 && offsetof(MPI_Status, MPI_TAG) == 4 &&
                   offsetof(MPI_Status, MPI_ERROR) == 8, "MPI_Status fields");
_Static_assert(sizeof(MPI_Comm) == sizeof(void *) && sizeof(MPI_Aint) == sizeof(void *), "handles are pointers");
_Static_assert(sizeof(MPI_Count) == 8 && sizeof(MPI_Offset) == 8, "64-bit counts");
_Static_assert(MPI_ERR_UNSUPPORTED_OPERATION == 55 && MPI_ERR_ABI == 62 && MPI_ANY_SOURCE == -1 &&
                   MPI_PROC_NULL == -3 && MPI_UNDEFINED == -32766 && MPI_THREAD_MULTIPLE == 4096,
               "ABI integer constants");

static int handler_calls, handler_code;
static MPI_Comm handler_comm;

static void record_error(MPI_Comm *comm, int *code, ...) {
    handler_calls++;
    handler_code = *code;
    handler_comm = *comm;
}

int main(int argc, char **argv) {
    int flag = 1;
    OK(MPI_Initialized(&flag));
    CHECK(!flag, "initialized before MPI_Init");
    int provided;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &np));
    CHECK(provided == MPI_THREAD_FUNNELED, "provided %d", provided);
    int level;
    OK(MPI_Query_thread(&level));
    CHECK(level == provided, "query_thread %d", level);
    OK(MPI_Is_thread_main(&flag));
    CHECK(flag, "the main thread is not main");
    OK(MPI_Initialized(&flag));
    CHECK(flag, "not initialized after MPI_Init");
    OK(MPI_Finalized(&flag));
    CHECK(!flag, "finalized too early");

    int v, sv;
    OK(MPI_Get_version(&v, &sv));
    CHECK(v == 5 && sv == 0, "version %d.%d", v, sv);
    OK(MPI_Abi_get_version(&v, &sv));
    CHECK(v == 1 && sv == 0, "ABI version %d.%d", v, sv);
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    OK(MPI_Get_library_version(text, &len));
    CHECK(len == (int)strlen(text) && strstr(text, "memwire") != NULL, "library version '%s'", text);
    char host[MPI_MAX_PROCESSOR_NAME];
    OK(MPI_Get_processor_name(host, &len));
    CHECK(len > 0 && len == (int)strlen(host), "processor name '%s'", host);
    double t0 = MPI_Wtime(), tick = MPI_Wtick();
    CHECK(tick > 0 && tick < 1e-3, "tick %g", tick);
    double t1 = MPI_Wtime();
    CHECK(t1 >= t0, "Wtime went back");

    int *value;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag));
    CHECK(flag && *value >= 32767, "TAG_UB");
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &value, &flag));
    CHECK(flag && *value == np, "UNIVERSE_SIZE %d", *value);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &value, &flag));
    CHECK(flag && (*value == 0 || *value == 1), "WTIME_IS_GLOBAL");

    /* ERRORS_RETURN: the error comes back as its class. */
    MPI_Errhandler eh;
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL, "default handler is not ERRORS_ARE_FATAL");
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int rc = MPI_Send(&v, 1, MPI_INT, np, 0, MPI_COMM_WORLD);
    CHECK(rc == MPI_ERR_RANK, "send to rank %d gave %d", np, rc);
    rc = MPI_Send(&v, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD);
    CHECK(rc == MPI_ERR_TYPE, "send of DATATYPE_NULL gave %d", rc);
    rc = MPI_Send(&v, -1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    CHECK(rc == MPI_ERR_COUNT, "negative count gave %d", rc);
    rc = MPI_Send(&v, 1, MPI_INT, 0, -5, MPI_COMM_WORLD);
    CHECK(rc == MPI_ERR_TAG, "negative tag gave %d", rc);
    /* An unimplemented function says so, through the communicator's handler. */
    MPI_Comm parent = MPI_COMM_NULL;
    rc = MPI_Comm_spawn("x", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &parent, MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_ERR_UNSUPPORTED_OPERATION, "Comm_spawn gave %d", rc);
    int cls;
    OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_UNSUPPORTED_OPERATION, "class %d", cls);
    OK(MPI_Error_string(MPI_ERR_TRUNCATE, text, &len));
    CHECK(strstr(text, "MPI_ERR_TRUNCATE") != NULL && len == (int)strlen(text), "string '%s'", text);
    OK(MPI_Error_string(MPI_SUCCESS, text, &len));
    CHECK(len > 0, "no string for MPI_SUCCESS");

    /* A user handler on a duplicate sees its communicator and the code. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_get_errhandler(dup, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "dup did not inherit ERRORS_RETURN");
    OK(MPI_Comm_create_errhandler(record_error, &eh));
    OK(MPI_Comm_set_errhandler(dup, eh));
    OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL, "free did not null the handle");
    rc = MPI_Recv(&v, 1, MPI_INT, np + 3, 0, dup, MPI_STATUS_IGNORE);
    CHECK(rc == MPI_ERR_RANK && handler_calls == 1 && handler_code == MPI_ERR_RANK && handler_comm == dup,
          "user handler: rc %d calls %d code %d", rc, handler_calls, handler_code);
    OK(MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER));
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER, "call_errhandler");

    /* Integer handles round-trip; predefined ones are the ABI's values. */
    CHECK(MPI_Comm_toint(MPI_COMM_WORLD) == 0x101 && MPI_Type_toint(MPI_INT) == 0x209, "predefined toint");
    CHECK(MPI_Comm_fromint(MPI_Comm_toint(dup)) == dup, "dup's integer handle");
    CHECK(MPI_Type_fromint(MPI_Type_toint(MPI_DOUBLE)) == MPI_DOUBLE, "type fromint");
    OK(MPI_Comm_free(&dup));
    CHECK(dup == MPI_COMM_NULL, "free did not null the communicator");

    PASSED("env_test");
    OK(MPI_Finalized(&flag));
    CHECK(flag, "not finalized after MPI_Finalize");
    return 0;
}
