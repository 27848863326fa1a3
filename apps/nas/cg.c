/*
 * cg.c: NAS CG, written once over comm.h: the inverse power method on a
 * random sparse symmetric positive-definite matrix, each outer iteration
 * solving A z = x with 25 conjugate-gradient steps and estimating the
 * smallest eigenvalue as zeta = shift + 1 / (x . z). The matrix and the
 * verification values are NPB's (classes S and W); verification is NPB's
 * relative error of zeta within 1e-10.
 *
 * Decomposition: rank r owns a contiguous block of rows (and the matching
 * block of every vector). Each CG step gathers the search direction p from
 * all ranks (allgatherv) for the local sparse matrix-vector product, and sums
 * the two dot products with allreduce. (NPB's MPI version uses a 2-D
 * process grid with transposes; the arithmetic and the result are the same.)
 */
#include "comm.h"
#include "npb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CGITMAX 25
#define RCOND 0.1

typedef struct {
    int na, nonzer, niter;
    double shift, zeta_verify;
} cg_class;

static const cg_class CLASS_S = {1400, 7, 15, 10.0, 8.5971775078648};
static const cg_class CLASS_W = {7000, 8, 15, 12.0, 10.362595087124};

/* The local rows [row0, row1) of A in compressed sparse row form (global
 * column indices). */
typedef struct {
    int row0, row1;
    int *rowstr;
    int *colidx;
    double *a;
} csr;

/* NPB's sprnvc: a sparse random vector of nz distinct positions in 0..n-1
 * with random values. `mark` is all zero on entry and on return. */
static int sprnvc(int n, int nz, uint64_t *tran, double *v, int *iv, char *mark) {
    int nn1 = 1;
    while (nn1 < n) nn1 *= 2;
    int nzv = 0;
    while (nzv < nz) {
        double vecelt = npb_randlc(tran, NPB_MULT);
        double vecloc = npb_randlc(tran, NPB_MULT);
        int i = (int)(nn1 * vecloc);
        if (i >= n || mark[i]) continue;
        mark[i] = 1;
        v[nzv] = vecelt;
        iv[nzv] = i;
        nzv++;
    }
    for (int k = 0; k < nzv; k++) mark[iv[k]] = 0;
    return nzv;
}

/* NPB's vecset: element i of the sparse vector becomes val (appended if absent). */
static int vecset(double *v, int *iv, int nzv, int i, double val) {
    for (int k = 0; k < nzv; k++)
        if (iv[k] == i) {
            v[k] = val;
            return nzv;
        }
    v[nzv] = val;
    iv[nzv] = i;
    return nzv + 1;
}

/* Matrix contributions (row, column, value), duplicates allowed. */
typedef struct {
    size_t n, cap;
    int *row, *col;
    double *val;
} triples;

static void reserve(triples *t, size_t cap) {
    t->cap = cap;
    t->row = realloc(t->row, sizeof(int) * cap);
    t->col = realloc(t->col, sizeof(int) * cap);
    t->val = realloc(t->val, sizeof(double) * cap);
    if (!t->row || !t->col || !t->val) {
        fprintf(stderr, "cg: out of memory\n");
        exit(2);
    }
}

static void push(triples *t, int row, int col, double val) {
    if (t->n == t->cap) reserve(t, 2 * t->cap);
    t->row[t->n] = row;
    t->col[t->n] = col;
    t->val[t->n] = val;
    t->n++;
}

/* NPB's makea, keeping only this rank's rows: A is the sum over the n outer
 * products size_k * v_k v_k^T of sparse random vectors (size_k shrinking
 * geometrically so that the condition number is about 1/RCOND), plus
 * (RCOND - shift) on the diagonal. Every rank draws the whole random
 * sequence, since each outer product touches rows everywhere. */
