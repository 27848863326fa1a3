/* 2-D heat diffusion (Jacobi), rows split over the PEs, halo rows
 * exchanged with put_signal and waited for with signal_wait_until; the
 * result is gathered with fcollect and must equal, bit for bit, the same
 * computation done serially on every PE. Any PE count dividing NY. */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NX 64
#define NY 64
#define STEPS 100

static uint64_t halo_signal[2][2]; /* [parity][0: from above, 1: from below] */

static void step(const double *in, double *out, int rows) {
    /* in/out have rows + 2 rows (halos at 0 and rows + 1). */
    for (int y = 1; y <= rows; y++)
        for (int x = 1; x < NX - 1; x++)
            out[y * NX + x] = 0.25 * (in[(y - 1) * NX + x] + in[(y + 1) * NX + x] + in[y * NX + x - 1] + in[y * NX + x + 1]);
}

static void initial(double *grid, int first_row, int rows) {
    for (int y = 0; y < rows; y++)
        for (int x = 0; x < NX; x++) {
            int gy = first_row + y;
            grid[y * NX + x] = (gy == 0 || gy == NY - 1 || x == 0 || x == NX - 1) ? 0.0 : (gy > NY / 3 && gy < NY / 2 && x > NX / 4 && x < NX / 2) ? 100.0 : 1.0;
        }
}

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    if (NY % npes != 0) {
        if (me == 0) fprintf(stderr, "heat2d: %d PEs do not divide %d rows\n", npes, NY);
        shmem_global_exit(2);
    }
    int rows = NY / npes, first = me * rows;
    size_t bytes = (size_t)(rows + 2) * NX * sizeof(double);
    double *a = shmem_malloc(bytes), *b = shmem_malloc(bytes);
    /* Two halo rows per parity: received rows land here, then are copied in. */
    double *halo = shmem_malloc(4 * NX * sizeof(double));
    initial(a + NX, first, rows);
    memcpy(b, a, bytes);
    shmem_barrier_all();
    for (int t = 0; t < STEPS; t++) {
        int p = t % 2;
        /* My first owned row goes to the PE above (its bottom halo), my last to the PE below. */
        if (me > 0)
            shmem_double_put_signal(&halo[(2 * p + 1) * NX], &a[NX], NX, &halo_signal[p][1], (uint64_t)t + 1, SHMEM_SIGNAL_SET, me - 1);
        if (me < npes - 1)
            shmem_double_put_signal(&halo[(2 * p) * NX], &a[rows * NX], NX, &halo_signal[p][0], (uint64_t)t + 1, SHMEM_SIGNAL_SET, me + 1);
        if (me > 0) {
            shmem_signal_wait_until(&halo_signal[p][0], SHMEM_CMP_EQ, (uint64_t)t + 1);
            memcpy(&a[0], &halo[(2 * p) * NX], NX * sizeof(double));
        }
        if (me < npes - 1) {
            shmem_signal_wait_until(&halo_signal[p][1], SHMEM_CMP_EQ, (uint64_t)t + 1);
            memcpy(&a[(rows + 1) * NX], &halo[(2 * p + 1) * NX], NX * sizeof(double));
        }
        step(a, b, rows);
        /* Fixed boundary rows keep their values. */
        if (first == 0) memcpy(&b[NX], &a[NX], NX * sizeof(double));
        if (first + rows == NY) memcpy(&b[rows * NX], &a[rows * NX], NX * sizeof(double));
        double *swap = a;
        a = b;
        b = swap;
    }
    double *all = shmem_malloc((size_t)NY * NX * sizeof(double));
    shmem_double_fcollect(SHMEM_TEAM_WORLD, all, a + NX, (size_t)rows * NX);
    /* Serial reference. */
    double *s = calloc((NY + 2) * NX, sizeof(double)), *t2 = calloc((NY + 2) * NX, sizeof(double));
    initial(s + NX, 0, NY);
    memcpy(t2, s, (NY + 2) * NX * sizeof(double));
    for (int t = 0; t < STEPS; t++) {
        step(s, t2, NY);
        memcpy(&t2[NX], &s[NX], NX * sizeof(double));
        memcpy(&t2[NY * NX], &s[NY * NX], NX * sizeof(double));
        double *swap = s;
        s = t2;
        t2 = swap;
    }
    int bad = memcmp(all, s + NX, (size_t)NY * NX * sizeof(double)) != 0;
    double total = 0;
    for (int i = 0; i < NY * NX; i++) total += all[i];
    printf("heat2d: PE %d of %d: %d steps, heat %.6f, %s\n", me, npes, STEPS, total, bad ? "DIFFERS from serial" : "equals serial");
    shmem_free(all);
    shmem_free(halo);
    shmem_free(b);
    shmem_free(a);
    free(s);
    free(t2);
    shmem_finalize();
    return bad;
}
