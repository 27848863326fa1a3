/* The MPI side of mwbench's collective benchmarks: the same points, timed
 * the same way, so memwire and MPICH / Open MPI compare on one machine.
 *
 *   mpicc.mpich -O2 -o coll_bench_mpich coll_bench.c
 *   mpiexec.mpich -n 4 ./coll_bench_mpich --label mpich --transport tcp
 *
 * Per point: `warmup` untimed calls, then `iters` timed ones. Every rank
 * times each call; for the rooted/data collectives a barrier (untimed)
 * precedes each call. Rank 0 takes, per iteration, the slowest rank's time
 * and reports the median and 99th percentile of those, as one JSON line per
 * point (DESIGN §6 format, "op" = the label, e.g. "mpich").
 *
 * Sizes: barrier 0; bcast bytes broadcast; allgather bytes per rank;
 * alltoall bytes per destination; allreduce bytes of doubles summed;
 * allgatherv and alltoallv the same blocks as allgather and alltoall,
 * through MPI_Allgatherv / MPI_Alltoallv (equal counts, packed).
 *
 * --bench takes a comma-separated list of names, matched exactly.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether `name` is one of the comma-separated names in `list` (NULL: all). */
static int wanted(const char *list, const char *name) {
    if (!list)
        return 1;
    size_t len = strlen(name);
    for (const char *at = list; *at;) {
        const char *end = strchr(at, ',');
        size_t tok = end ? (size_t)(end - at) : strlen(at);
        if (tok == len && !strncmp(at, name, len))
            return 1;
        if (!end)
            break;
        at = end + 1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *bench, const char *label, const char *transport, int ranks, long size, int iters,
                   double *mine, double *all, int rank) {
    MPI_Gather(mine, iters, MPI_DOUBLE, all, iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    double *worst = malloc(sizeof(double) * iters);
    for (int i = 0; i < iters; i++) {
        worst[i] = 0;
        for (int r = 0; r < ranks; r++)
            if (all[r * iters + i] > worst[i])
                worst[i] = all[r * iters + i];
    }
    qsort(worst, iters, sizeof(double), cmp_double);
    double median = worst[iters / 2] * 1e6;
    int p99i = iters * 99 / 100;
    if (p99i >= iters)
        p99i = iters - 1;
    double p99 = worst[p99i] * 1e6;
    printf("{\"bench\":\"%s\",\"op\":\"%s\",\"algo\":\"%s\",\"transport\":\"%s\",\"ranks\":%d,\"size\":%ld,"
           "\"iters\":%d,\"median_us\":%.3f,\"p99_us\":%.3f}\n",
           bench, label, label, transport, ranks, size, iters, median, p99);
    fflush(stdout);
    free(worst);
}

int main(int argc, char **argv) {
    const char *label = "mpi", *transport = "default", *only = NULL;
    int iters = 2000;
    long sizes[16] = {8, 65536};
    int nsizes = 2;
    MPI_Init(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--label") && i + 1 < argc)
            label = argv[++i];
        else if (!strcmp(argv[i], "--transport") && i + 1 < argc)
            transport = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bench") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = 0;
            for (char *tok = strtok(argv[++i], ","); tok && nsizes < 16; tok = strtok(NULL, ","))
                sizes[nsizes++] = atol(tok);
        }
    }
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int warmup = iters / 10 > 50 ? iters / 10 : 50;
    double *mine = malloc(sizeof(double) * iters);
    double *all = malloc(sizeof(double) * iters * ranks);

    if (wanted(only, "barrier")) {
        for (int i = 0; i < warmup + iters; i++) {
            double t0 = MPI_Wtime();
            MPI_Barrier(MPI_COMM_WORLD);
            double t1 = MPI_Wtime();
            if (i >= warmup)
                mine[i - warmup] = t1 - t0;
        }
        report("barrier", label, transport, ranks, 0, iters, mine, all, rank);
    }
    static const char *benches[] = {"bcast", "allgather", "alltoall", "allreduce", "allgatherv", "alltoallv"};
    int *counts = malloc(sizeof(int) * ranks), *displs = malloc(sizeof(int) * ranks);
    for (int b = 0; b < 6; b++) {
        if (!wanted(only, benches[b]))
            continue;
        for (int s = 0; s < nsizes; s++) {
            long n = sizes[s];
            char *send = calloc((size_t)n * ranks + 8, 1);
            char *recv = calloc((size_t)n * ranks + 8, 1);
            for (int r = 0; r < ranks; r++) {
                counts[r] = (int)n;
                displs[r] = (int)n * r;
            }
            for (int i = 0; i < warmup + iters; i++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                switch (b) {
                case 0: MPI_Bcast(send, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD); break;
                case 1: MPI_Allgather(send, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, MPI_COMM_WORLD); break;
                case 2: MPI_Alltoall(send, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, MPI_COMM_WORLD); break;
                case 3: MPI_Allreduce(send, recv, (int)(n / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
                case 4: MPI_Allgatherv(send, (int)n, MPI_BYTE, recv, counts, displs, MPI_BYTE, MPI_COMM_WORLD); break;
                case 5:
                    MPI_Alltoallv(send, counts, displs, MPI_BYTE, recv, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
                    break;
                }
                double t1 = MPI_Wtime();
                if (i >= warmup)
                    mine[i - warmup] = t1 - t0;
            }
            report(benches[b], label, transport, ranks, n, iters, mine, all, rank);
            free(send);
            free(recv);
        }
    }
    free(counts);
    free(displs);
    free(mine);
    free(all);
    MPI_Finalize();
    return 0;
}
