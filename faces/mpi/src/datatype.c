/*
 * datatype.c: datatypes (MPI-5.0 chapter 5): the predefined types, the
 * constructors (contiguous, vector, hvector, indexed, hindexed,
 * indexed_block, hindexed_block, struct, subarray, resized, dup), commit,
 * free, size, extents, names, addresses, and packing. Every type is kept
 * as the list of byte runs one element covers (type-map order, adjacent
 * runs merged) plus its bounds; packing walks that list.
 */
#include <complex.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "internal.h"

#define PREDEFINED_BASE 0x200
#define PREDEFINED_COUNT 0x100
static struct mwmpi_type predefined[PREDEFINED_COUNT];
/* One block per simple predefined type; two for the value-index pairs. */
static struct mwmpi_block predefined_blocks[PREDEFINED_COUNT][2];

struct pair_float { float v; int i; };
struct pair_double { double v; int i; };
struct pair_long { long v; int i; };
struct pair_short { short v; int i; };
struct pair_ldbl { long double v; int i; };

static void define(MPI_Datatype h, const char *name, size_t size, enum mwmpi_kind kind) {
    int i = (int)((uintptr_t)h - PREDEFINED_BASE);
    struct mwmpi_type *t = &predefined[i];
    t->obj.magic = MWMPI_MAGIC_TYPE;
    t->obj.id = (int)(uintptr_t)h;
    t->handle = h;
    t->size = size;
    t->lb = t->true_lb = 0;
    t->extent = t->true_extent = (MPI_Aint)size;
    predefined_blocks[i][0] = (struct mwmpi_block){0, size};
    t->blocks = predefined_blocks[i];
    t->nblocks = 1;
    t->kind = kind;
    t->kind_count = 1;
    t->combiner = MPI_COMBINER_NAMED;
    t->predefined = t->committed = true;
    t->refs = 1;
    strncpy(t->name, name, sizeof t->name - 1);
}

/* A value-index pair: value at 0, int at `index_off`, extent `extent`. */
static void define_pair(MPI_Datatype h, const char *name, size_t value_size, size_t index_off, size_t extent,
                        enum mwmpi_kind kind) {
    define(h, name, value_size + sizeof(int), kind);
    struct mwmpi_type *t = &predefined[(uintptr_t)h - PREDEFINED_BASE];
    t->extent = t->true_extent = (MPI_Aint)extent;
    if (index_off == value_size) {
        t->blocks[0].len = value_size + sizeof(int);
    } else {
        t->blocks[0].len = value_size;
        t->blocks[1] = (struct mwmpi_block){(MPI_Aint)index_off, sizeof(int)};
        t->nblocks = 2;
        t->true_extent = (MPI_Aint)(index_off + sizeof(int));
    }
}

