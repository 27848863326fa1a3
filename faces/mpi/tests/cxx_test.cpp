// mpi.h from C++ (the standard ABI's header declares everything extern "C"):
// a ring of ranks passes a token round and every rank checks it.
#include <mpi.h>

#include <cstdio>
#include <vector>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    std::vector<int> all(static_cast<size_t>(np));
    MPI_Allgather(&me, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < np; i++)
        if (all[static_cast<size_t>(i)] != i) {
            std::fprintf(stderr, "rank %d: allgather slot %d holds %d\n", me, i, all[static_cast<size_t>(i)]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    int token = me, got = -1;
    MPI_Sendrecv(&token, 1, MPI_INT, (me + 1) % np, 0, &got, 1, MPI_INT, (me + np - 1) % np, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (got != (me + np - 1) % np) {
        std::fprintf(stderr, "rank %d: token %d\n", me, got);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::printf("cxx_test: rank %d of %d: passed\n", me, np);
    MPI_Finalize();
    return 0;
}
