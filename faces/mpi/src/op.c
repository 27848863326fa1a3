/*
 * op.c: reduction operations (MPI-5.0 6.9): the predefined operations on
 * the types they apply to (6.9.2: integer, floating point, logical,
 * complex, byte; MINLOC/MAXLOC on the value-index pairs), user
 * operations (Op_create, Op_free, Op_commutative), and Reduce_local.
 * Which reductions memwire's own collectives can do is decided here too.
 */
#include <complex.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define OP_BASE 0x20
#define OP_COUNT 0x20
static struct mwmpi_op predefined[OP_COUNT];

void mwmpi_ops_init(void) {
    static const MPI_Op all[] = {MPI_SUM,  MPI_MIN,  MPI_MAX,  MPI_PROD,   MPI_BAND,   MPI_BOR,     MPI_BXOR,
                                 MPI_LAND, MPI_LOR,  MPI_LXOR, MPI_MINLOC, MPI_MAXLOC, MPI_REPLACE, MPI_NO_OP};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        struct mwmpi_op *op = &predefined[(uintptr_t)all[i] - OP_BASE];
        op->obj.magic = MWMPI_MAGIC_OP;
        op->obj.id = (int)(uintptr_t)all[i];
        op->handle = all[i];
        op->commutative = true;
    }
}

struct mwmpi_op *mwmpi_op_of(MPI_Op h) {
    uintptr_t v = (uintptr_t)h;
    if (v >= OP_BASE && v < OP_BASE + OP_COUNT) {
        struct mwmpi_op *op = &predefined[v - OP_BASE];
        return op->obj.magic == MWMPI_MAGIC_OP ? op : NULL;
    }
    if (v < MWMPI_PREDEFINED_LIMIT) return NULL;
    struct mwmpi_op *op = (struct mwmpi_op *)h;
    return op->obj.magic == MWMPI_MAGIC_OP ? op : NULL;
}

enum group { G_NONE, G_INT, G_FLOAT, G_COMPLEX, G_LOGICAL, G_BYTE, G_PAIR };

static enum group group_of(enum mwmpi_kind k) {
    switch (k) {
    case K_I8: case K_U8: case K_I16: case K_U16: case K_I32: case K_U32: case K_I64: case K_U64: return G_INT;
    case K_F32: case K_F64: case K_LDBL: return G_FLOAT;
    case K_C32: case K_C64: case K_CLDBL: return G_COMPLEX;
    case K_BOOL: case K_LOG4: return G_LOGICAL;
    case K_BYTE: return G_BYTE;
    case K_FLOAT_INT: case K_DOUBLE_INT: case K_LONG_INT: case K_2INT: case K_SHORT_INT: case K_LDBL_INT: return G_PAIR;
    default: return G_NONE;
    }
}

int mwmpi_op_check(const struct mwmpi_op *op, const struct mwmpi_type *t) {
    if (op->user != NULL) return MPI_SUCCESS;
    MPI_Op h = op->handle;
    if (h == MPI_REPLACE || h == MPI_NO_OP) return MPI_SUCCESS;
    enum group g = group_of(t->kind);
    bool ok;
    if (h == MPI_SUM || h == MPI_PROD) ok = g == G_INT || g == G_FLOAT || g == G_COMPLEX;
    else if (h == MPI_MIN || h == MPI_MAX) ok = g == G_INT || g == G_FLOAT;
    else if (h == MPI_LAND || h == MPI_LOR || h == MPI_LXOR) ok = g == G_INT || g == G_LOGICAL;
    else if (h == MPI_BAND || h == MPI_BOR || h == MPI_BXOR) ok = g == G_INT || g == G_BYTE;
    else ok = g == G_PAIR; /* MINLOC, MAXLOC */
    return ok ? MPI_SUCCESS : MPI_ERR_OP;
}

/* Element-wise kernels: inout[i] = in[i] op inout[i]. */
#define ARITH(T, in, io, n, h)                                                           \
    do {                                                                                 \
        const T *a = (const T *)(in);                                                    \
        T *b = (T *)(io);                                                                \
        if (h == MPI_SUM) for (size_t i = 0; i < n; i++) b[i] = a[i] + b[i];             \
        else if (h == MPI_PROD) for (size_t i = 0; i < n; i++) b[i] = a[i] * b[i];       \
        else if (h == MPI_MIN) for (size_t i = 0; i < n; i++) b[i] = a[i] < b[i] ? a[i] : b[i]; \
        else if (h == MPI_MAX) for (size_t i = 0; i < n; i++) b[i] = a[i] > b[i] ? a[i] : b[i]; \
        else if (h == MPI_LAND) for (size_t i = 0; i < n; i++) b[i] = (a[i] != 0) && (b[i] != 0); \
        else if (h == MPI_LOR) for (size_t i = 0; i < n; i++) b[i] = (a[i] != 0) || (b[i] != 0); \
        else if (h == MPI_LXOR) for (size_t i = 0; i < n; i++) b[i] = (a[i] != 0) != (b[i] != 0); \
    } while (0)

