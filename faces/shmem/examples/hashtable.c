/* A distributed hash table: keys live on PE hash(key) % npes in an
 * open-addressing table claimed with atomic compare_swap; each key's
 * insert count is an atomic add; the number of distinct keys is kept on
 * PE 0 under a distributed lock. Every PE inserts its own keys and a set
 * shared by all; the result must match the serial count. */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 1024 /* per PE */
#define OWN 200    /* keys only this PE inserts */
#define SHARED 50  /* keys every PE inserts */

static long keys[SLOTS];   /* 0: empty */
static long counts[SLOTS];
static long distinct;      /* on PE 0 */
static long distinct_lock;

static unsigned long hash(long key) { return (unsigned long)key * 0x9e3779b97f4a7c15ul >> 17; }

static void insert(long key, int npes) {
    int owner = (int)(hash(key) % (unsigned long)npes);
    for (unsigned long probe = 0;; probe++) {
        int slot = (int)((hash(key) / (unsigned long)npes + probe) % SLOTS);
        long seen = shmem_long_atomic_compare_swap(&keys[slot], 0, key, owner);
        if (seen == 0 || seen == key) {
            shmem_long_atomic_add(&counts[slot], 1, owner);
            if (seen == 0) {
                shmem_set_lock(&distinct_lock);
                long d = shmem_long_g(&distinct, 0);
                shmem_long_p(&distinct, d + 1, 0);
                shmem_clear_lock(&distinct_lock);
            }
            return;
        }
    }
}

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    for (long i = 0; i < OWN; i++) insert(1 + me + i * npes, npes);
    for (long i = 0; i < SHARED; i++) insert(1000000 + i, npes);
    shmem_barrier_all();
    /* Check: every key once, with the right count; the distinct total. */
    long local_keys = 0, local_inserts = 0, bad = 0;
    for (int s = 0; s < SLOTS; s++) {
        if (keys[s] == 0) continue;
        local_keys++;
        local_inserts += counts[s];
        long want = keys[s] >= 1000000 ? npes : 1;
        if (counts[s] != want) bad++;
        if (hash(keys[s]) % (unsigned long)npes != (unsigned long)me) bad++;
    }
    static long sums[3], totals[3];
    sums[0] = local_keys;
    sums[1] = local_inserts;
    sums[2] = bad;
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, totals, sums, 3);
    long want_keys = (long)OWN * npes + SHARED, want_inserts = (long)(OWN + SHARED) * npes;
    long seen_distinct = shmem_long_g(&distinct, 0);
    int ok = totals[0] == want_keys && totals[1] == want_inserts && totals[2] == 0 && seen_distinct == want_keys;
    printf("hashtable: PE %d of %d: %ld keys, %ld inserts, distinct %ld (serial: %ld, %ld): %s\n", me, npes, totals[0],
           totals[1], seen_distinct, want_keys, want_inserts, ok ? "equals serial" : "DIFFERS from serial");
    shmem_finalize();
    return ok ? 0 : 1;
}
