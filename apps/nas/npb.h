/*
 * npb.h: what the three NAS kernels share: NPB's random number generator
 * (the linear congruential x_{k+1} = a x_k mod 2^46, here in exact integer
 * arithmetic, so it yields NPB's sequence bit for bit), the problem class
 * from the command line, and the result report.
 *
 * Exit status contract of every kernel: 0 when the run verified against the
 * official NPB values, 1 when it ran but failed verification, 2 on a usage
 * or communication error.
 */
#ifndef NAS_NPB_H
#define NAS_NPB_H

#include <stddef.h>
#include <stdint.h>

#define NPB_SEED 314159265ULL
#define NPB_MULT 1220703125ULL

/* a * b mod 2^46. */
uint64_t npb_mulmod46(uint64_t a, uint64_t b);
/* a^e mod 2^46: jumps a generator e steps ahead (seed * a^e). */
uint64_t npb_powmod46(uint64_t a, uint64_t e);
/* NPB's randlc: advances *x to a * *x mod 2^46 and returns it / 2^46. */
double npb_randlc(uint64_t *x, uint64_t a);
/* NPB's vranlc: n successive randlc values into y. */
void npb_vranlc(size_t n, uint64_t *x, uint64_t a, double *y);

/* The class letter from argv[1] ("S" or "W"; S when absent). Prints usage
 * on rank 0 and exits 2 for anything else. */
char npb_class(int argc, char **argv, const char *kernel);

/* Prints the result block on rank 0 and one machine-readable line,
 *   NAS-RESULT kernel=CG class=S comm=memwire ranks=4 time=... mops=... verified=yes
 * and returns the exit status (0 verified, 1 not). `verified` must already
 * be the same on every rank. */
int npb_report(const char *kernel, char cls, const char *size, int iterations, double seconds,
               double mops, const char *optype, int verified);

/* True when NAS_INJECT_ERROR is set: each kernel then perturbs its
 * computation slightly, so that a test can check that verification fails
 * and the exit status is 1. */
int npb_inject_error(void);

/* Allocation that exits with status 2 when memory runs out. */
void *npb_alloc(size_t bytes);

#endif /* NAS_NPB_H */
