/* The MPI side of mwbench's point-to-point benchmarks: the same points as
 * memwire's, timed the same way, so memwire and MPICH / Open MPI compare on
 * one machine in one run. Two ranks.
 *
 *   mpicc.mpich -O2 -o pt2pt_bench pt2pt_bench.c
 *   mpiexec.mpich -n 2 ./pt2pt_bench --points pingpong:8:10000,bandwidth:1048576:512 --window 8
 *
 * --points is a list of BENCH:SIZE:COUNT:
 *   pingpong   COUNT timed round trips (after max(COUNT/10, 20), at most
 *              1000, untimed) of MPI_Send/MPI_Recv; half of each round trip,
 *              median and 99th percentile.
 *   bandwidth  COUNT messages from rank 0 to rank 1 in windows of --window
 *              MPI_Isend / MPI_Irecv, then a 1-byte acknowledgement; bytes
 *              per second at rank 0 (start to acknowledgement).
 *   bibw       both ranks send COUNT messages to each other at once, in
 *              windows; bytes of both directions per second at rank 0.
 *   rate       as bandwidth with --rate-window; messages per second.
 * One JSON line per point on stdout from rank 0, with bench, size, iters and
 * median_us/p99_us, MBps or ops_per_s; mwbench adds op, transport and via.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int warmup_of(int iters) {
    int w = iters / 10;
    return w < 20 ? 20 : (w > 1000 ? 1000 : w);
}

static void pingpong(int rank, long size, int iters) {
    char *buf = calloc((size_t)size + 1, 1);
    double *half = malloc(sizeof(double) * (size_t)iters);
    int warm = warmup_of(iters), total = warm + iters;
    int peer = 1 - rank;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < total; i++) {
        if (rank == 0) {
            double t0 = MPI_Wtime();
            MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double t1 = MPI_Wtime();
            if (i >= warm)
                half[i - warm] = (t1 - t0) * 1e6 / 2.0;
        } else {
            MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        }
    }
    if (rank == 0) {
        qsort(half, (size_t)iters, sizeof(double), cmp_double);
        int p99 = iters * 99 / 100;
        if (p99 >= iters)
            p99 = iters - 1;
        printf("{\"bench\":\"pingpong\",\"size\":%ld,\"iters\":%d,\"median_us\":%.3f,\"p99_us\":%.3f}\n", size, iters,
               half[iters / 2], half[p99]);
        fflush(stdout);
    }
    free(buf);
    free(half);
}

/* Windows of nonblocking sends (rank 0, or both with `both`) and receives;
 * returns rank 0's seconds from start to the end (acknowledged). */
static double stream(int rank, long size, int count, int window, int both) {
    int peer = 1 - rank;
    char *sbuf = calloc((size_t)size + 1, 1);
    char *rbuf = calloc((size_t)size * (size_t)window + 1, 1);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * (size_t)window);
    int sends = both || rank == 0, recvs = both || rank == 1;
    char ack = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int done = 0; done < count;) {
        int batch = count - done < window ? count - done : window, n = 0;
        if (recvs)
            for (int k = 0; k < batch; k++)
                MPI_Irecv(rbuf + (size_t)k * (size_t)size, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[n++]);
        if (sends)
            for (int k = 0; k < batch; k++)
                MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[n++]);
        MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
        done += batch;
    }
    if (!both) {
        if (rank == 1)
            MPI_Send(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
        else
            MPI_Recv(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    double seconds = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    free(sbuf);
    free(rbuf);
    free(reqs);
    return seconds;
}

int main(int argc, char **argv) {
    const char *points = NULL;
    int window = 8, rate_window = 64;
    MPI_Init(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--points") && i + 1 < argc)
            points = argv[++i];
        else if (!strcmp(argv[i], "--window") && i + 1 < argc)
            window = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rate-window") && i + 1 < argc)
            rate_window = atoi(argv[++i]);
    }
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks != 2 || !points || window < 1 || rate_window < 1) {
        if (rank == 0)
            fprintf(stderr, "pt2pt_bench: needs 2 ranks, --points BENCH:SIZE:COUNT,... and positive windows\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *list = strdup(points);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char bench[32];
        long size;
        int count;
        if (sscanf(tok, "%31[a-z]:%ld:%d", bench, &size, &count) != 3 || size < 0 || count < 1) {
            if (rank == 0)
                fprintf(stderr, "pt2pt_bench: bad point %s\n", tok);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (!strcmp(bench, "pingpong")) {
            pingpong(rank, size, count);
            continue;
        }
        int both = !strcmp(bench, "bibw"), is_rate = !strcmp(bench, "rate");
        if (!both && !is_rate && strcmp(bench, "bandwidth")) {
            if (rank == 0)
                fprintf(stderr, "pt2pt_bench: unknown bench %s\n", bench);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        double s = stream(rank, size, count, is_rate ? rate_window : window, both);
        if (rank == 0) {
            if (is_rate)
                printf("{\"bench\":\"rate\",\"size\":%ld,\"iters\":%d,\"ops_per_s\":%.0f}\n", size, count, count / s);
            else
                printf("{\"bench\":\"%s\",\"size\":%ld,\"iters\":%d,\"MBps\":%.1f}\n", bench, size, count,
                       (both ? 2.0 : 1.0) * (double)size * count / s / 1e6);
            fflush(stdout);
        }
    }
    free(list);
    MPI_Finalize();
    return 0;
}
