/* Collectives (MPI-5.0 chapter 6), checked against serial references:
 * every predefined operation on every C type it applies to (reduce to a
 * root and allreduce, in place too, short and long vectors), MINLOC and
 * MAXLOC, a non-commutative user operation (MPI's rank order), scan and
 * exscan, reduce_scatter_block; barrier, bcast from every root (also of a
 * strided type), gather, scatter, allgather and alltoall, in place too;
 * on COMM_WORLD and on a split communicator. */
#include <complex.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* The reference arithmetic is written once for every type, _Bool included
 * (whose arithmetic operations the tests never use). */
#pragma GCC diagnostic ignored "-Wint-in-bool-context"

static int value(int rank, int i) { return (rank + i) % 3 + 1; }

/* Reduces count elements of type T with every op in `ops` and checks. */
#define REDUCE_CHECK(T, MPIT, comm, ops, nops, count, BITS)                                                     \
    do {                                                                                                  \
        int r_, n_;                                                                                       \
        OK(MPI_Comm_rank(comm, &r_));                                                                     \
        OK(MPI_Comm_size(comm, &n_));                                                                     \
        T *in_ = malloc(sizeof(T) * (count)), *out_ = malloc(sizeof(T) * (count)),                        \
          *ref_ = malloc(sizeof(T) * (count));                                                            \
        for (int o_ = 0; o_ < (nops); o_++) {                                                             \
            MPI_Op op_ = (ops)[o_];                                                                       \
            for (int i_ = 0; i_ < (count); i_++) {                                                        \
                in_[i_] = (T)value(r_, i_);                                                               \
                T acc_ = (T)value(0, i_);                                                                 \
                for (int k_ = 1; k_ < n_; k_++) {                                                         \
                    T x_ = (T)value(k_, i_);                                                              \
                    if (op_ == MPI_SUM) acc_ = acc_ + x_;                                                 \
                    else if (op_ == MPI_PROD) acc_ = acc_ * x_;                                           \
                    else if (op_ == MPI_MIN) acc_ = x_ < acc_ ? x_ : acc_;                                \
                    else if (op_ == MPI_MAX) acc_ = x_ > acc_ ? x_ : acc_;                                \
                    else if (op_ == MPI_LAND) acc_ = acc_ && x_;                                          \
                    else if (op_ == MPI_LOR) acc_ = acc_ || x_;                                           \
                    else if (op_ == MPI_LXOR) acc_ = (acc_ != 0) != (x_ != 0);                            \
                    else BITS(acc_, x_, op_);                                                      \
                }                                                                                         \
                ref_[i_] = acc_;                                                                          \
            }                                                                                             \
            memset(out_, 0x55, sizeof(T) * (count));                                                      \
            OK(MPI_Allreduce(in_, out_, (count), MPIT, op_, comm));                                       \
            for (int i_ = 0; i_ < (count); i_++)                                                          \
                CHECK(out_[i_] == ref_[i_], "%s allreduce op %d element %d", #MPIT, o_, i_);              \
            int root_ = n_ - 1;                                                                           \
            memset(out_, 0x55, sizeof(T) * (count));                                                      \
            OK(MPI_Reduce(in_, out_, (count), MPIT, op_, root_, comm));                                   \
            if (r_ == root_)                                                                              \
                for (int i_ = 0; i_ < (count); i_++)                                                      \
                    CHECK(out_[i_] == ref_[i_], "%s reduce op %d element %d", #MPIT, o_, i_);             \
            OK(MPI_Allreduce(MPI_IN_PLACE, in_, (count), MPIT, op_, comm));                               \
            for (int i_ = 0; i_ < (count); i_++)                                                          \
                CHECK(in_[i_] == ref_[i_], "%s in-place allreduce op %d element %d", #MPIT, o_, i_);      \
        }                                                                                                 \
        free(in_);                                                                                        \
        free(out_);                                                                                       \
        free(ref_);                                                                                       \
    } while (0)

#define BITWISE_REF(acc, x, op)                                                                           \
    do {                                                                                                  \
        if (op == MPI_BAND) acc = acc & x;                                                                \
        else if (op == MPI_BOR) acc = acc | x;                                                            \
        else if (op == MPI_BXOR) acc = acc ^ x;                                                           \
    } while (0)

#define NO_BITS(acc, x, op) (void)0

static const MPI_Op int_ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR,
                                 MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
static const MPI_Op float_ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
static const MPI_Op logical_ops[] = {MPI_LAND, MPI_LOR, MPI_LXOR};
static const MPI_Op byte_ops[] = {MPI_BAND, MPI_BOR, MPI_BXOR};

static void test_reductions(MPI_Comm comm) {
    static const int counts[] = {1, 37, 4000};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int count = counts[c];
        REDUCE_CHECK(int, MPI_INT, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(unsigned, MPI_UNSIGNED, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(long, MPI_LONG, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(long long, MPI_LONG_LONG, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(unsigned long long, MPI_UNSIGNED_LONG_LONG, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(short, MPI_SHORT, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(unsigned short, MPI_UNSIGNED_SHORT, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(signed char, MPI_SIGNED_CHAR, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(unsigned char, MPI_UNSIGNED_CHAR, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(int8_t, MPI_INT8_T, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(uint16_t, MPI_UINT16_T, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(int32_t, MPI_INT32_T, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(uint64_t, MPI_UINT64_T, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(MPI_Aint, MPI_AINT, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(MPI_Count, MPI_COUNT, comm, int_ops, 10, count, BITWISE_REF);
        REDUCE_CHECK(float, MPI_FLOAT, comm, float_ops, 4, count, NO_BITS);
        REDUCE_CHECK(double, MPI_DOUBLE, comm, float_ops, 4, count, NO_BITS);
        REDUCE_CHECK(long double, MPI_LONG_DOUBLE, comm, float_ops, 4, count, NO_BITS);
        REDUCE_CHECK(_Bool, MPI_C_BOOL, comm, logical_ops, 3, count, NO_BITS);
        REDUCE_CHECK(unsigned char, MPI_BYTE, comm, byte_ops, 3, count, BITWISE_REF);
    }
}

static void test_complex_and_loc(MPI_Comm comm) {
    int r, n;
    OK(MPI_Comm_rank(comm, &r));
    OK(MPI_Comm_size(comm, &n));
    double _Complex z = (r + 1) + 1.0 * I, sum, prod, want_sum = 0, want_prod = 1;
    for (int k = 0; k < n; k++) {
        want_sum += (k + 1) + 1.0 * I;
        want_prod *= (k + 1) + 1.0 * I;
    }
    OK(MPI_Allreduce(&z, &sum, 1, MPI_C_DOUBLE_COMPLEX, MPI_SUM, comm));
    OK(MPI_Allreduce(&z, &prod, 1, MPI_C_DOUBLE_COMPLEX, MPI_PROD, comm));
    CHECK(sum == want_sum && prod == want_prod, "complex sum/prod");
    /* MINLOC/MAXLOC: value (r % 2) with ties broken by the smaller index. */
    struct { double v; int i; } d = {(double)(r % 2), r}, dmin, dmax;
    OK(MPI_Allreduce(&d, &dmin, 1, MPI_DOUBLE_INT, MPI_MINLOC, comm));
    OK(MPI_Allreduce(&d, &dmax, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm));
    CHECK(dmin.v == 0 && dmin.i == 0, "minloc %g %d", dmin.v, dmin.i);
    CHECK(dmax.v == (n > 1) && dmax.i == (n > 1 ? 1 : 0), "maxloc %g %d", dmax.v, dmax.i);
    int pair[2] = {100 - r, r}, best[2];
    OK(MPI_Reduce(pair, best, 1, MPI_2INT, MPI_MINLOC, 0, comm));
    if (r == 0) CHECK(best[0] == 100 - (n - 1) && best[1] == n - 1, "2int minloc %d %d", best[0], best[1]);
    int rc;
    OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    rc = MPI_Allreduce(&d, &dmin, 1, MPI_DOUBLE, MPI_BAND, comm);
    CHECK(rc == MPI_ERR_OP, "BAND on doubles gave %d", rc);
    OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL));
}

/* inout = in followed by inout's digits: the result spells the ranks in order. */
static void concat(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    for (int i = 0; i < *len; i++) {
        long a = ((long *)in)[i], b = ((long *)inout)[i], scale = 1;
        while (scale <= b) scale *= 10;
        ((long *)inout)[i] = a * scale + b;
    }
}

static void test_user_op_and_scans(MPI_Comm comm) {
    int r, n;
    OK(MPI_Comm_rank(comm, &r));
    OK(MPI_Comm_size(comm, &n));
    MPI_Op op;
    OK(MPI_Op_create(concat, 0, &op));
    long mine[2] = {r + 1, r + 1}, got[2] = {0, 0}, want = 0;
    for (int k = 0; k < n; k++) want = want * 10 + k + 1;
    OK(MPI_Allreduce(mine, got, 2, MPI_LONG, op, comm));
    CHECK(got[0] == want && got[1] == want, "non-commutative allreduce %ld, want %ld", got[0], want);
    OK(MPI_Scan(mine, got, 1, MPI_LONG, op, comm));
    long prefix = 0;
    for (int k = 0; k <= r; k++) prefix = prefix * 10 + k + 1;
    CHECK(got[0] == prefix, "scan %ld, want %ld", got[0], prefix);
    OK(MPI_Op_free(&op));
    CHECK(op == MPI_OP_NULL, "op_free did not null");
    int one = r + 1, incl, excl = -7;
    OK(MPI_Scan(&one, &incl, 1, MPI_INT, MPI_SUM, comm));
    OK(MPI_Exscan(&one, &excl, 1, MPI_INT, MPI_SUM, comm));
    CHECK(incl == (r + 1) * (r + 2) / 2, "scan sum %d", incl);
    if (r > 0) CHECK(excl == r * (r + 1) / 2, "exscan sum %d", excl);
    int *all = malloc(sizeof(int) * 3 * n), block[3];
    for (int i = 0; i < 3 * n; i++) all[i] = i + r;
    OK(MPI_Reduce_scatter_block(all, block, 3, MPI_INT, MPI_SUM, comm));
    for (int j = 0; j < 3; j++) {
        int i = 3 * r + j, want_sum = n * i + n * (n - 1) / 2;
        CHECK(block[j] == want_sum, "reduce_scatter_block %d: %d want %d", j, block[j], want_sum);
    }
    free(all);
}

static void test_movement(MPI_Comm comm) {
    int r, n;
    OK(MPI_Comm_rank(comm, &r));
    OK(MPI_Comm_size(comm, &n));
    OK(MPI_Barrier(comm));
    for (int root = 0; root < n; root++) {
        int buf[100];
        for (int i = 0; i < 100; i++) buf[i] = r == root ? i * root : -1;
        OK(MPI_Bcast(buf, 100, MPI_INT, root, comm));
        for (int i = 0; i < 100; i++) CHECK(buf[i] == i * root, "bcast from %d element %d", root, i);
    }
    /* A strided bcast: every other int. */
    MPI_Datatype every_other;
    OK(MPI_Type_vector(10, 1, 2, MPI_INT, &every_other));
    OK(MPI_Type_commit(&every_other));
    int strided[20];
    for (int i = 0; i < 20; i++) strided[i] = r == 0 ? i : -1;
    OK(MPI_Bcast(strided, 1, every_other, 0, comm));
    for (int i = 0; i < 20; i++) CHECK(strided[i] == (i % 2 == 0 || r == 0 ? i : -1), "strided bcast %d", i);
    OK(MPI_Type_free(&every_other));

    int *all = malloc(sizeof(int) * 2 * n * n), *back = malloc(sizeof(int) * 2 * n * n), mine[2] = {r, r * r};
    int root = n / 2;
    OK(MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, root, comm));
    if (r == root)
        for (int k = 0; k < n; k++) CHECK(all[2 * k] == k && all[2 * k + 1] == k * k, "gather from %d", k);
    int got[2] = {-1, -1};
    OK(MPI_Scatter(all, 2, MPI_INT, got, 2, MPI_INT, root, comm));
    CHECK(got[0] == r && got[1] == r * r, "scatter to %d", r);
    if (r == root) {
        all[2 * root] = all[2 * root + 1] = -5;
        OK(MPI_Gather(MPI_IN_PLACE, 2, MPI_INT, all, 2, MPI_INT, root, comm));
        CHECK(all[2 * root] == -5, "in-place gather moved root's block");
        OK(MPI_Scatter(all, 2, MPI_INT, MPI_IN_PLACE, 2, MPI_INT, root, comm));
    } else {
        OK(MPI_Gather(mine, 2, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, root, comm));
        OK(MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, got, 2, MPI_INT, root, comm));
    }
    memset(all, 0, sizeof(int) * 2 * n);
    OK(MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, comm));
    for (int k = 0; k < n; k++) CHECK(all[2 * k] == k && all[2 * k + 1] == k * k, "allgather %d", k);
    for (int k = 0; k < n; k++) all[2 * k] = all[2 * k + 1] = k == r ? r : -1;
    OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, comm));
    for (int k = 0; k < n; k++) CHECK(all[2 * k] == k, "in-place allgather %d", k);
    /* Alltoall: block j of rank i holds 100 i + j. */
    for (int j = 0; j < n; j++) all[2 * j] = all[2 * j + 1] = 100 * r + j;
    OK(MPI_Alltoall(all, 2, MPI_INT, back, 2, MPI_INT, comm));
    for (int i = 0; i < n; i++) CHECK(back[2 * i] == 100 * i + r && back[2 * i + 1] == 100 * i + r, "alltoall %d", i);
    OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, comm));
    for (int i = 0; i < n; i++) CHECK(all[2 * i] == 100 * i + r, "in-place alltoall %d", i);
    free(all);
    free(back);
}

int main(int argc, char **argv) {
    START(argc, argv);
    test_movement(MPI_COMM_WORLD);
    test_reductions(MPI_COMM_WORLD);
    test_complex_and_loc(MPI_COMM_WORLD);
    test_user_op_and_scans(MPI_COMM_WORLD);
    /* The same on the upper half of the ranks (reversed), alongside the world. */
    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, me >= np / 2, np - me, &half));
    test_movement(half);
    test_complex_and_loc(half);
    test_user_op_and_scans(half);
    REDUCE_CHECK(int, MPI_INT, half, int_ops, 10, 37, BITWISE_REF);
    OK(MPI_Comm_free(&half));
    PASSED("coll_test");
    return 0;
}