void mwmpi_types_init(void) {
#define D(h, size, kind) define(h, #h, size, kind)
    D(MPI_AINT, sizeof(MPI_Aint), K_I64);
    D(MPI_COUNT, sizeof(MPI_Count), K_I64);
    D(MPI_OFFSET, sizeof(MPI_Offset), K_I64);
    D(MPI_PACKED, 1, K_NONE);
    D(MPI_SHORT, sizeof(short), K_I16);
    D(MPI_INT, sizeof(int), K_I32);
    D(MPI_LONG, sizeof(long), sizeof(long) == 8 ? K_I64 : K_I32);
    D(MPI_LONG_LONG, sizeof(long long), K_I64);
    D(MPI_UNSIGNED_SHORT, sizeof(unsigned short), K_U16);
    D(MPI_UNSIGNED, sizeof(unsigned), K_U32);
    D(MPI_UNSIGNED_LONG, sizeof(unsigned long), sizeof(long) == 8 ? K_U64 : K_U32);
    D(MPI_UNSIGNED_LONG_LONG, sizeof(unsigned long long), K_U64);
    D(MPI_FLOAT, sizeof(float), K_F32);
    D(MPI_C_FLOAT_COMPLEX, sizeof(float _Complex), K_C32);
    D(MPI_CXX_FLOAT_COMPLEX, sizeof(float _Complex), K_C32);
    D(MPI_DOUBLE, sizeof(double), K_F64);
    D(MPI_C_DOUBLE_COMPLEX, sizeof(double _Complex), K_C64);
    D(MPI_CXX_DOUBLE_COMPLEX, sizeof(double _Complex), K_C64);
    D(MPI_LOGICAL, 4, K_LOG4);
    D(MPI_INTEGER, 4, K_I32);
    D(MPI_REAL, 4, K_F32);
    D(MPI_COMPLEX, 8, K_C32);
    D(MPI_DOUBLE_PRECISION, 8, K_F64);
    D(MPI_DOUBLE_COMPLEX, 16, K_C64);
    D(MPI_CHARACTER, 1, K_NONE);
    D(MPI_LONG_DOUBLE, sizeof(long double), K_LDBL);
    D(MPI_C_LONG_DOUBLE_COMPLEX, sizeof(long double _Complex), K_CLDBL);
    D(MPI_CXX_LONG_DOUBLE_COMPLEX, sizeof(long double _Complex), K_CLDBL);
    D(MPI_2REAL, 8, K_NONE);
    D(MPI_2DOUBLE_PRECISION, 16, K_NONE);
    D(MPI_2INTEGER, 8, K_NONE);
    D(MPI_C_BOOL, sizeof(_Bool), K_BOOL);
    D(MPI_CXX_BOOL, sizeof(_Bool), K_BOOL);
    D(MPI_WCHAR, sizeof(wchar_t), K_NONE);
    D(MPI_INT8_T, 1, K_I8);
    D(MPI_UINT8_T, 1, K_U8);
    D(MPI_CHAR, 1, K_I8);
    D(MPI_SIGNED_CHAR, 1, K_I8);
    D(MPI_UNSIGNED_CHAR, 1, K_U8);
    D(MPI_BYTE, 1, K_BYTE);
    D(MPI_INT16_T, 2, K_I16);
    D(MPI_UINT16_T, 2, K_U16);
    D(MPI_INT32_T, 4, K_I32);
    D(MPI_UINT32_T, 4, K_U32);
    D(MPI_INT64_T, 8, K_I64);
    D(MPI_UINT64_T, 8, K_U64);
    D(MPI_LOGICAL1, 1, K_NONE);
    D(MPI_INTEGER1, 1, K_I8);
    D(MPI_LOGICAL2, 2, K_NONE);
    D(MPI_INTEGER2, 2, K_I16);
    D(MPI_REAL2, 2, K_NONE);
    D(MPI_LOGICAL4, 4, K_LOG4);
    D(MPI_INTEGER4, 4, K_I32);
    D(MPI_REAL4, 4, K_F32);
    D(MPI_COMPLEX4, 4, K_NONE);
    D(MPI_LOGICAL8, 8, K_NONE);
    D(MPI_INTEGER8, 8, K_I64);
    D(MPI_REAL8, 8, K_F64);
    D(MPI_COMPLEX8, 8, K_C32);
    D(MPI_LOGICAL16, 16, K_NONE);
    D(MPI_INTEGER16, 16, K_NONE);
    D(MPI_REAL16, 16, K_NONE);
    D(MPI_COMPLEX16, 16, K_C64);
    D(MPI_COMPLEX32, 32, K_NONE);
#undef D
#define P(h, type, kind) define_pair(h, #h, sizeof(((type *)0)->v), offsetof(type, i), sizeof(type), kind)
    P(MPI_FLOAT_INT, struct pair_float, K_FLOAT_INT);
    P(MPI_DOUBLE_INT, struct pair_double, K_DOUBLE_INT);
    P(MPI_LONG_INT, struct pair_long, K_LONG_INT);
    P(MPI_SHORT_INT, struct pair_short, K_SHORT_INT);
    P(MPI_LONG_DOUBLE_INT, struct pair_ldbl, K_LDBL_INT);
#undef P
    define(MPI_2INT, "MPI_2INT", 2 * sizeof(int), K_2INT);
}

struct mwmpi_type *mwmpi_type_of(MPI_Datatype h) {
    uintptr_t v = (uintptr_t)h;
    if (v >= PREDEFINED_BASE && v < PREDEFINED_BASE + PREDEFINED_COUNT) {
        struct mwmpi_type *t = &predefined[v - PREDEFINED_BASE];
        return t->obj.magic == MWMPI_MAGIC_TYPE ? t : NULL;
    }
    if (v < MWMPI_PREDEFINED_LIMIT) return NULL;
    struct mwmpi_type *t = (struct mwmpi_type *)h;
    return t->obj.magic == MWMPI_MAGIC_TYPE ? t : NULL;
}

int mwmpi_type_check(struct mwmpi_comm *comm, MPI_Datatype h, const char *routine, struct mwmpi_type **out) {
    struct mwmpi_type *t = mwmpi_type_of(h);
    if (t == NULL) return mwmpi_raise(comm, MPI_ERR_TYPE, routine, "invalid datatype");
    if (!t->committed) return mwmpi_raise(comm, MPI_ERR_TYPE, routine, "datatype not committed");
    *out = t;
    return MPI_SUCCESS;
}

