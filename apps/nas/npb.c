/*
 * npb.c: NPB's generator, class parsing and the result report (npb.h).
 */
#include "npb.h"

#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MASK46 ((UINT64_C(1) << 46) - 1)

/* The product of two 46-bit numbers needs 92 bits. */
__extension__ typedef unsigned __int128 u128;

uint64_t npb_mulmod46(uint64_t a, uint64_t b) { return (uint64_t)((u128)a * b) & MASK46; }

uint64_t npb_powmod46(uint64_t a, uint64_t e) {
    uint64_t r = 1;
    while (e) {
        if (e & 1u) r = npb_mulmod46(r, a);
        a = npb_mulmod46(a, a);
        e >>= 1;
    }
    return r;
}

double npb_randlc(uint64_t *x, uint64_t a) {
    *x = npb_mulmod46(*x, a);
    return (double)*x * 0x1p-46;
}

void npb_vranlc(size_t n, uint64_t *x, uint64_t a, double *y) {
    uint64_t v = *x;
    for (size_t i = 0; i < n; i++) {
        v = npb_mulmod46(v, a);
        y[i] = (double)v * 0x1p-46;
    }
    *x = v;
}

char npb_class(int argc, char **argv, const char *kernel) {
    if (argc < 2) return 'S';
    if (argc == 2 && (strcmp(argv[1], "S") == 0 || strcmp(argv[1], "W") == 0)) return argv[1][0];
    if (comm_rank() == 0) fprintf(stderr, "usage: %s [S|W]   (NAS %s, class S by default)\n", argv[0], kernel);
    exit(2);
}

int npb_report(const char *kernel, char cls, const char *size, int iterations, double seconds,
               double mops, const char *optype, int verified) {
    if (comm_rank() == 0) {
        printf("\n %s Benchmark Completed.\n", kernel);
        printf(" Class           = %c\n", cls);
        printf(" Size            = %s\n", size);
        printf(" Iterations      = %d\n", iterations);
        printf(" Time in seconds = %.4f\n", seconds);
        printf(" Ranks           = %d (%s)\n", comm_size(), comm_name());
        printf(" Mop/s total     = %.2f\n", mops);
        printf(" Mop/s/rank      = %.2f\n", mops / comm_size());
        printf(" Operation type  = %s\n", optype);
        printf(" Verification    = %s\n", verified ? "SUCCESSFUL" : "UNSUCCESSFUL");
        printf("NAS-RESULT kernel=%s class=%c comm=%s ranks=%d time=%.6f mops=%.2f verified=%s\n",
               kernel, cls, comm_name(), comm_size(), seconds, mops, verified ? "yes" : "no");
        fflush(stdout);
    }
    return verified ? 0 : 1;
}

void *npb_alloc(size_t bytes) {
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) {
        fprintf(stderr, "nas: out of memory (%zu bytes)\n", bytes);
        exit(2);
    }
    return p;
}

int npb_inject_error(void) {
    const char *v = getenv("NAS_INJECT_ERROR");
    return v && *v && strcmp(v, "0") != 0;
}
