/* Datatypes (MPI-5.0 chapter 5): every constructor here round-trips data
 * through send/recv (into a different layout of the same type signature)
 * and through pack/unpack; sizes, extents, true extents, counts and
 * elements are as the standard defines them. */
#include <stddef.h>
#include <string.h>

#include "check.h"

enum { N = 64 };
static double src[N * N], dst[N * N];

static void fill(void) {
    for (int i = 0; i < N * N; i++) {
        src[i] = i + 0.5;
        dst[i] = -1;
    }
}

/* Sends `count` of `type` from src to oneself (through memwire, shared
 * memory or UDP) into dst with the same type; checks every byte the type
 * covers arrived and no other moved. */
static void roundtrip(MPI_Datatype type, int count, const char *what) {
    fill();
    MPI_Request req;
    MPI_Status st;
    OK(MPI_Irecv(dst, count, type, 0, 77, MPI_COMM_SELF, &req));
    OK(MPI_Send(src, count, type, 0, 77, MPI_COMM_SELF));
    OK(MPI_Wait(&req, &st));
    int got;
    OK(MPI_Get_count(&st, type, &got));
    CHECK(got == count, "%s: count %d", what, got);
    /* Pack/unpack gives the same picture. */
    static double packed[N * N], again[N * N];
    int size, pos = 0;
    OK(MPI_Pack_size(count, type, MPI_COMM_SELF, &size));
    OK(MPI_Pack(src, count, type, packed, (int)sizeof packed, &pos, MPI_COMM_SELF));
    CHECK(pos == size, "%s: packed %d of %d", what, pos, size);
    for (int i = 0; i < N * N; i++) again[i] = -1;
    pos = 0;
    OK(MPI_Unpack(packed, size, &pos, again, count, type, MPI_COMM_SELF));
    int moved = 0;
    for (int i = 0; i < N * N; i++) {
        CHECK(dst[i] == -1 || dst[i] == src[i], "%s: element %d is %g", what, i, dst[i]);
        CHECK(again[i] == dst[i], "%s: unpack differs at %d", what, i);
        moved += dst[i] != -1;
    }
    int tsize;
    OK(MPI_Type_size(type, &tsize));
    CHECK(moved * (int)sizeof(double) == count * tsize, "%s: %d doubles moved for size %d x %d", what, moved, count,
          tsize);
}

static void test_constructors(void) {
    MPI_Datatype t;
    MPI_Aint lb, extent;

    OK(MPI_Type_contiguous(5, MPI_DOUBLE, &t));
    OK(MPI_Type_commit(&t));
    OK(MPI_Type_get_extent(t, &lb, &extent));
    CHECK(lb == 0 && extent == 40, "contiguous extent %ld", (long)extent);
    roundtrip(t, 3, "contiguous");
    OK(MPI_Type_free(&t));
    CHECK(t == MPI_DATATYPE_NULL, "type_free did not null");

    /* A column of an N x N matrix. */
    OK(MPI_Type_vector(N, 1, N, MPI_DOUBLE, &t));
    OK(MPI_Type_commit(&t));
    OK(MPI_Type_get_extent(t, &lb, &extent));
    CHECK(extent == (MPI_Aint)(((N - 1) * N + 1) * sizeof(double)), "vector extent %ld", (long)extent);
    roundtrip(t, 1, "vector");
    fill();
    MPI_Status st;
    /* A column sent lands as a contiguous row. */
    OK(MPI_Sendrecv(src + 3, 1, t, 0, 1, dst, N, MPI_DOUBLE, 0, 1, MPI_COMM_SELF, &st));
    for (int i = 0; i < N; i++) CHECK(dst[i] == src[i * N + 3], "column element %d", i);
    int elems;
    OK(MPI_Get_elements(&st, t, &elems));
    CHECK(elems == N, "elements %d", elems);
    OK(MPI_Type_free(&t));

    OK(MPI_Type_create_hvector(4, 3, 10 * sizeof(double), MPI_DOUBLE, &t));
    OK(MPI_Type_commit(&t));
    roundtrip(t, 2, "hvector");
    OK(MPI_Type_free(&t));

    int bl[3] = {2, 1, 4}, disp[3] = {0, 5, 11};
    OK(MPI_Type_indexed(3, bl, disp, MPI_DOUBLE, &t));
    OK(MPI_Type_commit(&t));
    MPI_Aint tlb, textent;
    OK(MPI_Type_get_true_extent(t, &tlb, &textent));
    CHECK(tlb == 0 && textent == 15 * (MPI_Aint)sizeof(double), "indexed true extent %ld", (long)textent);
    roundtrip(t, 3, "indexed");
    OK(MPI_Type_free(&t));

    MPI_Aint hdisp[3] = {8, 64, 200};
    OK(MPI_Type_create_hindexed(3, bl, hdisp, MPI_DOUBLE, &t));
    OK(MPI_Type_commit(&t));
    roundtrip(t, 2, "hindexed");
    OK(MPI_Type_free(&t));

    int bdisp[4] = {1, 7, 3, 20};
    OK(MPI_Type_create_indexed_block(4, 2, bdisp, MPI_DOUBLE, &t));
    OK(MPI_Type_commit(&t));
    roundtrip(t, 2, "indexed_block");
    OK(MPI_Type_free(&t));

    /* A struct of an int and a double, as the compiler lays it out. */
    struct pair { int i; double d; } ps[4], pr[4];
    int sbl[2] = {1, 1};
    MPI_Aint sdisp[2] = {offsetof(struct pair, i), offsetof(struct pair, d)};
    MPI_Datatype stypes[2] = {MPI_INT, MPI_DOUBLE}, st_pair, resized;
    OK(MPI_Type_create_struct(2, sbl, sdisp, stypes, &st_pair));
    OK(MPI_Type_create_resized(st_pair, 0, sizeof(struct pair), &resized));
    OK(MPI_Type_commit(&resized));
    OK(MPI_Type_get_extent(resized, &lb, &extent));
    CHECK(extent == sizeof(struct pair), "resized extent %ld", (long)extent);
    int ssize;
    OK(MPI_Type_size(resized, &ssize));
    CHECK(ssize == sizeof(int) + sizeof(double), "struct size %d", ssize);
    for (int k = 0; k < 4; k++) ps[k] = (struct pair){k * 3, k * 1.25};
    memset(pr, 0, sizeof pr);
    OK(MPI_Sendrecv(ps, 4, resized, 0, 2, pr, 4, resized, 0, 2, MPI_COMM_SELF, MPI_STATUS_IGNORE));
    for (int k = 0; k < 4; k++) CHECK(pr[k].i == k * 3 && pr[k].d == k * 1.25, "struct element %d", k);
    OK(MPI_Type_free(&st_pair));
    OK(MPI_Type_free(&resized));

    /* A 3x4 block at (2, 5) of the N x N matrix, C order. */
    int sizes[2] = {N, N}, subs[2] = {3, 4}, starts[2] = {2, 5};
    OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_DOUBLE, &t));
    OK(MPI_Type_commit(&t));
    OK(MPI_Type_get_extent(t, &lb, &extent));
    CHECK(lb == 0 && extent == N * N * (MPI_Aint)sizeof(double), "subarray extent %ld", (long)extent);
    roundtrip(t, 1, "subarray");
    fill();
    OK(MPI_Sendrecv(src, 1, t, 0, 3, dst, 12, MPI_DOUBLE, 0, 3, MPI_COMM_SELF, MPI_STATUS_IGNORE));
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) CHECK(dst[r * 4 + c] == src[(2 + r) * N + 5 + c], "subarray (%d, %d)", r, c);
    OK(MPI_Type_free(&t));

    OK(MPI_Type_dup(MPI_INT, &t));
    int isize;
    OK(MPI_Type_size(t, &isize));
    CHECK(isize == sizeof(int), "dup size");
    OK(MPI_Type_free(&t));
}

