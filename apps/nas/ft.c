/*
 * ft.c: NAS FT, written once over comm.h: solves a 3-D diffusion equation
 * spectrally. NPB's random initial field is transformed forward once; each
 * of the six time steps multiplies the spectrum by exp(-4 alpha pi^2 |k|^2)
 * (cumulatively), transforms it back and takes NPB's checksum of 1024
 * scattered elements. Verification is NPB's: every checksum within a
 * relative 1e-12 of the class S or W reference.
 *
 * Decomposition (NPB's 1-D layout): the field is split into slabs of z
 * planes (layout A, x fastest) for the x and y transforms, and into slabs of
 * y (layout B, z fastest) for the z transform; one alltoall transposes
 * between them on every 3-D transform. The number of ranks must divide both
 * ny and nz.
 */
#include "comm.h"
#include "npb.h"

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef double complex cplx;

#define NITER 6
#define ALPHA 1.0e-6
#define PI 3.141592653589793238

typedef struct {
    int nx, ny, nz;
    double ref[NITER][2];
} ft_class;

static const ft_class CLASS_S = {64, 64, 64,
                                 {{5.546087004964e+02, 4.845363331978e+02},
                                  {5.546385409189e+02, 4.865304269511e+02},
                                  {5.546148406171e+02, 4.883910722336e+02},
                                  {5.545423607415e+02, 4.901273169046e+02},
                                  {5.544255039624e+02, 4.917475857993e+02},
                                  {5.542683411902e+02, 4.932597244941e+02}}};
static const ft_class CLASS_W = {128, 128, 32,
                                 {{5.673612178944e+02, 5.293246849175e+02},
                                  {5.631436885271e+02, 5.282149986629e+02},
                                  {5.594024089970e+02, 5.270996558037e+02},
                                  {5.560698047020e+02, 5.260027904925e+02},
                                  {5.530898991250e+02, 5.249400845633e+02},
                                  {5.504159734538e+02, 5.239212247086e+02}}};

/* A radix-2 transform of one length: roots of unity and bit reversal. */
typedef struct {
    int n;
    cplx *w; /* exp(-2 pi i k / n), k < n/2 */
    int *rev;
} fft_plan;

static fft_plan plan_new(int n) {
    fft_plan p = {n, npb_alloc(sizeof(cplx) * (size_t)(n / 2 + 1)), npb_alloc(sizeof(int) * (size_t)n)};
    int bits = 0;
    while ((1 << bits) < n) bits++;
    for (int k = 0; k < n / 2; k++) {
        double t = -2.0 * PI * k / n;
        p.w[k] = cos(t) + sin(t) * I;
    }
    for (int i = 0; i < n; i++) {
        int r = 0;
        for (int b = 0; b < bits; b++)
            if (i & (1 << b)) r |= 1 << (bits - 1 - b);
        p.rev[i] = r;
    }
    return p;
}

/* In place, unnormalized; dir = +1 forward (negative exponent), -1 inverse. */
static void fft_line(const fft_plan *p, cplx *a, int dir) {
    int n = p->n;
    for (int i = 0; i < n; i++) {
        int r = p->rev[i];
        if (r > i) {
            cplx t = a[i];
            a[i] = a[r];
            a[r] = t;
        }
    }
    for (int len = 2; len <= n; len *= 2) {
        int half = len / 2, step = n / len;
        for (int i = 0; i < n; i += len)
            for (int k = 0; k < half; k++) {
                cplx w = dir > 0 ? p->w[k * step] : conj(p->w[k * step]);
                cplx u = a[i + k], v = a[i + k + half] * w;
                a[i + k] = u + v;
                a[i + k + half] = u - v;
            }
    }
}

typedef struct {
    const ft_class *c;
    int me, np, nzl, nyl, z0;
    size_t nloc;
    fft_plan px, py, pz;
    cplx *u0, *u1, *u2; /* u0, u1 in layout B; u2 in layout A */
    double *twiddle;    /* layout B */
    cplx *sbuf, *rbuf, *line;
} ft_state;

/* Layout A: [z local][y][x]; layout B: [y local][x][z]. */
static size_t idx_a(const ft_state *s, int zl, int y, int x) {
    return ((size_t)zl * (size_t)s->c->ny + (size_t)y) * (size_t)s->c->nx + (size_t)x;
}
static size_t idx_b(const ft_state *s, int yl, int x, int z) {
    return ((size_t)yl * (size_t)s->c->nx + (size_t)x) * (size_t)s->c->nz + (size_t)z;
}