#define BITS(T, in, io, n, h)                                                            \
    do {                                                                                 \
        const T *a = (const T *)(in);                                                    \
        T *b = (T *)(io);                                                                \
        if (h == MPI_BAND) for (size_t i = 0; i < n; i++) b[i] = a[i] & b[i];            \
        else if (h == MPI_BOR) for (size_t i = 0; i < n; i++) b[i] = a[i] | b[i];        \
        else if (h == MPI_BXOR) for (size_t i = 0; i < n; i++) b[i] = a[i] ^ b[i];       \
        else ARITH(T, in, io, n, h);                                                     \
    } while (0)

#define LOGICAL(T, in, io, n, h)                                                         \
    do {                                                                                 \
        const T *a = (const T *)(in);                                                    \
        T *b = (T *)(io);                                                                \
        if (h == MPI_LAND) for (size_t i = 0; i < n; i++) b[i] = a[i] && b[i];           \
        else if (h == MPI_LOR) for (size_t i = 0; i < n; i++) b[i] = a[i] || b[i];       \
        else if (h == MPI_LXOR) for (size_t i = 0; i < n; i++) b[i] = a[i] != b[i];      \
    } while (0)

#define COMPLEX(T, in, io, n, h)                                                         \
    do {                                                                                 \
        const T *a = (const T *)(in);                                                    \
        T *b = (T *)(io);                                                                \
        if (h == MPI_SUM) for (size_t i = 0; i < n; i++) b[i] = a[i] + b[i];             \
        else for (size_t i = 0; i < n; i++) b[i] = a[i] * b[i];                          \
    } while (0)

/* MINLOC/MAXLOC (MPI-5.0 6.9.4): the smaller (larger) value wins; on a tie
 * the smaller index. Pairs lie `stride` bytes apart. */
#define PAIR(V, in, io, n, h, stride, index_off)                                         \
    do {                                                                                 \
        for (size_t i = 0; i < n; i++) {                                                 \
            const char *pa = (const char *)(in) + i * (stride);                          \
            char *pb = (char *)(io) + i * (stride);                                      \
            V va, vb;                                                                    \
            int ia, ib;                                                                  \
            memcpy(&va, pa, sizeof va);                                                  \
            memcpy(&vb, pb, sizeof vb);                                                  \
            memcpy(&ia, pa + (index_off), sizeof ia);                                    \
            memcpy(&ib, pb + (index_off), sizeof ib);                                    \
            bool a_wins = h == MPI_MINLOC ? va < vb : va > vb;                           \
            if (a_wins || (va == vb && ia < ib)) {                                       \
                memcpy(pb, &va, sizeof va);                                              \
                memcpy(pb + (index_off), &ia, sizeof ia);                                \
            }                                                                            \
        }                                                                                \
    } while (0)

struct pair_float { float v; int i; };
struct pair_double { double v; int i; };
struct pair_long { long v; int i; };
struct pair_short { short v; int i; };
struct pair_ldbl { long double v; int i; };
struct pair_int { int v; int i; };

static void apply_kind(MPI_Op h, enum mwmpi_kind k, const void *in, void *io, size_t n) {
    switch (k) {
    case K_I8: BITS(int8_t, in, io, n, h); break;
    case K_U8: BITS(uint8_t, in, io, n, h); break;
    case K_BYTE: BITS(uint8_t, in, io, n, h); break;
    case K_I16: BITS(int16_t, in, io, n, h); break;
    case K_U16: BITS(uint16_t, in, io, n, h); break;
    case K_I32: BITS(int32_t, in, io, n, h); break;
    case K_U32: BITS(uint32_t, in, io, n, h); break;
    case K_LOG4: BITS(int32_t, in, io, n, h); break;
    case K_I64: BITS(int64_t, in, io, n, h); break;
    case K_U64: BITS(uint64_t, in, io, n, h); break;
    case K_BOOL: LOGICAL(_Bool, in, io, n, h); break;
    case K_F32: ARITH(float, in, io, n, h); break;
    case K_F64: ARITH(double, in, io, n, h); break;
    case K_LDBL: ARITH(long double, in, io, n, h); break;
    case K_C32: COMPLEX(float _Complex, in, io, n, h); break;
    case K_C64: COMPLEX(double _Complex, in, io, n, h); break;
    case K_CLDBL: COMPLEX(long double _Complex, in, io, n, h); break;
#define P(S, V) PAIR(V, in, io, n, h, sizeof(struct S), offsetof(struct S, i))
    case K_FLOAT_INT: P(pair_float, float); break;
    case K_DOUBLE_INT: P(pair_double, double); break;
    case K_LONG_INT: P(pair_long, long); break;
    case K_SHORT_INT: P(pair_short, short); break;
    case K_LDBL_INT: P(pair_ldbl, long double); break;
    case K_2INT: P(pair_int, int); break;
#undef P
    default: break;
    }
}