static csr makea(const cg_class *c, int row0, int row1, uint64_t *tran) {
    int n = c->na;
    int nloc = row1 - row0;
    /* About this rank's share of the contributions (duplicates included). */
    triples t = {0, 0, NULL, NULL, NULL};
    reserve(&t, (size_t)n * (size_t)(c->nonzer + 1) * (size_t)(c->nonzer + 1) / (size_t)comm_size() + 16);
    double *v = npb_alloc(sizeof(double) * (size_t)(c->nonzer + 2));
    int *iv = npb_alloc(sizeof(int) * (size_t)(c->nonzer + 2));
    char *mark = npb_alloc((size_t)n);
    double size = 1.0;
    double ratio = pow(RCOND, 1.0 / (double)n);

    for (int iouter = 0; iouter < n; iouter++) {
        int nzv = sprnvc(n, c->nonzer, tran, v, iv, mark);
        nzv = vecset(v, iv, nzv, iouter, 0.5);
        for (int ivelt = 0; ivelt < nzv; ivelt++) {
            int jcol = iv[ivelt];
            double scale = size * v[ivelt];
            for (int ivelt1 = 0; ivelt1 < nzv; ivelt1++) {
                int irow = iv[ivelt1];
                if (irow < row0 || irow >= row1) continue;
                push(&t, irow, jcol, v[ivelt1] * scale);
            }
        }
        size *= ratio;
    }
    /* The diagonal shift. */
    double diag = RCOND - c->shift + (npb_inject_error() ? 1e-6 : 0.0); /* test of the test */
    for (int i = row0; i < row1; i++) push(&t, i, i, diag);
    size_t nnza = t.n;
    int *arow = t.row, *acol = t.col;
    double *aelt = t.val;

    /* NPB's sparse: bucket the triples by row, then sum duplicates within
     * each row (in order of first appearance), dropping exact zeros. */
    csr m = {row0, row1, npb_alloc(sizeof(int) * (size_t)(nloc + 1)), npb_alloc(sizeof(int) * nnza),
             npb_alloc(sizeof(double) * nnza)};
    int *start = npb_alloc(sizeof(int) * (size_t)(nloc + 1));
    for (size_t k = 0; k < nnza; k++) start[arow[k] - row0 + 1]++;
    for (int j = 0; j < nloc; j++) start[j + 1] += start[j];
    int *fill = npb_alloc(sizeof(int) * (size_t)(nloc + 1));
    for (int j = 0; j <= nloc; j++) fill[j] = start[j];
    int *bcol = npb_alloc(sizeof(int) * nnza);
    double *bval = npb_alloc(sizeof(double) * nnza);
    for (size_t k = 0; k < nnza; k++) {
        int j = arow[k] - row0;
        bcol[fill[j]] = acol[k];
        bval[fill[j]] = aelt[k];
        fill[j]++;
    }
    double *x = npb_alloc(sizeof(double) * (size_t)n);
    int *nzloc = npb_alloc(sizeof(int) * (size_t)n);
    int nza = 0;
    m.rowstr[0] = 0;
    for (int j = 0; j < nloc; j++) {
        int nzrow = 0;
        for (int k = start[j]; k < start[j + 1]; k++) {
            int i = bcol[k];
            x[i] += bval[k];
            if (!mark[i] && x[i] != 0.0) {
                mark[i] = 1;
                nzloc[nzrow++] = i;
            }
        }
        for (int k = 0; k < nzrow; k++) {
            int i = nzloc[k];
            mark[i] = 0;
            double xi = x[i];
            x[i] = 0.0;
            if (xi != 0.0) {
                m.a[nza] = xi;
                m.colidx[nza] = i;
                nza++;
            }
        }
        m.rowstr[j + 1] = nza;
    }
    free(arow);
    free(acol);
    free(aelt);
    free(v);
    free(iv);
    free(mark);
    free(start);
    free(fill);
    free(bcol);
    free(bval);
    free(x);
    free(nzloc);
    return m;
}

typedef struct {
    int n, nloc;
    size_t *counts, *displs; /* bytes, for allgatherv of a row-block vector */
    double *x, *z, *p, *q, *r, *full;
} cg_work;

/* y = A_local * v, where v is the full vector gathered from every rank. */
static void matvec(const csr *m, const double *v, double *y) {
    int nloc = m->row1 - m->row0;
    for (int j = 0; j < nloc; j++) {
        double sum = 0.0;
        for (int k = m->rowstr[j]; k < m->rowstr[j + 1]; k++) sum += m->a[k] * v[m->colidx[k]];
        y[j] = sum;
    }
}

static void gather(cg_work *w, const double *local) {
    comm_allgatherv(local, sizeof(double) * (size_t)w->nloc, w->full, w->counts, w->displs);
}