/* x and y transforms of a layout-A field. */
static void fft_xy(ft_state *s, cplx *a, int dir) {
    int nx = s->c->nx, ny = s->c->ny;
    for (int zl = 0; zl < s->nzl; zl++) {
        if (dir < 0) { /* inverse: y first, then x (mirror of forward) */
            for (int x = 0; x < nx; x++) {
                for (int y = 0; y < ny; y++) s->line[y] = a[idx_a(s, zl, y, x)];
                fft_line(&s->py, s->line, dir);
                for (int y = 0; y < ny; y++) a[idx_a(s, zl, y, x)] = s->line[y];
            }
        }
        for (int y = 0; y < ny; y++) fft_line(&s->px, &a[idx_a(s, zl, y, 0)], dir);
        if (dir > 0) {
            for (int x = 0; x < nx; x++) {
                for (int y = 0; y < ny; y++) s->line[y] = a[idx_a(s, zl, y, x)];
                fft_line(&s->py, s->line, dir);
                for (int y = 0; y < ny; y++) a[idx_a(s, zl, y, x)] = s->line[y];
            }
        }
    }
}

/* z transforms of a layout-B field (z is contiguous). */
static void fft_z(ft_state *s, cplx *b, int dir) {
    for (int yl = 0; yl < s->nyl; yl++)
        for (int x = 0; x < s->c->nx; x++) fft_line(&s->pz, &b[idx_b(s, yl, x, 0)], dir);
}

/* Blocks exchanged by the transposes are [z local][y local][x]. */
static void transpose_a_to_b(ft_state *s, const cplx *a, cplx *b) {
    int nx = s->c->nx;
    size_t blk = (size_t)s->nzl * (size_t)s->nyl * (size_t)nx;
    for (int q = 0; q < s->np; q++)
        for (int zl = 0; zl < s->nzl; zl++)
            for (int yl = 0; yl < s->nyl; yl++)
                memcpy(&s->sbuf[q * blk + ((size_t)zl * s->nyl + yl) * nx], &a[idx_a(s, zl, q * s->nyl + yl, 0)],
                       sizeof(cplx) * (size_t)nx);
    comm_alltoall(s->sbuf, s->rbuf, sizeof(cplx) * blk);
    for (int src = 0; src < s->np; src++)
        for (int zl = 0; zl < s->nzl; zl++)
            for (int yl = 0; yl < s->nyl; yl++) {
                const cplx *row = &s->rbuf[src * blk + ((size_t)zl * s->nyl + yl) * nx];
                for (int x = 0; x < nx; x++) b[idx_b(s, yl, x, src * s->nzl + zl)] = row[x];
            }
}

static void transpose_b_to_a(ft_state *s, const cplx *b, cplx *a) {
    int nx = s->c->nx;
    size_t blk = (size_t)s->nzl * (size_t)s->nyl * (size_t)nx;
    for (int q = 0; q < s->np; q++)
        for (int zl = 0; zl < s->nzl; zl++)
            for (int yl = 0; yl < s->nyl; yl++) {
                cplx *row = &s->sbuf[q * blk + ((size_t)zl * s->nyl + yl) * nx];
                for (int x = 0; x < nx; x++) row[x] = b[idx_b(s, yl, x, q * s->nzl + zl)];
            }
    comm_alltoall(s->sbuf, s->rbuf, sizeof(cplx) * blk);
    for (int src = 0; src < s->np; src++)
        for (int zl = 0; zl < s->nzl; zl++)
            for (int yl = 0; yl < s->nyl; yl++)
                memcpy(&a[idx_a(s, zl, src * s->nyl + yl, 0)], &s->rbuf[src * blk + ((size_t)zl * s->nyl + yl) * nx],
                       sizeof(cplx) * (size_t)nx);
}

/* NPB's folded wave number: 0, 1, ..., n/2-1, -n/2, ..., -1. */
static int fold(int i, int n) { return (i + n / 2) % n - n / 2; }

static void compute_twiddle(ft_state *s) {
    double ap = -4.0 * ALPHA * PI * PI;
    for (int yl = 0; yl < s->nyl; yl++) {
        int jj = fold(s->me * s->nyl + yl, s->c->ny);
        for (int x = 0; x < s->c->nx; x++) {
            int ii = fold(x, s->c->nx);
            for (int z = 0; z < s->c->nz; z++) {
                int kk = fold(z, s->c->nz);
                s->twiddle[idx_b(s, yl, x, z)] = exp(ap * (double)(ii * ii + jj * jj + kk * kk));
            }
        }
    }
}

/* NPB's initial field: the global random sequence laid out x fastest, real
 * then imaginary part; this rank starts 2 * nx * ny * z0 numbers in. */
static void initial_conditions(ft_state *s, cplx *a) {
    uint64_t x0 = npb_mulmod46(
        NPB_SEED, npb_powmod46(NPB_MULT, 2u * (uint64_t)s->c->nx * (uint64_t)s->c->ny * (uint64_t)s->z0));
    npb_vranlc(2 * s->nloc, &x0, NPB_MULT, (double *)a);
    if (npb_inject_error() && s->me == 0) a[0] += 1e-6; /* the test of the test */
}

