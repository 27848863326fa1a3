/*
 * is.c: NAS IS (integer sort), written once over comm.h: ranks NPB's
 * pseudo-random integer keys ten times, each time with two keys changed,
 * by bucket sort across the ranks (bucket histogram, allreduce, buckets
 * assigned to ranks so that each gets about the same number of keys, an
 * alltoall of counts and an alltoallv of the keys) and a counting sort
 * within each rank. Verification is NPB's: the partial check of five test
 * keys' ranks on every iteration (classes S and W's test indices and ranks),
 * then the full check that the keys end up sorted across all ranks.
 *
 * The number of ranks must divide the number of keys (a power of two),
 * as in NPB's MPI version.
 */
#include "comm.h"
#include "npb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITERATIONS 10
#define TEST_ARRAY_SIZE 5

typedef struct {
    int total_keys_log2, max_key_log2, buckets_log2;
    int64_t test_index[TEST_ARRAY_SIZE], test_rank[TEST_ARRAY_SIZE];
} is_class;

static const is_class CLASS_S = {
    16, 11, 9, {48427, 17148, 23627, 62548, 4431}, {0, 18, 346, 64917, 65463}};
static const is_class CLASS_W = {20,
                                 16,
                                 10,
                                 {357773, 934767, 875723, 898999, 404505},
                                 {1249, 11698, 1039987, 1043896, 1048018}};

typedef struct {
    char cls;
    const is_class *c;
    int me, np;
    int64_t total_keys, num_keys, max_key, nbuckets;
    int shift;
    int32_t *keys;      /* this rank's num_keys keys */
    int32_t *sendbuf;   /* keys grouped by bucket */
    int32_t *recvbuf;   /* keys this rank ranks (capacity total_keys) */
    int32_t *count;     /* per key value in [min_key, max_key]: keys <= value */
    int64_t *bsize;     /* local bucket sizes, then the test keys */
    int64_t *btotal;    /* global bucket sizes, then the test keys */
    int64_t *bptr;
    int64_t *first, *last; /* bucket range of each rank (first > last: none) */
    int64_t *i64s, *i64r;
    size_t *scount, *sdispl, *rcount, *rdispl;
    int64_t nlocal, min_key;
    int passed;
} is_state;

/* NPB's create_seq: each key is the sum of four randoms times max_key/4,
 * starting where this rank's share of the global sequence starts. */
static void create_seq(is_state *s) {
    uint64_t seed =
        npb_mulmod46(NPB_SEED, npb_powmod46(NPB_MULT, (uint64_t)(4 * s->num_keys * s->me)));
    double k = (double)(s->max_key / 4);
    for (int64_t i = 0; i < s->num_keys; i++) {
        double x = npb_randlc(&seed, NPB_MULT);
        x += npb_randlc(&seed, NPB_MULT);
        x += npb_randlc(&seed, NPB_MULT);
        x += npb_randlc(&seed, NPB_MULT);
        s->keys[i] = (int32_t)(k * x);
    }
}

/* The expected rank of test key i at this iteration (NPB's per-class shifts). */
static int64_t expected_rank(const is_state *s, int i, int iteration) {
    int64_t r = s->c->test_rank[i];
    if (s->cls == 'S') return i <= 2 ? r + iteration : r - iteration;
    return i < 2 ? r + iteration - 2 : r - iteration; /* W */
}