bool mwmpi_type_contiguous(const struct mwmpi_type *t, MPI_Count count) {
    if (count == 0 || t->size == 0) return true;
    return t->nblocks == 1 && t->blocks[0].len == t->size && (count == 1 || t->extent == (MPI_Aint)t->size);
}

void mwmpi_pack(const struct mwmpi_type *t, MPI_Count count, const void *buf, void *out) {
    char *o = out;
    for (MPI_Count e = 0; e < count; e++) {
        const char *base = (const char *)buf + e * t->extent;
        for (size_t b = 0; b < t->nblocks; b++) {
            memcpy(o, base + t->blocks[b].off, t->blocks[b].len);
            o += t->blocks[b].len;
        }
    }
}

void mwmpi_unpack(const struct mwmpi_type *t, MPI_Count count, const void *in, size_t in_len, void *buf) {
    const char *i = in;
    for (MPI_Count e = 0; e < count && in_len > 0; e++) {
        char *base = (char *)buf + e * t->extent;
        for (size_t b = 0; b < t->nblocks && in_len > 0; b++) {
            size_t n = t->blocks[b].len < in_len ? t->blocks[b].len : in_len;
            memcpy(base + t->blocks[b].off, i, n);
            i += n;
            in_len -= n;
        }
    }
}

void mwmpi_type_release(struct mwmpi_type *t) {
    if (t->predefined || --t->refs > 0) return;
    mwmpi_attrs_delete_all(&t->attrs, t->handle);
    mwmpi_contents_free(t->contents);
    mwmpi_obj_unregister(&t->obj);
    free(t->blocks);
    free(t);
}

/* ---- constructors --------------------------------------------------------- */

/* Appends run (off, len) to t's blocks, merging with the last. */
static bool add_block(struct mwmpi_type *t, size_t *cap, MPI_Aint off, size_t len) {
    if (len == 0) return true;
    if (t->nblocks > 0) {
        struct mwmpi_block *last = &t->blocks[t->nblocks - 1];
        if (last->off + (MPI_Aint)last->len == off) {
            last->len += len;
            return true;
        }
    }
    if (t->nblocks == *cap) {
        size_t grown_cap = *cap ? *cap * 2 : 8;
        struct mwmpi_block *grown = realloc(t->blocks, grown_cap * sizeof *grown);
        if (grown == NULL) return false;
        t->blocks = grown;
        *cap = grown_cap;
    }
    t->blocks[t->nblocks++] = (struct mwmpi_block){off, len};
    return true;
}

/* The general constructor every other reduces to: block i holds bl[i]
 * consecutive elements of types[i] starting at byte displacement disp[i]. */
