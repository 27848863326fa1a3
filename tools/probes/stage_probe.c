/*
 * stage_probe: how fast a 16 MiB message crosses between two processes of
 * this host, four ways, in the same seconds, with the placement of the two
 * CPUs measured beside them. The evidence behind memwire's staging forms
 * (crates/transport/src/shm/stage.rs, StageCopy; docs/messaging.md, "Two
 * CPUs per large message").
 *
 *   plain   the staging pipeline: the sender copies 512 KiB chunks into 4
 *           shared buffers with 16-byte vector stores, the receiver copies
 *           them out (both CPUs copy at once)
 *   stream  the same with non-temporal stores on the sender's side
 *   get     one memcpy from a shared mapping (what a memwire get does)
 *   pvr     one CPU's process_vm_readv of the sender's private memory
 *
 * Each round first bounces a cache line between the two processes (ns per
 * hop: ~45 when the host keeps the two vCPUs close, ~165 when it puts them
 * far apart), then runs each way REPS times and keeps its median. At the end
 * it prints the medians over the rounds, far and near apart.
 *
 * Build and run (make ctest builds it as target/c/stage_probe):
 *   cc -O2 -std=c11 -o stage_probe tools/probes/stage_probe.c
 *   ./stage_probe 100
 */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG ((size_t)16 << 20)
#define CHUNK ((size_t)512 << 10)
#define BUFFERS 4
#define REPS 11
#define PINGS 100000
#define FAR_NS 100.0

enum way { PLAIN, STREAM, GET, PVR, WAYS };
static const char *const way_name[WAYS] = {"plain", "stream", "get", "pvr"};

/* One cache line per word the two processes share, so none of them shares. */
struct control {
    _Alignas(64) volatile uint64_t ping;
    _Alignas(64) volatile uint64_t staged;
    _Alignas(64) volatile uint64_t drained;
    _Alignas(64) volatile uint64_t command; /* sequence number << 8 | way */
    _Alignas(64) volatile uint64_t sender_src;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) perror("sched_setaffinity (running unpinned)");
}

/* copy_plain and copy_stream: 16-byte vector loads, then plain or
 * non-temporal stores (the latter fenced at the end), four per line. */
#define NO_FENCE() ((void)0)
#define DEFINE_COPY(name, store, fence)                                      \
    static void name(char *dst, const char *src, size_t len) {               \
        for (size_t i = 0; i < len; i += 64) {                               \
            __m128i a = _mm_loadu_si128((const __m128i *)(src + i));         \
            __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));    \
            __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));    \
            __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));    \
            store((__m128i *)(dst + i), a);                                  \
            store((__m128i *)(dst + i + 16), b);                             \
            store((__m128i *)(dst + i + 32), c);                             \
            store((__m128i *)(dst + i + 48), d);                             \
        }                                                                    \
        fence();                                                             \
    }
DEFINE_COPY(copy_plain, _mm_storeu_si128, NO_FENCE)
DEFINE_COPY(copy_stream, _mm_stream_si128, _mm_sfence)

static void *shared(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    memset(p, 1, len);
    return p;
}

/* The sender: answers pings and stages messages until told to stop (way 0xff). */
static void sender(struct control *c, char *stage, char *src) {
    uint64_t seen = 0;
    for (;;) {
        uint64_t ping = c->ping;
        if (ping & 1) c->ping = ping + 1;
        uint64_t command = __atomic_load_n(&c->command, __ATOMIC_ACQUIRE);
        if (command == seen) continue;
        seen = command;
        unsigned way = (unsigned)(command & 0xff);
        if (way == 0xff) return;
        if (way != PLAIN && way != STREAM) continue;
        for (uint64_t i = 0; i < MSG / CHUNK; i++) {
            while (i - __atomic_load_n(&c->drained, __ATOMIC_ACQUIRE) >= BUFFERS) {
            }
            char *buffer = stage + (i % BUFFERS) * CHUNK;
            (way == STREAM ? copy_stream : copy_plain)(buffer, src + i * CHUNK, CHUNK);
            __atomic_store_n(&c->staged, i + 1, __ATOMIC_RELEASE);
        }
    }
}