static void rank_keys(is_state *s, int iteration) {
    int64_t nb = s->nbuckets;
    if (s->me == 0) {
        s->keys[iteration] = iteration;
        s->keys[iteration + MAX_ITERATIONS] = (int32_t)(s->max_key - iteration);
    }
    memset(s->bsize, 0, sizeof(int64_t) * (size_t)(nb + TEST_ARRAY_SIZE));
    for (int i = 0; i < TEST_ARRAY_SIZE; i++)
        if (s->c->test_index[i] / s->num_keys == s->me)
            s->bsize[nb + i] = s->keys[s->c->test_index[i] % s->num_keys];
    for (int64_t i = 0; i < s->num_keys; i++) s->bsize[s->keys[i] >> s->shift]++;
    s->bptr[0] = 0;
    for (int64_t b = 1; b < nb; b++) s->bptr[b] = s->bptr[b - 1] + s->bsize[b - 1];
    for (int64_t i = 0; i < s->num_keys; i++) {
        int32_t key = s->keys[i];
        s->sendbuf[s->bptr[key >> s->shift]++] = key;
    }

    memcpy(s->btotal, s->bsize, sizeof(int64_t) * (size_t)(nb + TEST_ARRAY_SIZE));
    comm_allreduce_i64(s->btotal, (size_t)(nb + TEST_ARRAY_SIZE), COMM_SUM);

    /* Rank j gets the buckets after rank j-1's, until the running total
     * reaches (j+1) * num_keys. */
    int64_t acc = 0, local = 0, j = 0;
    for (int r = 0; r < s->np; r++) {
        s->first[r] = 1;
        s->last[r] = 0;
        s->i64s[r] = 0;
    }
    s->first[0] = 0;
    for (int64_t b = 0; b < nb && j < s->np; b++) {
        acc += s->btotal[b];
        local += s->bsize[b];
        if (acc >= (j + 1) * s->num_keys) {
            s->i64s[j] = local;
            s->last[j] = b;
            if (j + 1 < s->np) s->first[j + 1] = b + 1;
            j++;
            local = 0;
        }
    }
    for (; j < s->np; j++) s->first[j] = s->last[j] + 1; /* no buckets */

    comm_alltoall(s->i64s, s->i64r, sizeof(int64_t));
    size_t sd = 0, rd = 0;
    for (int r = 0; r < s->np; r++) {
        s->scount[r] = sizeof(int32_t) * (size_t)s->i64s[r];
        s->sdispl[r] = sd;
        sd += s->scount[r];
        s->rcount[r] = sizeof(int32_t) * (size_t)s->i64r[r];
        s->rdispl[r] = rd;
        rd += s->rcount[r];
    }
    comm_alltoallv(s->sendbuf, s->scount, s->sdispl, s->recvbuf, s->rcount, s->rdispl);
    s->nlocal = (int64_t)(rd / sizeof(int32_t));

    if (s->first[s->me] > s->last[s->me]) {
        s->min_key = 0;
        return; /* this rank ranks nothing; no test key can be here */
    }
    int64_t min_key = s->first[s->me] << s->shift;
    int64_t max_key = ((s->last[s->me] + 1) << s->shift) - 1;
    int64_t lesser = 0; /* keys on lower ranks */
    for (int64_t b = 0; b < s->first[s->me]; b++) lesser += s->btotal[b];
    int32_t *cnt = s->count;
    memset(cnt, 0, sizeof(int32_t) * (size_t)(max_key - min_key + 1));
    for (int64_t i = 0; i < s->nlocal; i++) cnt[s->recvbuf[i] - min_key]++;
    if (npb_inject_error()) cnt[0]++; /* a phantom key: the test of the test */
    for (int64_t v = 1; v <= max_key - min_key; v++) cnt[v] += cnt[v - 1];
    s->min_key = min_key;

    for (int i = 0; i < TEST_ARRAY_SIZE; i++) {
        int64_t k = s->btotal[nb + i];
        if (k < min_key || k > max_key) continue;
        int64_t key_rank = lesser + (k > min_key ? cnt[k - 1 - min_key] : 0);
        if (key_rank == expected_rank(s, i, iteration))
            s->passed++;
        else
            printf("Failed partial verification: iteration %d, rank %d, test key %d, key rank %ld\n",
                   iteration, s->me, i, (long)key_rank);
    }
}

/* Sorts this rank's keys with the counts of the last iteration, checks the
 * order here and across the boundary with the previous non-empty rank. */
static void full_verify(is_state *s) {
    int32_t *sorted = s->sendbuf; /* capacity total_keys, free now */
    for (int64_t i = 0; i < s->nlocal; i++) {
        int32_t key = s->recvbuf[i];
        sorted[--s->count[key - s->min_key]] = key;
    }
    int64_t bad = 0;
    for (int64_t i = 1; i < s->nlocal; i++)
        if (sorted[i - 1] > sorted[i]) bad++;
    int64_t mine[3] = {s->nlocal, s->nlocal ? sorted[0] : 0, s->nlocal ? sorted[s->nlocal - 1] : 0};
    int64_t *all = npb_alloc(sizeof(int64_t) * 3 * (size_t)s->np);
    comm_allgather(mine, all, sizeof mine);
    int64_t total = 0;
    for (int r = 0; r < s->np; r++) total += all[3 * r];
    for (int r = s->me - 1; r >= 0 && s->nlocal > 0; r--)
        if (all[3 * r] > 0) {
            if (all[3 * r + 2] > sorted[0]) bad++;
            break;
        }
    if (total != s->total_keys) {
        if (s->me == 0) printf("Full_verify: %ld keys in all, expected %ld\n", (long)total, (long)s->total_keys);
        bad++;
    }
    free(all);
    if (bad)
        printf("Rank %d: Full_verify: number of keys out of sort: %ld\n", s->me, (long)bad);
    else
        s->passed++;
}