static int build(int combiner, MPI_Count count, const MPI_Count *bl, const MPI_Aint *disp,
                 struct mwmpi_type *const *types, MPI_Datatype *newtype, const char *routine) {
    if (newtype == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL newtype");
    struct mwmpi_type *t = calloc(1, sizeof *t);
    if (t == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    size_t cap = 0;
    bool any = false, same_kind = true;
    MPI_Aint lb = 0, ub = 0;
    enum mwmpi_kind kind = K_NONE;
    for (MPI_Count i = 0; i < count; i++) {
        const struct mwmpi_type *old = types[i];
        if (bl[i] < 0) {
            free(t->blocks);
            free(t);
            return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "negative block length");
        }
        if (bl[i] == 0) continue;
        MPI_Aint lo = disp[i] + old->lb, hi = disp[i] + old->lb + (MPI_Aint)bl[i] * old->extent;
        if (!any || lo < lb) lb = lo;
        if (!any || hi > ub) ub = hi;
        if (!any) kind = old->kind;
        same_kind &= old->kind == kind && kind != K_NONE;
        any = true;
        t->size += (size_t)bl[i] * old->size;
        t->kind_count += (size_t)bl[i] * old->kind_count;
        for (MPI_Count k = 0; k < bl[i]; k++)
            for (size_t b = 0; b < old->nblocks; b++)
                if (!add_block(t, &cap, disp[i] + k * old->extent + old->blocks[b].off, old->blocks[b].len)) {
                    free(t->blocks);
                    free(t);
                    return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
                }
    }
    t->lb = lb;
    t->extent = ub - lb;
    if (t->nblocks > 0) {
        MPI_Aint tlo = t->blocks[0].off, thi = tlo;
        for (size_t b = 0; b < t->nblocks; b++) {
            if (t->blocks[b].off < tlo) tlo = t->blocks[b].off;
            if (t->blocks[b].off + (MPI_Aint)t->blocks[b].len > thi) thi = t->blocks[b].off + (MPI_Aint)t->blocks[b].len;
        }
        t->true_lb = tlo;
        t->true_extent = thi - tlo;
    }
    t->kind = any && same_kind ? kind : K_NONE;
    if (t->kind == K_NONE) t->kind_count = 0;
    t->combiner = combiner;
    t->refs = 1;
    mwmpi_obj_register(&t->obj, MWMPI_MAGIC_TYPE);
    t->handle = (MPI_Datatype)t;
    *newtype = t->handle;
    return MPI_SUCCESS;
}

/* One old type for every block, as most constructors have. */
#define OLDTYPE(var, h, routine)                                                                 \
    struct mwmpi_type *var = mwmpi_type_of(h);                                                   \
    if (var == NULL) return mwmpi_raise(NULL, MPI_ERR_TYPE, routine, "invalid oldtype")

/* build() for `count` blocks of one old type; bl[i] NULL means `blocklen` each. */
static int build_uniform(int combiner, MPI_Count count, const MPI_Count *bl, MPI_Count blocklen, const MPI_Aint *disp,
                         struct mwmpi_type *old, MPI_Datatype *newtype, const char *routine) {
    if (count < 0) return mwmpi_raise(NULL, MPI_ERR_COUNT, routine, "negative count");
    MPI_Count *lens = malloc(((size_t)count + 1) * sizeof *lens);
    struct mwmpi_type **types = malloc(((size_t)count + 1) * sizeof *types);
    int err;
    if (lens == NULL || types == NULL) {
        err = mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    } else {
        for (MPI_Count i = 0; i < count; i++) {
            lens[i] = bl != NULL ? bl[i] : blocklen;
            types[i] = old;
        }
        err = build(combiner, count, lens, disp, types, newtype, routine);
    }
    free(lens);
    free(types);
    return err;
}

int PMPI_Type_contiguous_c(MPI_Count count, MPI_Datatype oldtype, MPI_Datatype *newtype) {
    OLDTYPE(old, oldtype, "MPI_Type_contiguous");
    MPI_Aint zero = 0;
    if (count < 0) return mwmpi_raise(NULL, MPI_ERR_COUNT, "MPI_Type_contiguous", "negative count");
    int err = build_uniform(MPI_COMBINER_CONTIGUOUS, 1, NULL, count, &zero, old, newtype, "MPI_Type_contiguous");
    struct mwmpi_contents *c = err == MPI_SUCCESS ? mwmpi_contents_new(*newtype, 0, 0, 1, 1) : NULL;
    if (c != NULL) {
        c->counts[0] = count;
        mwmpi_contents_type(c, 0, oldtype);
    }
    return err;
}

int PMPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype *newtype) {
    int err = PMPI_Type_contiguous_c(count, oldtype, newtype);
    struct mwmpi_contents *c = err == MPI_SUCCESS ? mwmpi_contents_new(*newtype, 1, 0, 0, 1) : NULL;
    if (c != NULL) {
        c->ints[0] = count;
        mwmpi_contents_type(c, 0, oldtype);
    }
    return err;
}

static int vector(int combiner, MPI_Count count, MPI_Count blocklength, MPI_Aint stride_bytes, MPI_Datatype oldtype,
                  MPI_Datatype *newtype, const char *routine) {
    OLDTYPE(old, oldtype, routine);
    if (count < 0) return mwmpi_raise(NULL, MPI_ERR_COUNT, routine, "negative count");
    MPI_Aint *disp = malloc(((size_t)count + 1) * sizeof *disp);
    if (disp == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    for (MPI_Count i = 0; i < count; i++) disp[i] = i * stride_bytes;
    int err = build_uniform(combiner, count, NULL, blocklength, disp, old, newtype, routine);
    free(disp);
    return err;
}

int PMPI_Type_vector_c(MPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype,
                       MPI_Datatype *newtype) {
    OLDTYPE(old, oldtype, "MPI_Type_vector");
    int err = vector(MPI_COMBINER_VECTOR, count, blocklength, stride * old->extent, oldtype, newtype, "MPI_Type_vector");
    struct mwmpi_contents *c = err == MPI_SUCCESS ? mwmpi_contents_new(*newtype, 0, 0, 3, 1) : NULL;
    if (c != NULL) {
        c->counts[0] = count;
        c->counts[1] = blocklength;
        c->counts[2] = stride;
        mwmpi_contents_type(c, 0, oldtype);
    }
    return err;
}

int PMPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype *newtype) {
    int err = PMPI_Type_vector_c(count, blocklength, stride, oldtype, newtype);
    struct mwmpi_contents *c = err == MPI_SUCCESS ? mwmpi_contents_new(*newtype, 3, 0, 0, 1) : NULL;
    if (c != NULL) {
        c->ints[0] = count;
        c->ints[1] = blocklength;
        c->ints[2] = stride;
        mwmpi_contents_type(c, 0, oldtype);
    }
    return err;
}

