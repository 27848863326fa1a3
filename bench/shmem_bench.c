/* mwbench's OpenSHMEM points (`mwbench --bench shmem`): one program, built
 * with memwire's oshcc (op `mwshmem`) and with Open MPI's oshcc (op
 * `oshmem`, the baseline), so both implementations run the same code.
 *
 *   oshcc -O2 -o shmem_bench shmem_bench.c
 *   oshrun -np 2 ./shmem_bench --points put:8:10000,put_bw:1048576:512,barrier:0:2000
 *
 * --points is a list of ROUTINE:SIZE:COUNT, each timed on PE 0:
 *   put         shmem_putmem to PE 1, then shmem_quiet (the put complete at
 *               the target: a round trip); half of each, median and p99
 *   get         a blocking shmem_getmem from PE 1; half of each
 *   fetch_add   shmem_long_atomic_fetch_add on PE 1 (SIZE 8); half of each
 *   put_signal  ping-pong: PE 0 shmem_putmem_signal(SHMEM_SIGNAL_SET) to
 *               PE 1, which waits for it with shmem_signal_wait_until and
 *               answers the same way; half of each round trip
 *   put_bw      COUNT shmem_putmem_nbi of SIZE to PE 1, then shmem_quiet;
 *               bytes per second (MBps = 10^6 B/s)
 *   get_bw      as put_bw with shmem_getmem_nbi from PE 1
 *   barrier     shmem_barrier_all, every PE (SIZE 0); each call
 *   broadcast   shmem_broadcastmem of SIZE bytes from PE 0 on
 *               SHMEM_TEAM_WORLD, every PE; each call
 *   sum_reduce  shmem_long_sum_reduce of SIZE/8 longs on SHMEM_TEAM_WORLD,
 *               every PE; each call
 * A library of OpenSHMEM 1.4 (Open MPI 4.1's OSHMEM) lacks put-with-signal,
 * teams and the 1.5 collectives; there the program uses the 1.4 way of
 * writing the same thing, and the row says so in "form": put_signal is
 * shmem_putmem, shmem_fence, then shmem_ulong_atomic_set of the signal
 * (waited for with shmem_uint64_wait_until); broadcast is
 * shmem_broadcast64 and sum_reduce shmem_long_sum_to_all over the active
 * set of every PE with pSync/pWrk arrays (SIZE rounded down to 8 bytes).
 * COUNT latency samples follow max(COUNT/10, 20) (at most 1000) untimed
 * ones. One JSON line per point on stdout from PE 0: bench "shmem", algo
 * the routine, ranks, size, iters and median_us/p99_us or MBps; mwbench
 * adds op, transport and via. Latency points need 2 PEs or more (PE 1 is
 * the target); collectives use every PE.
 */
#define _POSIX_C_SOURCE 200809L
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int warmup_of(int iters) {
    int w = iters / 10;
    return w < 20 ? 20 : (w > 1000 ? 1000 : w);
}

#if SHMEM_MAJOR_VERSION * 100 + SHMEM_MINOR_VERSION >= 105
#define SHMEM_1_5 1
#define FORM ""
#else
#define SHMEM_1_5 0
#define FORM ",\"form\":\"1.4\""
/* pSync and pWrk of the 1.4 active-set collectives (two of each, used in
 * turn, so a call never reuses the arrays of the one just before). */
static long psync[2][SHMEM_REDUCE_SYNC_SIZE > SHMEM_BCAST_SYNC_SIZE ? SHMEM_REDUCE_SYNC_SIZE : SHMEM_BCAST_SYNC_SIZE];
static long *pwrk[2];
#endif

static void report_latency(const char *routine, long size, double *samples, int iters) {
    qsort(samples, (size_t)iters, sizeof(double), cmp_double);
    int p99 = iters * 99 / 100;
    if (p99 >= iters)
        p99 = iters - 1;
    printf("{\"bench\":\"shmem\",\"algo\":\"%s\",\"ranks\":%d,\"size\":%ld,\"iters\":%d,\"median_us\":%.3f,"
           "\"p99_us\":%.3f" FORM "}\n",
           routine, shmem_n_pes(), size, iters, samples[iters / 2], samples[p99]);
    fflush(stdout);
}

