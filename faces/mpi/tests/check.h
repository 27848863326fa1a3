/* Checks for the MPI face's tests: a failed check prints the rank, file,
 * line and reason, then ends the whole job (MPI_Abort). */
#ifndef MWMPI_TEST_CHECK_H
#define MWMPI_TEST_CHECK_H
#include <mpi.h>
#include <stdio.h>

static unsigned long checks;
static int me, np;

#define CHECK(cond, ...)                                                                            \
    do {                                                                                            \
        checks++;                                                                                   \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", me, __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                                           \
            fprintf(stderr, "\n");                                                                  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                           \
        }                                                                                           \
    } while (0)

/* An MPI call that must succeed. */
#define OK(call)                                                                                    \
    do {                                                                                            \
        int rc_ = (call);                                                                           \
        CHECK(rc_ == MPI_SUCCESS, "%s returned %d", #call, rc_);                                    \
    } while (0)

#define START(argc, argv)                                                                           \
    do {                                                                                            \
        OK(MPI_Init(&argc, &argv));                                                                 \
        OK(MPI_Comm_rank(MPI_COMM_WORLD, &me));                                                     \
        OK(MPI_Comm_size(MPI_COMM_WORLD, &np));                                                     \
    } while (0)

#define PASSED(name)                                                                                \
    do {                                                                                            \
        OK(MPI_Barrier(MPI_COMM_WORLD));                                                            \
        printf("%s: rank %d of %d: %lu checks passed\n", name, me, np, checks);                     \
        OK(MPI_Finalize());                                                                         \
    } while (0)
#endif