int PMPI_Type_create_hvector_c(MPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype,
                               MPI_Datatype *newtype) {
    int err = vector(MPI_COMBINER_HVECTOR, count, blocklength, stride, oldtype, newtype, "MPI_Type_create_hvector");
    struct mwmpi_contents *c = err == MPI_SUCCESS ? mwmpi_contents_new(*newtype, 0, 0, 3, 1) : NULL;
    if (c != NULL) {
        c->counts[0] = count;
        c->counts[1] = blocklength;
        c->counts[2] = stride;
        mwmpi_contents_type(c, 0, oldtype);
    }
    return err;
}

int PMPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype *newtype) {
    int err = PMPI_Type_create_hvector_c(count, blocklength, stride, oldtype, newtype);
    struct mwmpi_contents *c = err == MPI_SUCCESS ? mwmpi_contents_new(*newtype, 2, 1, 0, 1) : NULL;
    if (c != NULL) {
        c->ints[0] = count;
        c->ints[1] = blocklength;
        c->aints[0] = stride;
        mwmpi_contents_type(c, 0, oldtype);
    }
    return err;
}

/* Records an indexed form's arguments: ints (count, block lengths or the
 * one block length, int displacements), addresses for the h- forms, large
 * counts when the _c form was called (disp_count given). */
static void record_indexed(int combiner, MPI_Count count, const MPI_Count *bl, MPI_Count blocklen, const int *disp_int,
                           const MPI_Aint *disp_aint, const MPI_Count *disp_count, MPI_Datatype oldtype,
                           MPI_Datatype newtype) {
    bool block = combiner == MPI_COMBINER_INDEXED_BLOCK || combiner == MPI_COMBINER_HINDEXED_BLOCK;
    int nbl = block ? 1 : (int)count;
    struct mwmpi_contents *c;
    if (disp_count != NULL) {
        c = mwmpi_contents_new(newtype, 0, 0, 1 + nbl + (int)count, 1);
        if (c == NULL) return;
        c->counts[0] = count;
        for (int i = 0; i < nbl; i++) c->counts[1 + i] = block ? blocklen : bl[i];
        for (MPI_Count i = 0; i < count; i++) c->counts[1 + nbl + i] = disp_count[i];
    } else {
        int nd_int = disp_int != NULL ? (int)count : 0, nd_aint = disp_aint != NULL ? (int)count : 0;
        c = mwmpi_contents_new(newtype, 1 + nbl + nd_int, nd_aint, 0, 1);
        if (c == NULL) return;
        c->ints[0] = (int)count;
        for (int i = 0; i < nbl; i++) c->ints[1 + i] = (int)(block ? blocklen : bl[i]);
        for (int i = 0; i < nd_int; i++) c->ints[1 + nbl + i] = disp_int[i];
        for (int i = 0; i < nd_aint; i++) c->aints[i] = disp_aint[i];
    }
    mwmpi_contents_type(c, 0, oldtype);
}

/* Indexed forms: displacements in units of `unit` bytes (old extent, or 1). */
static int indexed(int combiner, MPI_Count count, const int *bl_int, const MPI_Count *bl_count, MPI_Count blocklen,
                   const int *disp_int, const MPI_Aint *disp_aint, const MPI_Count *disp_count, bool in_extents,
                   MPI_Datatype oldtype, MPI_Datatype *newtype, const char *routine) {
    OLDTYPE(old, oldtype, routine);
    if (count < 0) return mwmpi_raise(NULL, MPI_ERR_COUNT, routine, "negative count");
    MPI_Aint *disp = malloc(((size_t)count + 1) * sizeof *disp);
    MPI_Count *bl = malloc(((size_t)count + 1) * sizeof *bl);
    int err;
    if (disp == NULL || bl == NULL) {
        err = mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    } else {
        MPI_Aint unit = in_extents ? old->extent : 1;
        for (MPI_Count i = 0; i < count; i++) {
            MPI_Aint d = disp_int != NULL ? disp_int[i] : disp_aint != NULL ? disp_aint[i] : (MPI_Aint)disp_count[i];
            disp[i] = d * unit;
            bl[i] = bl_int != NULL ? bl_int[i] : bl_count != NULL ? bl_count[i] : blocklen;
        }
        err = build_uniform(combiner, count, bl, 0, disp, old, newtype, routine);
    }
    if (err == MPI_SUCCESS) record_indexed(combiner, count, bl, blocklen, disp_int, disp_aint, disp_count, oldtype, *newtype);
    free(disp);
    free(bl);
    return err;
}