static cplx checksum(ft_state *s, const cplx *a) {
    int nx = s->c->nx, ny = s->c->ny, nz = s->c->nz;
    double sum[2] = {0.0, 0.0};
    for (int j = 1; j <= 1024; j++) {
        int q = j % nx, r = (3 * j) % ny, z = (5 * j) % nz;
        if (z < s->z0 || z >= s->z0 + s->nzl) continue;
        cplx v = a[idx_a(s, z - s->z0, r, q)];
        sum[0] += creal(v);
        sum[1] += cimag(v);
    }
    comm_allreduce_double(sum, 2, COMM_SUM);
    double ntotal = (double)nx * ny * nz;
    return sum[0] / ntotal + (sum[1] / ntotal) * I;
}

/* Initial field and its forward transform into u0 (layout B). */
static void setup_field(ft_state *s) {
    compute_twiddle(s);
    initial_conditions(s, s->u2);
    fft_xy(s, s->u2, 1);
    transpose_a_to_b(s, s->u2, s->u0);
    fft_z(s, s->u0, 1);
}

int main(int argc, char **argv) {
    comm_init(&argc, &argv);
    ft_state s;
    memset(&s, 0, sizeof s);
    char cls = npb_class(argc, argv, "FT");
    s.c = cls == 'S' ? &CLASS_S : &CLASS_W;
    s.me = comm_rank();
    s.np = comm_size();
    int nx = s.c->nx, ny = s.c->ny, nz = s.c->nz;
    if (ny % s.np || nz % s.np) {
        if (s.me == 0) fprintf(stderr, "ft: the number of ranks must divide %d and %d\n", ny, nz);
        exit(2);
    }
    s.nzl = nz / s.np;
    s.nyl = ny / s.np;
    s.z0 = s.me * s.nzl;
    s.nloc = (size_t)nx * (size_t)ny * (size_t)s.nzl;
    if (s.me == 0) {
        printf("\n NAS Parallel Benchmarks (memwire NAS-style kernels) -- FT Benchmark\n\n");
        printf(" Size                : %4dx%4dx%4d  (class %c)\n Iterations          : %d\n"
               " Ranks               : %d (%s)\n Layout type         : 1D\n",
               nx, ny, nz, cls, NITER, s.np, comm_name());
    }
    s.px = plan_new(nx);
    s.py = plan_new(ny);
    s.pz = plan_new(nz);
    s.u0 = npb_alloc(sizeof(cplx) * s.nloc);
    s.u1 = npb_alloc(sizeof(cplx) * s.nloc);
    s.u2 = npb_alloc(sizeof(cplx) * s.nloc);
    s.sbuf = npb_alloc(sizeof(cplx) * s.nloc);
    s.rbuf = npb_alloc(sizeof(cplx) * s.nloc);
    s.twiddle = npb_alloc(sizeof(double) * s.nloc);
    s.line = npb_alloc(sizeof(cplx) * (size_t)(nx > ny ? (nx > nz ? nx : nz) : (ny > nz ? ny : nz)));

    /* As NPB: run the setup once untimed to touch everything, then time
     * everything from the start. */
    setup_field(&s);
    comm_barrier();
    double t0 = comm_wtime();
    setup_field(&s);
    cplx sums[NITER];
    for (int it = 0; it < NITER; it++) {
        for (size_t i = 0; i < s.nloc; i++) {
            s.u0[i] *= s.twiddle[i];
            s.u1[i] = s.u0[i];
        }
        fft_z(&s, s.u1, -1);
        transpose_b_to_a(&s, s.u1, s.u2);
        fft_xy(&s, s.u2, -1);
        sums[it] = checksum(&s, s.u2);
        if (s.me == 0) printf(" T = %4d     Checksum = %22.12e %22.12e\n", it + 1, creal(sums[it]), cimag(sums[it]));
    }
    double t = comm_wtime() - t0;
    comm_allreduce_double(&t, 1, COMM_MAX);

    int64_t failed = 0;
    for (int it = 0; it < NITER; it++) {
        cplx ref = s.c->ref[it][0] + s.c->ref[it][1] * I;
        double err = cabs((sums[it] - ref) / ref);
        if (!(err <= 1.0e-12)) failed = 1; /* NaN fails too */
    }
    comm_allreduce_i64(&failed, 1, COMM_MAX);
    if (s.me == 0) printf(" Result verification %s\n", failed ? "failed" : "successful");
    double ntotal = (double)nx * ny * nz;
    double mops = t > 0.0 ? 1e-6 * ntotal *
                                (14.8157 + 7.19641 * log(ntotal) + (5.23518 + 7.21113 * log(ntotal)) * NITER) / t
                          : 0.0;
    char size[48];
    snprintf(size, sizeof size, "%dx%dx%d", nx, ny, nz);
    int status = npb_report("FT", cls, size, NITER, t, mops, "floating point", !failed);

    free(s.px.w);
    free(s.px.rev);
    free(s.py.w);
    free(s.py.rev);
    free(s.pz.w);
    free(s.pz.rev);
    free(s.u0);
    free(s.u1);
    free(s.u2);
    free(s.sbuf);
    free(s.rbuf);
    free(s.twiddle);
    free(s.line);
    comm_finalize();
    return status;
}
