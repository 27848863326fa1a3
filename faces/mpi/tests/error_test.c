/* The error paths that end the job, run by tests/run.sh, which checks the
 * exit status and the message. `error_test fatal`: a send to a rank out of
 * range under the default ERRORS_ARE_FATAL; `error_test abort`: rank 1
 * calls MPI_Abort(MPI_COMM_WORLD, 7) while rank 0 waits in a receive. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, np, x = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
        MPI_Send(&x, 1, MPI_INT, np + 1, 0, MPI_COMM_WORLD);
    } else if (me == 1 || np == 1) {
        MPI_Abort(MPI_COMM_WORLD, 7);
    } else if (me == 0) {
        MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    printf("error_test: rank %d returned\n", me);
    MPI_Finalize();
    return 0;
}