int PMPI_Type_indexed(int count, const int bl[], const int disp[], MPI_Datatype oldtype, MPI_Datatype *newtype) {
    return indexed(MPI_COMBINER_INDEXED, count, bl, NULL, 0, disp, NULL, NULL, true, oldtype, newtype, "MPI_Type_indexed");
}

int PMPI_Type_indexed_c(MPI_Count count, const MPI_Count bl[], const MPI_Count disp[], MPI_Datatype oldtype,
                        MPI_Datatype *newtype) {
    return indexed(MPI_COMBINER_INDEXED, count, NULL, bl, 0, NULL, NULL, disp, true, oldtype, newtype, "MPI_Type_indexed");
}

int PMPI_Type_create_hindexed(int count, const int bl[], const MPI_Aint disp[], MPI_Datatype oldtype,
                              MPI_Datatype *newtype) {
    return indexed(MPI_COMBINER_HINDEXED, count, bl, NULL, 0, NULL, disp, NULL, false, oldtype, newtype,
                   "MPI_Type_create_hindexed");
}

int PMPI_Type_create_hindexed_c(MPI_Count count, const MPI_Count bl[], const MPI_Count disp[], MPI_Datatype oldtype,
                                MPI_Datatype *newtype) {
    return indexed(MPI_COMBINER_HINDEXED, count, NULL, bl, 0, NULL, NULL, disp, false, oldtype, newtype,
                   "MPI_Type_create_hindexed");
}

int PMPI_Type_create_indexed_block(int count, int blocklength, const int disp[], MPI_Datatype oldtype,
                                   MPI_Datatype *newtype) {
    return indexed(MPI_COMBINER_INDEXED_BLOCK, count, NULL, NULL, blocklength, disp, NULL, NULL, true, oldtype, newtype,
                   "MPI_Type_create_indexed_block");
}

int PMPI_Type_create_indexed_block_c(MPI_Count count, MPI_Count blocklength, const MPI_Count disp[],
                                     MPI_Datatype oldtype, MPI_Datatype *newtype) {
    return indexed(MPI_COMBINER_INDEXED_BLOCK, count, NULL, NULL, blocklength, NULL, NULL, disp, true, oldtype, newtype,
                   "MPI_Type_create_indexed_block");
}

int PMPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint disp[], MPI_Datatype oldtype,
                                    MPI_Datatype *newtype) {
    return indexed(MPI_COMBINER_HINDEXED_BLOCK, count, NULL, NULL, blocklength, NULL, disp, NULL, false, oldtype,
                   newtype, "MPI_Type_create_hindexed_block");
}

int PMPI_Type_create_hindexed_block_c(MPI_Count count, MPI_Count blocklength, const MPI_Count disp[],
                                      MPI_Datatype oldtype, MPI_Datatype *newtype) {
    return indexed(MPI_COMBINER_HINDEXED_BLOCK, count, NULL, NULL, blocklength, NULL, NULL, disp, false, oldtype,
                   newtype, "MPI_Type_create_hindexed_block");
}