static double dot(const double *a, const double *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* 25 CG steps on A z = x; returns ||x - A z||. */
static double conj_grad(const csr *m, cg_work *w) {
    int n = w->nloc;
    for (int j = 0; j < n; j++) {
        w->q[j] = 0.0;
        w->z[j] = 0.0;
        w->r[j] = w->x[j];
        w->p[j] = w->r[j];
    }
    double rho = dot(w->r, w->r, n);
    comm_allreduce_double(&rho, 1, COMM_SUM);
    for (int cgit = 0; cgit < CGITMAX; cgit++) {
        gather(w, w->p);
        matvec(m, w->full, w->q);
        double d = dot(w->p, w->q, n);
        comm_allreduce_double(&d, 1, COMM_SUM);
        double alpha = rho / d;
        double rho0 = rho;
        for (int j = 0; j < n; j++) {
            w->z[j] += alpha * w->p[j];
            w->r[j] -= alpha * w->q[j];
        }
        rho = dot(w->r, w->r, n);
        comm_allreduce_double(&rho, 1, COMM_SUM);
        double beta = rho / rho0;
        for (int j = 0; j < n; j++) w->p[j] = w->r[j] + beta * w->p[j];
    }
    gather(w, w->z);
    matvec(m, w->full, w->r);
    double sum = 0.0;
    for (int j = 0; j < n; j++) {
        double d = w->x[j] - w->r[j];
        sum += d * d;
    }
    comm_allreduce_double(&sum, 1, COMM_SUM);
    return sqrt(sum);
}

/* One inverse-power step: solve, then zeta from x . z, and x = z / ||z||. */
static double power_step(const csr *m, cg_work *w, const cg_class *c, double *rnorm) {
    *rnorm = conj_grad(m, w);
    double norms[2] = {dot(w->x, w->z, w->nloc), dot(w->z, w->z, w->nloc)};
    comm_allreduce_double(norms, 2, COMM_SUM);
    double inv = 1.0 / sqrt(norms[1]);
    for (int j = 0; j < w->nloc; j++) w->x[j] = inv * w->z[j];
    return c->shift + 1.0 / norms[0];
}

int main(int argc, char **argv) {
    comm_init(&argc, &argv);
    char cls = npb_class(argc, argv, "CG");
    const cg_class *c = cls == 'S' ? &CLASS_S : &CLASS_W;
    int me = comm_rank(), np = comm_size();
    if (np > c->na) {
        if (me == 0) fprintf(stderr, "cg: more ranks than rows\n");
        exit(2);
    }
    if (me == 0) {
        printf("\n NAS Parallel Benchmarks (memwire NAS-style kernels) -- CG Benchmark\n\n");
        printf(" Size: %d  (class %c)\n Iterations: %d\n Nonzeros per row: %d\n Ranks: %d (%s)\n",
               c->na, cls, c->niter, c->nonzer, np, comm_name());
    }

    cg_work w;
    w.n = c->na;
    w.counts = npb_alloc(sizeof(size_t) * (size_t)np);
    w.displs = npb_alloc(sizeof(size_t) * (size_t)np);
    for (int r = 0; r < np; r++) {
        int r0 = (int)((long)c->na * r / np), r1 = (int)((long)c->na * (r + 1) / np);
        w.counts[r] = sizeof(double) * (size_t)(r1 - r0);
        w.displs[r] = sizeof(double) * (size_t)r0;
    }
    int row0 = (int)((long)c->na * me / np), row1 = (int)((long)c->na * (me + 1) / np);
    w.nloc = row1 - row0;
    size_t vb = sizeof(double) * (size_t)(w.nloc + 1);
    w.x = npb_alloc(vb);
    w.z = npb_alloc(vb);
    w.p = npb_alloc(vb);
    w.q = npb_alloc(vb);
    w.r = npb_alloc(vb);
    w.full = npb_alloc(sizeof(double) * (size_t)c->na);

    uint64_t tran = NPB_SEED;
    (void)npb_randlc(&tran, NPB_MULT); /* NPB draws one number before makea */
    csr m = makea(c, row0, row1, &tran);

    /* One untimed step to touch all code and data, then start over. */
    double rnorm = 0.0;
    for (int j = 0; j < w.nloc; j++) w.x[j] = 1.0;
    (void)power_step(&m, &w, c, &rnorm);
    for (int j = 0; j < w.nloc; j++) w.x[j] = 1.0;

    comm_barrier();
    double t0 = comm_wtime();
    double zeta = 0.0;
    for (int it = 1; it <= c->niter; it++) {
        zeta = power_step(&m, &w, c, &rnorm);
        if (me == 0) {
            if (it == 1) printf("\n   iteration           ||r||                 zeta\n");
            printf("    %5d       %20.14e%20.13f\n", it, rnorm, zeta);
        }
    }
    double t = comm_wtime() - t0;
    comm_allreduce_double(&t, 1, COMM_MAX);

    double err = fabs(zeta - c->zeta_verify) / c->zeta_verify;
    /* Every rank checks (false for NaN too); the job passes only if all do. */
    int64_t failed = !(err <= 1.0e-10);
    comm_allreduce_i64(&failed, 1, COMM_MAX);
    int verified = !failed;
    if (me == 0) {
        if (verified)
            printf("\n VERIFICATION SUCCESSFUL\n Zeta is    %20.13e\n Error is   %20.13e\n", zeta, err);
        else
            printf("\n VERIFICATION FAILED\n Zeta                %20.13e\n The correct zeta is %20.13e\n",
                   zeta, c->zeta_verify);
    }
    double nz1 = (double)c->nonzer * (c->nonzer + 1);
    double mops = t > 0.0 ? 2.0 * c->niter * c->na * (3.0 + nz1 + 25.0 * (5.0 + nz1) + 3.0) / t / 1e6 : 0.0;
    char size[32];
    snprintf(size, sizeof size, "%d", c->na);
    int status = npb_report("CG", cls, size, c->niter, t, mops, "floating point", verified);

    free(m.rowstr);
    free(m.colidx);
    free(m.a);
    free(w.counts);
    free(w.displs);
    free(w.x);
    free(w.z);
    free(w.p);
    free(w.q);
    free(w.r);
    free(w.full);
    comm_finalize();
    return status;
}