/* The symmetric buffers every point uses: data, source, signal, counter. */
static char *data, *source;
static uint64_t *signal_word;
static long *counter, *reduce_src, *reduce_dst;

static void put_signal(size_t n, uint64_t round, int pe) {
#if SHMEM_1_5
    shmem_putmem_signal(data, source, n, signal_word, round, SHMEM_SIGNAL_SET, pe);
#else
    shmem_putmem(data, source, n, pe);
    shmem_fence();
    shmem_ulong_atomic_set((unsigned long *)signal_word, (unsigned long)round, pe); /* no uint64 AMOs in 1.4 */
#endif
}

static void wait_signal(uint64_t round) {
#if SHMEM_1_5
    shmem_signal_wait_until(signal_word, SHMEM_CMP_GE, round);
#else
    shmem_uint64_wait_until(signal_word, SHMEM_CMP_GE, round);
#endif
}

/* One latency point: `routine` run COUNT times after the warm-up, timed on PE 0
 * (`half`: half of each, for operations that take a round trip). */
static void latency(const char *routine, long size, int iters, int half) {
    int me = shmem_my_pe(), total = warmup_of(iters) + iters, warm = warmup_of(iters);
    double *samples = malloc(sizeof(double) * (size_t)iters);
    size_t n = (size_t)size;
    shmem_barrier_all();
    for (int i = 0; i < total; i++) {
        double t0 = now_us();
        if (!strcmp(routine, "put")) {
            if (me == 0) {
                shmem_putmem(data, source, n, 1);
                shmem_quiet();
            }
        } else if (!strcmp(routine, "get")) {
            if (me == 0)
                shmem_getmem(source, data, n, 1);
        } else if (!strcmp(routine, "fetch_add")) {
            if (me == 0)
                (void)shmem_long_atomic_fetch_add(counter, 1, 1);
        } else if (!strcmp(routine, "put_signal")) {
            uint64_t round = (uint64_t)i + 1;
            if (me == 0) {
                put_signal(n, round, 1);
                wait_signal(round);
            } else if (me == 1) {
                wait_signal(round);
                put_signal(n, round, 0);
            }
        } else if (!strcmp(routine, "barrier")) {
            shmem_barrier_all();
        } else if (!strcmp(routine, "broadcast")) {
#if SHMEM_1_5
            shmem_broadcastmem(SHMEM_TEAM_WORLD, data, source, n, 0);
#else
            shmem_broadcast64(data, source, n / 8, 0, 0, 0, shmem_n_pes(), psync[i % 2]);
#endif
        } else if (!strcmp(routine, "sum_reduce")) {
#if SHMEM_1_5
            shmem_long_sum_reduce(SHMEM_TEAM_WORLD, reduce_dst, reduce_src, n / sizeof(long));
#else
            shmem_long_sum_to_all(reduce_dst, reduce_src, (int)(n / sizeof(long)), 0, 0, shmem_n_pes(), pwrk[i % 2],
                                  psync[i % 2]);
#endif
        }
        double t1 = now_us();
        if (me == 0 && i >= warm)
            samples[i - warm] = (t1 - t0) / (half ? 2.0 : 1.0);
    }
    shmem_barrier_all();
    if (me == 0)
        report_latency(routine, size, samples, iters);
    /* The next point's signal rounds start again at 1. */
    *signal_word = 0;
    shmem_barrier_all();
    free(samples);
}

