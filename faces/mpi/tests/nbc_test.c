/* The v-collectives and the nonblocking collectives (MPI-5.0 6.5-6.8,
 * 6.12), checked against what each member must hold: gatherv, scatterv,
 * allgatherv, alltoallv with uneven counts and gaps, alltoallw with a
 * strided type, in place too; Ibarrier (not complete before the last
 * member arrives), Ibcast of a strided type, Igather, Iscatter, Iallgather,
 * Ialltoall, Ireduce, Iallreduce, Iscan, Iexscan, Ireduce_scatter_block
 * and Ireduce_scatter with a non-commutative user operation (rank order),
 * several in flight at once completed by Waitall in reverse and by Test
 * loops, and point-to-point traffic interleaved with a collective in
 * flight; on COMM_WORLD and on a communicator split in two. */
#define _DEFAULT_SOURCE /* usleep */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* Element i of member r's contribution. */
static int val(int r, int i) { return 1000 * r + i; }

static void vcoll(MPI_Comm comm) {
    int r, n;
    OK(MPI_Comm_rank(comm, &r));
    OK(MPI_Comm_size(comm, &n));
    /* Member i sends i + 1 elements; the root leaves a gap of 2 between blocks. */
    int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n);
    int total = 0;
    for (int i = 0; i < n; i++) {
        counts[i] = i + 1;
        displs[i] = total;
        total += counts[i] + 2;
    }
    int *mine = malloc(sizeof(int) * (r + 1)), *all = malloc(sizeof(int) * total);
    for (int i = 0; i <= r; i++) mine[i] = val(r, i);
    for (int root = 0; root < n; root++) {
        for (int i = 0; i < total; i++) all[i] = -7;
        OK(MPI_Gatherv(mine, r + 1, MPI_INT, all, counts, displs, MPI_INT, root, comm));
        if (r == root)
            for (int i = 0; i < n; i++) {
                for (int k = 0; k < counts[i]; k++)
                    CHECK(all[displs[i] + k] == val(i, k), "gatherv root %d block %d[%d] = %d", root, i, k,
                          all[displs[i] + k]);
                CHECK(all[displs[i] + counts[i]] == -7, "gatherv wrote into the gap after block %d", i);
            }
        /* Scatterv back what was gathered. */
        int *back = calloc((size_t)r + 1, sizeof(int));
        OK(MPI_Scatterv(all, counts, displs, MPI_INT, back, r + 1, MPI_INT, root, comm));
        for (int k = 0; k <= r; k++) CHECK(back[k] == val(r, k), "scatterv root %d element %d = %d", root, k, back[k]);
        free(back);
    }
    /* Scatterv from data the root makes itself. */
    for (int i = 0; i < total; i++) all[i] = (r == 0) ? i * 3 : -1;
    int *got = malloc(sizeof(int) * (r + 1));
    OK(MPI_Scatterv(all, counts, displs, MPI_INT, got, r + 1, MPI_INT, 0, comm));
    for (int k = 0; k <= r; k++) CHECK(got[k] == (displs[r] + k) * 3, "scatterv element %d = %d", k, got[k]);
    /* Allgatherv, then in place. */
    for (int i = 0; i < total; i++) all[i] = -7;
    OK(MPI_Allgatherv(mine, r + 1, MPI_INT, all, counts, displs, MPI_INT, comm));
    for (int i = 0; i < n; i++)
        for (int k = 0; k < counts[i]; k++) CHECK(all[displs[i] + k] == val(i, k), "allgatherv block %d", i);
    for (int i = 0; i < total; i++) all[i] = -7;
    for (int k = 0; k <= r; k++) all[displs[r] + k] = val(r, k);
    OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_INT, comm));
    for (int i = 0; i < n; i++)
        for (int k = 0; k < counts[i]; k++) CHECK(all[displs[i] + k] == val(i, k), "in-place allgatherv block %d", i);
    /* Alltoallv: r sends j + 1 elements to j (values 100 r + j), receives r + 1 from each. */
    int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n), *rc = malloc(sizeof(int) * n),
        *rd = malloc(sizeof(int) * n);
    int stot = 0, rtot = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = j + 1;
        sd[j] = stot;
        stot += sc[j] + 1;
        rc[j] = r + 1;
        rd[j] = rtot;
        rtot += rc[j] + 1;
    }
    int *sb = malloc(sizeof(int) * stot), *rb = malloc(sizeof(int) * rtot);
    for (int j = 0; j < n; j++)
        for (int k = 0; k < sc[j]; k++) sb[sd[j] + k] = 100 * r + j + 10000 * k;
    for (int i = 0; i < rtot; i++) rb[i] = -7;
    OK(MPI_Alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, comm));
    for (int j = 0; j < n; j++) {
        for (int k = 0; k < rc[j]; k++)
            CHECK(rb[rd[j] + k] == 100 * j + r + 10000 * k, "alltoallv from %d[%d] = %d", j, k, rb[rd[j] + k]);
        CHECK(rb[rd[j] + rc[j]] == -7, "alltoallv wrote into a gap");
    }
    /* Alltoallw: to each member two ints as a strided column of a 2 x 2
     * array, received as two contiguous ints (byte displacements). */
    MPI_Datatype column;
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &column));
    OK(MPI_Type_commit(&column));
    int *wsend = malloc(sizeof(int) * 4 * n), *wrecv = malloc(sizeof(int) * 2 * n);
    int *one = malloc(sizeof(int) * n), *two = malloc(sizeof(int) * n), *sdb = malloc(sizeof(int) * n),
        *rdb = malloc(sizeof(int) * n);
    MPI_Datatype *stypes = malloc(sizeof(MPI_Datatype) * n), *rtypes = malloc(sizeof(MPI_Datatype) * n);
    for (int j = 0; j < n; j++) {
        for (int k = 0; k < 4; k++) wsend[4 * j + k] = 10 * r + j + 100 * k;
        one[j] = 1;
        two[j] = 2;
        sdb[j] = 4 * j * (int)sizeof(int);
        rdb[j] = 2 * j * (int)sizeof(int);
        stypes[j] = column;
        rtypes[j] = MPI_INT;
    }
    OK(MPI_Alltoallw(wsend, one, sdb, stypes, wrecv, two, rdb, rtypes, comm));
    for (int j = 0; j < n; j++) {
        CHECK(wrecv[2 * j] == 10 * j + r, "alltoallw from %d, element 0 = %d", j, wrecv[2 * j]);
        CHECK(wrecv[2 * j + 1] == 10 * j + r + 200, "alltoallw from %d, element 1 = %d", j, wrecv[2 * j + 1]);
    }
    /* Alltoallv in place: each member's block of one int swapped. */
    int *inplace = malloc(sizeof(int) * n), *ones = malloc(sizeof(int) * n), *idx = malloc(sizeof(int) * n);
    for (int j = 0; j < n; j++) {
        inplace[j] = 100 * r + j;
        ones[j] = 1;
        idx[j] = j;
    }
    OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, inplace, ones, idx, MPI_INT, comm));
    for (int j = 0; j < n; j++) CHECK(inplace[j] == 100 * j + r, "in-place alltoallv from %d = %d", j, inplace[j]);
    OK(MPI_Type_free(&column));
    free(counts), free(displs), free(mine), free(all), free(got), free(sc), free(sd), free(rc), free(rd), free(sb);
    free(rb), free(wsend), free(wrecv), free(one), free(two), free(sdb), free(rdb), free(stypes), free(rtypes);
    free(inplace), free(ones), free(idx);
}