static int create_struct(MPI_Count count, const int *bl_int, const MPI_Count *bl_count, const MPI_Aint *disp_aint,
                         const MPI_Count *disp_count, const MPI_Datatype *htypes, MPI_Datatype *newtype) {
    static const char routine[] = "MPI_Type_create_struct";
    if (count < 0) return mwmpi_raise(NULL, MPI_ERR_COUNT, routine, "negative count");
    MPI_Count *bl = malloc(((size_t)count + 1) * sizeof *bl);
    MPI_Aint *disp = malloc(((size_t)count + 1) * sizeof *disp);
    struct mwmpi_type **types = malloc(((size_t)count + 1) * sizeof *types);
    int err = MPI_SUCCESS;
    if (bl == NULL || disp == NULL || types == NULL) err = mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    for (MPI_Count i = 0; err == MPI_SUCCESS && i < count; i++) {
        bl[i] = bl_int != NULL ? bl_int[i] : bl_count[i];
        disp[i] = disp_aint != NULL ? disp_aint[i] : (MPI_Aint)disp_count[i];
        types[i] = mwmpi_type_of(htypes[i]);
        if (types[i] == NULL) err = mwmpi_raise(NULL, MPI_ERR_TYPE, routine, "invalid type at %lld", (long long)i);
    }
    if (err == MPI_SUCCESS) err = build(MPI_COMBINER_STRUCT, count, bl, disp, types, newtype, routine);
    struct mwmpi_contents *c = NULL;
    if (err == MPI_SUCCESS)
        c = bl_int != NULL ? mwmpi_contents_new(*newtype, 1 + (int)count, (int)count, 0, (int)count)
                           : mwmpi_contents_new(*newtype, 0, 0, 1 + 2 * (int)count, (int)count);
    if (c != NULL) {
        if (bl_int != NULL) c->ints[0] = (int)count;
        else c->counts[0] = count;
        for (MPI_Count i = 0; i < count; i++) {
            if (bl_int != NULL) {
                c->ints[1 + i] = bl_int[i];
                c->aints[i] = disp_aint[i];
            } else {
                c->counts[1 + i] = bl_count[i];
                c->counts[1 + count + i] = disp_count[i];
            }
            mwmpi_contents_type(c, (int)i, htypes[i]);
        }
    }
    free(bl);
    free(disp);
    free(types);
    return err;
}

int PMPI_Type_create_struct(int count, const int bl[], const MPI_Aint disp[], const MPI_Datatype types[],
                            MPI_Datatype *newtype) {
    return create_struct(count, bl, NULL, disp, NULL, types, newtype);
}

int PMPI_Type_create_struct_c(MPI_Count count, const MPI_Count bl[], const MPI_Count disp[], const MPI_Datatype types[],
                              MPI_Datatype *newtype) {
    return create_struct(count, NULL, bl, NULL, disp, types, newtype);
}

int PMPI_Type_create_resized_c(MPI_Datatype oldtype, MPI_Count lb, MPI_Count extent, MPI_Datatype *newtype) {
    static const char routine[] = "MPI_Type_create_resized";
    OLDTYPE(old, oldtype, routine);
    MPI_Count one = 1;
    MPI_Aint zero = 0;
    int err = build(MPI_COMBINER_RESIZED, 1, &one, &zero, &old, newtype, routine);
    if (err != MPI_SUCCESS) return err;
    struct mwmpi_type *t = mwmpi_type_of(*newtype);
    t->lb = (MPI_Aint)lb;
    t->extent = (MPI_Aint)extent;
    struct mwmpi_contents *c = mwmpi_contents_new(*newtype, 0, 0, 2, 1);
    if (c != NULL) {
        c->counts[0] = lb;
        c->counts[1] = extent;
        mwmpi_contents_type(c, 0, oldtype);
    }
    return MPI_SUCCESS;
}

int PMPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype *newtype) {
    int err = PMPI_Type_create_resized_c(oldtype, lb, extent, newtype);
    struct mwmpi_contents *c = err == MPI_SUCCESS ? mwmpi_contents_new(*newtype, 0, 2, 0, 1) : NULL;
    if (c != NULL) {
        c->aints[0] = lb;
        c->aints[1] = extent;
        mwmpi_contents_type(c, 0, oldtype);
    }
    return err;
}

int PMPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype) {
    static const char routine[] = "MPI_Type_dup";
    OLDTYPE(old, oldtype, routine);
    MPI_Count one = 1;
    MPI_Aint zero = 0;
    int err = build(MPI_COMBINER_DUP, 1, &one, &zero, &old, newtype, routine);
    if (err != MPI_SUCCESS) return err;
    struct mwmpi_type *t = mwmpi_type_of(*newtype);
    t->lb = old->lb;
    t->extent = old->extent;
    t->committed = old->committed;
    struct mwmpi_contents *c = mwmpi_contents_new(*newtype, 0, 0, 0, 1);
    if (c != NULL) mwmpi_contents_type(c, 0, oldtype);
    err = mwmpi_attrs_copy(old->attrs, oldtype, &t->attrs, *newtype);
    if (err != MPI_SUCCESS) {
        mwmpi_type_release(t);
        *newtype = MPI_DATATYPE_NULL;
        return mwmpi_raise(NULL, err, routine, "an attribute copy callback failed");
    }
    return MPI_SUCCESS;
}