/* Between ranks: rank 0 sends a strided column to every other rank, which
 * receives it contiguously and sends it back the same way. */
static void test_between_ranks(void) {
    MPI_Datatype column;
    OK(MPI_Type_vector(N, 1, N, MPI_DOUBLE, &column));
    OK(MPI_Type_commit(&column));
    fill();
    if (me == 0) {
        for (int r = 1; r < np; r++) {
            OK(MPI_Send(src + r, 1, column, r, 5, MPI_COMM_WORLD));
            OK(MPI_Recv(dst + r, 1, column, r, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            for (int i = 0; i < N; i++) CHECK(dst[i * N + r] == src[i * N + r] * 2, "column %d row %d", r, i);
        }
    } else {
        double col[N];
        OK(MPI_Recv(col, N, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++) {
            CHECK(col[i] == src[i * N + me], "received column element %d", i);
            col[i] *= 2;
        }
        OK(MPI_Send(col, N, MPI_DOUBLE, 0, 6, MPI_COMM_WORLD));
    }
    OK(MPI_Type_free(&column));
}

/* Every predefined C type has the size of its C type. */
static void test_predefined(void) {
    struct { MPI_Datatype t; int size; } types[] = {
        {MPI_CHAR, 1}, {MPI_SHORT, sizeof(short)}, {MPI_INT, sizeof(int)}, {MPI_LONG, sizeof(long)},
        {MPI_LONG_LONG, sizeof(long long)}, {MPI_UNSIGNED_CHAR, 1}, {MPI_UNSIGNED, sizeof(unsigned)},
        {MPI_FLOAT, sizeof(float)}, {MPI_DOUBLE, sizeof(double)}, {MPI_LONG_DOUBLE, sizeof(long double)},
        {MPI_C_BOOL, sizeof(_Bool)}, {MPI_INT8_T, 1}, {MPI_UINT64_T, 8}, {MPI_C_DOUBLE_COMPLEX, 16},
        {MPI_AINT, sizeof(MPI_Aint)}, {MPI_COUNT, 8}, {MPI_BYTE, 1}, {MPI_2INT, 2 * sizeof(int)},
        {MPI_DOUBLE_INT, sizeof(double) + sizeof(int)},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int size;
        OK(MPI_Type_size(types[i].t, &size));
        CHECK(size == types[i].size, "type %zu: size %d, want %d", i, size, types[i].size);
    }
    MPI_Aint lb, extent;
    OK(MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &extent));
    CHECK(extent == sizeof(struct { double d; int i; }), "DOUBLE_INT extent %ld", (long)extent);
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Type_get_name(MPI_FLOAT, name, &len));
    CHECK(strcmp(name, "MPI_FLOAT") == 0, "name '%s'", name);
}

int main(int argc, char **argv) {
    START(argc, argv);
    test_predefined();
    test_constructors();
    test_between_ranks();
    PASSED("dtype_test");
    return 0;
}