/* A non-commutative operation: 2x2 integer matrix product (mod 1009). */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    int *a = in, *b = inout;
    for (int e = 0; e < *len; e++, a += 4, b += 4) {
        int c[4] = {(a[0] * b[0] + a[1] * b[2]) % 1009, (a[0] * b[1] + a[1] * b[3]) % 1009,
                    (a[2] * b[0] + a[3] * b[2]) % 1009, (a[2] * b[1] + a[3] * b[3]) % 1009};
        memcpy(b, c, sizeof c);
    }
}

static void mat_of(int r, int *m) {
    m[0] = r + 1, m[1] = 2, m[2] = r % 3, m[3] = 1;
}

/* m_lo * ... * m_hi (identity when lo > hi). */
static void mat_range(int lo, int hi, int *out) {
    int acc[4] = {1, 0, 0, 1};
    for (int i = hi; i >= lo; i--) {
        int m[4], len = 1;
        mat_of(i, m);
        matmul(m, acc, &len, NULL);
    }
    memcpy(out, acc, sizeof acc);
}

static void nbc(MPI_Comm comm) {
    int r, n;
    OK(MPI_Comm_rank(comm, &r));
    OK(MPI_Comm_size(comm, &n));
    /* Ibarrier: the last member sleeps first; nobody may finish before it arrives. */
    double t0 = MPI_Wtime();
    if (r == n - 1) usleep(100000);
    MPI_Request req;
    OK(MPI_Ibarrier(comm, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(n == 1 || MPI_Wtime() - t0 > 0.09, "Ibarrier completed %.3f s in, before the late member came", MPI_Wtime() - t0);
    CHECK(req == MPI_REQUEST_NULL, "Wait did not free the request");

    /* Several in flight at once, completed in reverse order. */
    MPI_Datatype pair, mat;
    OK(MPI_Type_vector(2, 1, 3, MPI_INT, &pair)); /* ints 0 and 3 of every 6 */
    OK(MPI_Type_create_resized(pair, 0, 6 * sizeof(int), &pair));
    OK(MPI_Type_commit(&pair));
    OK(MPI_Type_contiguous(4, MPI_INT, &mat));
    OK(MPI_Type_commit(&mat));
    MPI_Op op;
    OK(MPI_Op_create(matmul, 0, &op));
    int root = n / 2;
    int bc[12], gat_in[2], *gat = malloc(sizeof(int) * 2 * n), *sca = malloc(sizeof(int) * n), sca_out = -1;
    int *ag = malloc(sizeof(int) * n), *a2a_in = malloc(sizeof(int) * n), *a2a = malloc(sizeof(int) * n);
    int m[4], red[4], all[4], scan[4], exscan[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 12; i++) bc[i] = r == root ? 50 + i : -1;
    gat_in[0] = r, gat_in[1] = -r;
    for (int i = 0; i < n; i++) {
        sca[i] = r == root ? 7 * i : -1;
        a2a_in[i] = 100 * r + i;
    }
    mat_of(r, m);
    MPI_Request reqs[10];
    OK(MPI_Ibcast(bc, 2, pair, root, comm, &reqs[0]));
    OK(MPI_Igather(gat_in, 2, MPI_INT, gat, 2, MPI_INT, root, comm, &reqs[1]));
    OK(MPI_Iscatter(sca, 1, MPI_INT, &sca_out, 1, MPI_INT, root, comm, &reqs[2]));
    OK(MPI_Iallgather(&r, 1, MPI_INT, ag, 1, MPI_INT, comm, &reqs[3]));
    OK(MPI_Ialltoall(a2a_in, 1, MPI_INT, a2a, 1, MPI_INT, comm, &reqs[4]));
    OK(MPI_Ireduce(m, red, 1, mat, op, root, comm, &reqs[5]));
    OK(MPI_Iallreduce(m, all, 1, mat, op, comm, &reqs[6]));
    OK(MPI_Iscan(m, scan, 1, mat, op, comm, &reqs[7]));
    OK(MPI_Iexscan(m, exscan, 1, mat, op, comm, &reqs[8]));
    /* Point-to-point on the same communicator while they are in flight. */
    int token = r, from = -1;
    OK(MPI_Sendrecv(&token, 1, MPI_INT, (r + 1) % n, 5, &from, 1, MPI_INT, (r + n - 1) % n, 5, comm,
                    MPI_STATUS_IGNORE));
    CHECK(from == (r + n - 1) % n, "sendrecv among collectives got %d", from);
    OK(MPI_Ibarrier(comm, &reqs[9]));
    for (int i = 9; i >= 0; i--) OK(MPI_Wait(&reqs[i], MPI_STATUS_IGNORE));
    for (int e = 0; e < 2; e++) {
        CHECK(bc[6 * e] == 50 + 6 * e && bc[6 * e + 3] == 50 + 6 * e + 3, "Ibcast element %d", e);
        if (r != root) CHECK(bc[6 * e + 1] == -1, "Ibcast wrote into a gap");
    }
    if (r == root)
        for (int i = 0; i < n; i++) CHECK(gat[2 * i] == i && gat[2 * i + 1] == -i, "Igather block %d", i);
    CHECK(sca_out == 7 * r, "Iscatter got %d", sca_out);
    for (int i = 0; i < n; i++) {
        CHECK(ag[i] == i, "Iallgather block %d = %d", i, ag[i]);
        CHECK(a2a[i] == 100 * i + r, "Ialltoall from %d = %d", i, a2a[i]);
    }
    int ref[4];
    mat_range(0, n - 1, ref);
    if (r == root) CHECK(memcmp(red, ref, sizeof ref) == 0, "Ireduce: not the rank-ordered product");
    CHECK(memcmp(all, ref, sizeof ref) == 0, "Iallreduce: not the rank-ordered product");
    mat_range(0, r, ref);
    CHECK(memcmp(scan, ref, sizeof ref) == 0, "Iscan: not the product of ranks 0..%d", r);
    if (r > 0) {
        mat_range(0, r - 1, ref);
        CHECK(memcmp(exscan, ref, sizeof ref) == 0, "Iexscan: not the product of ranks 0..%d", r - 1);
    }

    /* Ireduce_scatter(_block) with SUM, completed by a Test loop, in place too. */
    int *rs_in = malloc(sizeof(int) * 2 * n), rs_out[2] = {0, 0}, *rcounts = malloc(sizeof(int) * n);
    for (int i = 0; i < 2 * n; i++) rs_in[i] = r + i;
    for (int i = 0; i < n; i++) rcounts[i] = 2;
    OK(MPI_Ireduce_scatter_block(rs_in, rs_out, 2, MPI_INT, MPI_SUM, comm, &req));
    int flag = 0;
    while (!flag) OK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    for (int k = 0; k < 2; k++)
        CHECK(rs_out[k] == n * (n - 1) / 2 + n * (2 * r + k), "Ireduce_scatter_block element %d = %d", k, rs_out[k]);
    OK(MPI_Ireduce_scatter(MPI_IN_PLACE, rs_in, rcounts, MPI_INT, MPI_SUM, comm, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    for (int k = 0; k < 2; k++)
        CHECK(rs_in[k] == n * (n - 1) / 2 + n * (2 * r + k), "in-place Ireduce_scatter element %d = %d", k, rs_in[k]);
    /* A nonblocking v-form and a blocking collective while it is in flight. */
    int *vc = malloc(sizeof(int) * n), *vd = malloc(sizeof(int) * n), *vout = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) vc[i] = 1, vd[i] = n - 1 - i;
    OK(MPI_Iallgatherv(&r, 1, MPI_INT, vout, vc, vd, MPI_INT, comm, &req));
    int sum = 0;
    OK(MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, comm));
    CHECK(sum == n * (n - 1) / 2, "allreduce while an Iallgatherv is in flight");
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) CHECK(vout[n - 1 - i] == i, "Iallgatherv reversed block %d", i);
    OK(MPI_Op_free(&op));
    OK(MPI_Type_free(&pair));
    OK(MPI_Type_free(&mat));
    free(gat), free(sca), free(ag), free(a2a_in), free(a2a), free(rs_in), free(rcounts), free(vc), free(vd), free(vout);
}

int main(int argc, char **argv) {
    START(argc, argv);
    vcoll(MPI_COMM_WORLD);
    nbc(MPI_COMM_WORLD);
    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &half));
    vcoll(half);
    nbc(half);
    OK(MPI_Comm_free(&half));
    PASSED("nbc_test");
    return 0;
}