/* Subarray (MPI-5.0 5.1.3): each run is the innermost dimension's subsize
 * elements; the type's extent is the whole array's. */
static int subarray(int ndims, const MPI_Count *sizes, const MPI_Count *subsizes, const MPI_Count *starts, int order,
                    MPI_Datatype oldtype, MPI_Datatype *newtype) {
    static const char routine[] = "MPI_Type_create_subarray";
    OLDTYPE(old, oldtype, routine);
    if (ndims <= 0 || (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN))
        return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "bad ndims or order");
    MPI_Count dim_size[32], dim_sub[32], dim_start[32];
    if (ndims > 32) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "more than 32 dimensions");
    MPI_Count total = 1, runs = 1;
    for (int d = 0; d < ndims; d++) {
        int src = order == MPI_ORDER_C ? d : ndims - 1 - d; /* dim 0 outermost */
        dim_size[d] = sizes[src];
        dim_sub[d] = subsizes[src];
        dim_start[d] = starts[src];
        if (dim_size[d] <= 0 || dim_sub[d] <= 0 || dim_start[d] < 0 || dim_start[d] + dim_sub[d] > dim_size[d])
            return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "bad sizes, subsizes or starts in dimension %d", src);
        total *= dim_size[d];
        if (d < ndims - 1) runs *= dim_sub[d];
    }
    MPI_Aint *disp = malloc(((size_t)runs + 1) * sizeof *disp);
    if (disp == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    MPI_Count idx[32] = {0};
    for (MPI_Count r = 0; r < runs; r++) {
        MPI_Count linear = 0;
        for (int d = 0; d < ndims; d++) linear = linear * dim_size[d] + dim_start[d] + (d < ndims - 1 ? idx[d] : 0);
        disp[r] = linear * old->extent;
        for (int d = ndims - 2; d >= 0; d--) {
            if (++idx[d] < dim_sub[d]) break;
            idx[d] = 0;
        }
    }
    MPI_Datatype runs_type;
    int err = build_uniform(MPI_COMBINER_SUBARRAY, runs, NULL, dim_sub[ndims - 1], disp, old, &runs_type, routine);
    free(disp);
    if (err != MPI_SUCCESS) return err;
    struct mwmpi_type *t = mwmpi_type_of(runs_type);
    t->lb = 0;
    t->extent = total * old->extent;
    *newtype = runs_type;
    return MPI_SUCCESS;
}

int PMPI_Type_create_subarray(int ndims, const int sizes[], const int subsizes[], const int starts[], int order,
                              MPI_Datatype oldtype, MPI_Datatype *newtype) {
    MPI_Count s[32], ss[32], st[32];
    if (ndims < 0 || ndims > 32) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_create_subarray", "bad ndims");
    for (int d = 0; d < ndims; d++) {
        s[d] = sizes[d];
        ss[d] = subsizes[d];
        st[d] = starts[d];
    }
    int err = subarray(ndims, s, ss, st, order, oldtype, newtype);
    struct mwmpi_contents *c = err == MPI_SUCCESS ? mwmpi_contents_new(*newtype, 2 + 3 * ndims, 0, 0, 1) : NULL;
    if (c != NULL) {
        c->ints[0] = ndims;
        for (int d = 0; d < ndims; d++) {
            c->ints[1 + d] = sizes[d];
            c->ints[1 + ndims + d] = subsizes[d];
            c->ints[1 + 2 * ndims + d] = starts[d];
        }
        c->ints[1 + 3 * ndims] = order;
        mwmpi_contents_type(c, 0, oldtype);
    }
    return err;
}

int PMPI_Type_create_subarray_c(int ndims, const MPI_Count sizes[], const MPI_Count subsizes[], const MPI_Count starts[],
                                int order, MPI_Datatype oldtype, MPI_Datatype *newtype) {
    int err = subarray(ndims, sizes, subsizes, starts, order, oldtype, newtype);
    struct mwmpi_contents *c = err == MPI_SUCCESS ? mwmpi_contents_new(*newtype, 2, 0, 3 * ndims, 1) : NULL;
    if (c != NULL) {
        c->ints[0] = ndims;
        c->ints[1] = order;
        for (int d = 0; d < ndims; d++) {
            c->counts[d] = sizes[d];
            c->counts[ndims + d] = subsizes[d];
            c->counts[2 * ndims + d] = starts[d];
        }
        mwmpi_contents_type(c, 0, oldtype);
    }
    return err;
}