void mwmpi_op_apply(const struct mwmpi_op *op, const struct mwmpi_type *t, const void *in, void *inout,
                    MPI_Count count) {
    if (count == 0) return;
    if (op->user != NULL) {
        int len = (int)count;
        MPI_Datatype h = t->handle;
        op->user((void *)in, inout, &len, &h);
        return;
    }
    if (op->handle == MPI_NO_OP) return;
    size_t n = (size_t)count * t->kind_count;
    if (op->handle == MPI_REPLACE) {
        memcpy(inout, in, (size_t)((count - 1) * t->extent + t->true_lb + t->true_extent));
        return;
    }
    apply_kind(op->handle, t->kind, in, inout, n);
}

bool mwmpi_op_native(const struct mwmpi_op *op, const struct mwmpi_type *t, mw_dtype *dtype, mw_op *mop) {
    if (op->user != NULL || !mwmpi_type_contiguous(t, 2)) return false;
    MPI_Op h = op->handle;
    static const struct { enum mwmpi_kind k; mw_dtype d; } kinds[] = {
        {K_I8, MW_DTYPE_I8},   {K_U8, MW_DTYPE_U8},   {K_I16, MW_DTYPE_I16}, {K_U16, MW_DTYPE_U16},
        {K_I32, MW_DTYPE_I32}, {K_U32, MW_DTYPE_U32}, {K_I64, MW_DTYPE_I64}, {K_U64, MW_DTYPE_U64},
        {K_F32, MW_DTYPE_F32}, {K_F64, MW_DTYPE_F64}, {K_BYTE, MW_DTYPE_U8},
    };
    bool found = false;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].k == t->kind) {
            *dtype = kinds[i].d;
            found = true;
        }
    if (!found) return false;
    bool is_float = t->kind == K_F32 || t->kind == K_F64;
    if (h == MPI_SUM) *mop = MW_OP_SUM;
    else if (h == MPI_PROD) *mop = MW_OP_PROD;
    else if (h == MPI_MIN) *mop = MW_OP_MIN;
    else if (h == MPI_MAX) *mop = MW_OP_MAX;
    else if (h == MPI_BAND && !is_float) *mop = MW_OP_BAND;
    else if (h == MPI_BOR && !is_float) *mop = MW_OP_BOR;
    else if (h == MPI_BXOR && !is_float) *mop = MW_OP_BXOR;
    else return false;
    return true;
}

int PMPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op) {
    if (user_fn == NULL || op == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Op_create", "NULL argument");
    struct mwmpi_op *o = calloc(1, sizeof *o);
    if (o == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Op_create", NULL);
    mwmpi_obj_register(&o->obj, MWMPI_MAGIC_OP);
    o->handle = (MPI_Op)o;
    o->user = user_fn;
    o->commutative = commute != 0;
    *op = o->handle;
    return MPI_SUCCESS;
}

int PMPI_Op_free(MPI_Op *op) {
    if (op == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Op_free", "NULL argument");
    struct mwmpi_op *o = mwmpi_op_of(*op);
    if (o == NULL || o->user == NULL) return mwmpi_raise(NULL, MPI_ERR_OP, "MPI_Op_free", "not a user operation");
    mwmpi_obj_unregister(&o->obj);
    free(o);
    *op = MPI_OP_NULL;
    return MPI_SUCCESS;
}

int PMPI_Op_commutative(MPI_Op op, int *commute) {
    struct mwmpi_op *o = mwmpi_op_of(op);
    if (o == NULL || commute == NULL) return mwmpi_raise(NULL, MPI_ERR_OP, "MPI_Op_commutative", "invalid operation");
    *commute = o->commutative;
    return MPI_SUCCESS;
}

int PMPI_Reduce_local_c(const void *inbuf, void *inoutbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op) {
    static const char routine[] = "MPI_Reduce_local";
    struct mwmpi_op *o = mwmpi_op_of(op);
    if (o == NULL) return mwmpi_raise(NULL, MPI_ERR_OP, routine, "invalid operation");
    struct mwmpi_type *t;
    int err = mwmpi_type_check(NULL, datatype, routine, &t);
    if (err != MPI_SUCCESS) return err;
    if (mwmpi_op_check(o, t) != MPI_SUCCESS)
        return mwmpi_raise(NULL, MPI_ERR_OP, routine, "the operation does not apply to %s", t->name);
    mwmpi_op_apply(o, t, inbuf, inoutbuf, count);
    return MPI_SUCCESS;
}

int PMPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype, MPI_Op op) {
    return PMPI_Reduce_local_c(inbuf, inoutbuf, count, datatype, op);
}