int main(int argc, char **argv) {
    comm_init(&argc, &argv);
    is_state s;
    memset(&s, 0, sizeof s);
    s.cls = npb_class(argc, argv, "IS");
    s.c = s.cls == 'S' ? &CLASS_S : &CLASS_W;
    s.me = comm_rank();
    s.np = comm_size();
    s.total_keys = (int64_t)1 << s.c->total_keys_log2;
    s.max_key = (int64_t)1 << s.c->max_key_log2;
    s.nbuckets = (int64_t)1 << s.c->buckets_log2;
    s.shift = s.c->max_key_log2 - s.c->buckets_log2;
    if (s.total_keys % s.np != 0 || s.total_keys / s.np < 2 * MAX_ITERATIONS + 1) {
        if (s.me == 0) fprintf(stderr, "is: the number of ranks must divide %ld\n", (long)s.total_keys);
        exit(2);
    }
    s.num_keys = s.total_keys / s.np;
    if (s.me == 0) {
        printf("\n NAS Parallel Benchmarks (memwire NAS-style kernels) -- IS Benchmark\n\n");
        printf(" Size:  %ld  (class %c)\n Iterations:  %d\n Ranks:  %d (%s)\n", (long)s.total_keys,
               s.cls, MAX_ITERATIONS, s.np, comm_name());
    }
    size_t np = (size_t)s.np, nb = (size_t)s.nbuckets + TEST_ARRAY_SIZE;
    s.keys = npb_alloc(sizeof(int32_t) * (size_t)s.num_keys);
    s.sendbuf = npb_alloc(sizeof(int32_t) * (size_t)s.total_keys);
    s.recvbuf = npb_alloc(sizeof(int32_t) * (size_t)s.total_keys);
    s.count = npb_alloc(sizeof(int32_t) * (size_t)s.max_key);
    s.bsize = npb_alloc(sizeof(int64_t) * nb);
    s.btotal = npb_alloc(sizeof(int64_t) * nb);
    s.bptr = npb_alloc(sizeof(int64_t) * nb);
    s.first = npb_alloc(sizeof(int64_t) * np);
    s.last = npb_alloc(sizeof(int64_t) * np);
    s.i64s = npb_alloc(sizeof(int64_t) * np);
    s.i64r = npb_alloc(sizeof(int64_t) * np);
    s.scount = npb_alloc(sizeof(size_t) * np);
    s.sdispl = npb_alloc(sizeof(size_t) * np);
    s.rcount = npb_alloc(sizeof(size_t) * np);
    s.rdispl = npb_alloc(sizeof(size_t) * np);

    create_seq(&s);
    rank_keys(&s, 1); /* untimed, to touch everything */
    s.passed = 0;

    comm_barrier();
    double t0 = comm_wtime();
    for (int it = 1; it <= MAX_ITERATIONS; it++) rank_keys(&s, it);
    double t = comm_wtime() - t0;
    comm_allreduce_double(&t, 1, COMM_MAX);

    full_verify(&s);
    int64_t passed = s.passed;
    comm_allreduce_i64(&passed, 1, COMM_SUM);
    int verified = passed == (int64_t)TEST_ARRAY_SIZE * MAX_ITERATIONS + s.np;
    if (s.me == 0)
        printf("\n Verification checks passed: %ld of %ld\n", (long)passed,
               (long)TEST_ARRAY_SIZE * MAX_ITERATIONS + s.np);
    char size[32];
    snprintf(size, sizeof size, "%ld", (long)s.total_keys);
    double mops = t > 0.0 ? (double)MAX_ITERATIONS * (double)s.total_keys / t / 1e6 : 0.0;
    int status = npb_report("IS", s.cls, size, MAX_ITERATIONS, t, mops, "keys ranked", verified);

    free(s.keys);
    free(s.sendbuf);
    free(s.recvbuf);
    free(s.count);
    free(s.bsize);
    free(s.btotal);
    free(s.bptr);
    free(s.first);
    free(s.last);
    free(s.i64s);
    free(s.i64r);
    free(s.scount);
    free(s.sdispl);
    free(s.rcount);
    free(s.rdispl);
    comm_finalize();
    return status;
}