static double ping_ns(struct control *c) {
    double start = now();
    for (uint64_t i = 0; i < PINGS; i++) {
        c->ping = 2 * i + 1;
        while (c->ping != 2 * i + 2) {
        }
    }
    c->ping = 0;
    return (now() - start) / PINGS / 2 * 1e9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n ? v[n / 2] : 0;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    if (rounds < 1 || rounds > 100000) {
        fprintf(stderr, "usage: stage_probe [ROUNDS]\n");
        return 2;
    }
    struct control *c = shared(sizeof *c);
    memset((void *)c, 0, sizeof *c);
    char *stage = shared(BUFFERS * CHUNK);
    char *shared_src = shared(MSG);
    char *src = aligned_alloc(4096, MSG);
    char *dst = aligned_alloc(4096, MSG);
    if (!src || !dst) return 1;
    memset(src, 2, MSG);
    memset(dst, 0, MSG);
    c->sender_src = (uint64_t)(uintptr_t)src;
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        pin(1);
        sender(c, stage, src);
        _exit(0);
    }
    pin(0);
    double *results[WAYS][2];
    int counts[WAYS][2] = {{0}};
    for (int w = 0; w < WAYS; w++)
        for (int f = 0; f < 2; f++) results[w][f] = calloc((size_t)rounds, sizeof(double));
    uint64_t sequence = 0;
    printf("%6s %8s", "round", "ns/hop");
    for (int w = 0; w < WAYS; w++) printf(" %8s", way_name[w]);
    printf("   (GB/s)\n");
    for (int r = 0; r < rounds; r++) {
        double ns = ping_ns(c);
        int far = ns > FAR_NS;
        printf("%6d %8.1f", r, ns);
        for (int w = 0; w < WAYS; w++) {
            double times[REPS];
            for (int k = 0; k < REPS; k++) {
                c->staged = 0;
                c->drained = 0;
                double start = now();
                __atomic_store_n(&c->command, ++sequence << 8 | (uint64_t)w, __ATOMIC_RELEASE);
                if (w == PLAIN || w == STREAM) {
                    for (uint64_t i = 0; i < MSG / CHUNK; i++) {
                        while (__atomic_load_n(&c->staged, __ATOMIC_ACQUIRE) <= i) {
                        }
                        copy_plain(dst + i * CHUNK, stage + (i % BUFFERS) * CHUNK, CHUNK);
                        __atomic_store_n(&c->drained, i + 1, __ATOMIC_RELEASE);
                    }
                } else if (w == GET) {
                    memcpy(dst, shared_src, MSG);
                } else {
                    for (size_t at = 0; at < MSG; at += (size_t)256 << 10) {
                        struct iovec local = {dst + at, (size_t)256 << 10};
                        struct iovec remote = {(void *)(uintptr_t)(c->sender_src + at), (size_t)256 << 10};
                        if (process_vm_readv(child, &local, 1, &remote, 1, 0) < 0) {
                            perror("process_vm_readv");
                            return 1;
                        }
                    }
                }
                times[k] = now() - start;
            }
            double gbps = (double)MSG / median(times, REPS) / 1e9;
            results[w][far][counts[w][far]++] = gbps;
            printf(" %8.2f", gbps);
        }
        printf("\n");
        fflush(stdout);
    }
    __atomic_store_n(&c->command, ++sequence << 8 | 0xff, __ATOMIC_RELEASE);
    waitpid(child, NULL, 0);
    for (int f = 1; f >= 0; f--) {
        printf("median over %d %s rounds:", counts[0][f], f ? "far" : "near");
        for (int w = 0; w < WAYS; w++) printf(" %s %.2f", way_name[w], median(results[w][f], counts[w][f]));
        printf(" GB/s\n");
    }
    return 0;
}