/* One throughput point: COUNT nonblocking puts or gets, then quiet. */
static void throughput(const char *routine, long size, int count) {
    int me = shmem_my_pe();
    size_t n = (size_t)size;
    shmem_barrier_all();
    if (me == 0) {
        int warm = warmup_of(count);
        double t0 = 0;
        for (int i = 0; i < warm + count; i++) {
            if (i == warm) {
                shmem_quiet();
                t0 = now_us();
            }
            if (!strcmp(routine, "put_bw"))
                shmem_putmem_nbi(data, source, n, 1);
            else
                shmem_getmem_nbi(source, data, n, 1);
        }
        shmem_quiet();
        double s = (now_us() - t0) / 1e6;
        printf("{\"bench\":\"shmem\",\"algo\":\"%s\",\"ranks\":%d,\"size\":%ld,\"iters\":%d,\"MBps\":%.1f" FORM "}\n", routine,
               shmem_n_pes(), size, count, (double)size * count / s / 1e6);
        fflush(stdout);
    }
    shmem_barrier_all();
}

int main(int argc, char **argv) {
    const char *points = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--points"))
            points = argv[++i];
    shmem_init();
    if (!points || shmem_n_pes() < 2) {
        if (shmem_my_pe() == 0)
            fprintf(stderr, "shmem_bench: needs 2 PEs or more and --points ROUTINE:SIZE:COUNT,...\n");
        shmem_global_exit(2);
    }
    /* The largest size asked for sizes the buffers. */
    long largest = 8;
    char *list = strdup(points);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        char routine[32];
        long size;
        int count;
        if (sscanf(tok, "%31[a-z_]:%ld:%d", routine, &size, &count) != 3 || size < 0 || count < 1) {
            if (shmem_my_pe() == 0)
                fprintf(stderr, "shmem_bench: bad point %s\n", tok);
            shmem_global_exit(2);
        }
        if (size > largest)
            largest = size;
    }
    free(list);
    data = shmem_malloc((size_t)largest);
    source = shmem_malloc((size_t)largest);
    reduce_src = shmem_calloc((size_t)largest / sizeof(long) + 1, sizeof(long));
    reduce_dst = shmem_calloc((size_t)largest / sizeof(long) + 1, sizeof(long));
    signal_word = shmem_calloc(1, sizeof(uint64_t));
    counter = shmem_calloc(1, sizeof(long));
    if (!data || !source || !reduce_src || !reduce_dst || !signal_word || !counter) {
        fprintf(stderr, "shmem_bench: symmetric heap too small for %ld-byte buffers (SHMEM_SYMMETRIC_SIZE)\n", largest);
        shmem_global_exit(2);
    }
    memset(source, 1, (size_t)largest);
#if !SHMEM_1_5
    size_t wrk = (size_t)largest / sizeof(long) / 2 + 1;
    if (wrk < SHMEM_REDUCE_MIN_WRKDATA_SIZE)
        wrk = SHMEM_REDUCE_MIN_WRKDATA_SIZE;
    for (int k = 0; k < 2; k++)
        pwrk[k] = shmem_malloc(wrk * sizeof(long));
    for (int k = 0; k < 2; k++)
        for (size_t j = 0; j < sizeof psync[k] / sizeof psync[k][0]; j++)
            psync[k][j] = SHMEM_SYNC_VALUE;
    shmem_barrier_all();
#endif
    list = strdup(points);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        char routine[32];
        long size;
        int count;
        sscanf(tok, "%31[a-z_]:%ld:%d", routine, &size, &count);
        if (!strcmp(routine, "put_bw") || !strcmp(routine, "get_bw"))
            throughput(routine, size, count);
        else if (!strcmp(routine, "put") || !strcmp(routine, "get") || !strcmp(routine, "fetch_add") ||
                 !strcmp(routine, "put_signal"))
            latency(routine, size, count, 1);
        else if (!strcmp(routine, "barrier") || !strcmp(routine, "broadcast") || !strcmp(routine, "sum_reduce"))
            latency(routine, size, count, 0);
        else {
            if (shmem_my_pe() == 0)
                fprintf(stderr, "shmem_bench: unknown routine %s\n", routine);
            shmem_global_exit(2);
        }
    }
    free(list);
    shmem_free(counter);
    shmem_free(signal_word);
    shmem_free(reduce_dst);
    shmem_free(reduce_src);
    shmem_free(source);
    shmem_free(data);
    shmem_finalize();
    return 0;
}
