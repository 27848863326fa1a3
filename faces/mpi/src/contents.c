/*
 * contents.c: how a datatype was made (MPI-5.0 5.1.13): every constructor
 * records its combiner's arguments (datatype.c), Type_get_envelope and
 * Type_get_contents return them, in the int/MPI_Aint form for the classic
 * constructors and with large counts for the _c ones. The recorded old
 * types are kept alive by the new type; get_contents hands out further
 * references the program frees. Type_get_value_index names the predefined
 * value-index pair types.
 */
#include <stdlib.h>

#include "internal.h"

void mwmpi_contents_free(struct mwmpi_contents *c) {
    if (c == NULL) return;
    for (int i = 0; i < c->nd; i++)
        if (c->types[i] != NULL) mwmpi_type_release(c->types[i]);
    free(c->ints);
    free(c->aints);
    free(c->counts);
    free(c->types);
    free(c);
}

struct mwmpi_contents *mwmpi_contents_new(MPI_Datatype h, int ni, int na, int nc, int nd) {
    struct mwmpi_type *t = mwmpi_type_of(h);
    if (t == NULL || t->predefined) return NULL;
    struct mwmpi_contents *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->ints = calloc((size_t)ni + 1, sizeof *c->ints);
    c->aints = calloc((size_t)na + 1, sizeof *c->aints);
    c->counts = calloc((size_t)nc + 1, sizeof *c->counts);
    c->types = calloc((size_t)nd + 1, sizeof *c->types);
    if (c->ints == NULL || c->aints == NULL || c->counts == NULL || c->types == NULL) {
        mwmpi_contents_free(c);
        return NULL;
    }
    c->ni = ni;
    c->na = na;
    c->nc = nc;
    c->nd = nd;
    mwmpi_contents_free(t->contents);
    t->contents = c;
    return c;
}

void mwmpi_contents_type(struct mwmpi_contents *c, int i, MPI_Datatype h) {
    struct mwmpi_type *t = mwmpi_type_of(h);
    if (t != NULL && !t->predefined) t->refs++;
    c->types[i] = t;
}

#define TYPE(var, h, routine)                                                            \
    struct mwmpi_type *var = mwmpi_type_of(h);                                           \
    if (var == NULL) return mwmpi_raise(NULL, MPI_ERR_TYPE, routine, "invalid datatype")

int PMPI_Type_get_envelope_c(MPI_Datatype datatype, MPI_Count *num_integers, MPI_Count *num_addresses,
                             MPI_Count *num_large_counts, MPI_Count *num_datatypes, int *combiner) {
    static const char routine[] = "MPI_Type_get_envelope";
    TYPE(t, datatype, routine);
    if (num_integers == NULL || num_addresses == NULL || num_large_counts == NULL || num_datatypes == NULL ||
        combiner == NULL)
        return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    const struct mwmpi_contents *c = t->contents;
    *num_integers = c != NULL ? c->ni : 0;
    *num_addresses = c != NULL ? c->na : 0;
    *num_large_counts = c != NULL ? c->nc : 0;
    *num_datatypes = c != NULL ? c->nd : 0;
    *combiner = t->combiner;
    return MPI_SUCCESS;
}

int PMPI_Type_get_envelope(MPI_Datatype datatype, int *num_integers, int *num_addresses, int *num_datatypes,
                           int *combiner) {
    static const char routine[] = "MPI_Type_get_envelope";
    MPI_Count ni, na, nc, nd;
    int err = PMPI_Type_get_envelope_c(datatype, &ni, &na, &nc, &nd, combiner);
    if (err != MPI_SUCCESS) return err;
    if (num_integers == NULL || num_addresses == NULL || num_datatypes == NULL)
        return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    if (nc > 0) return mwmpi_raise(NULL, MPI_ERR_TYPE, routine, "made with large counts: use MPI_Type_get_envelope_c");
    *num_integers = (int)ni;
    *num_addresses = (int)na;
    *num_datatypes = (int)nd;
    return MPI_SUCCESS;
}

int PMPI_Type_get_contents_c(MPI_Datatype datatype, MPI_Count max_integers, MPI_Count max_addresses,
                             MPI_Count max_large_counts, MPI_Count max_datatypes, int array_of_integers[],
                             MPI_Aint array_of_addresses[], MPI_Count array_of_large_counts[],
                             MPI_Datatype array_of_datatypes[]) {
    static const char routine[] = "MPI_Type_get_contents";
    TYPE(t, datatype, routine);
    const struct mwmpi_contents *c = t->contents;
    if (t->predefined || c == NULL)
        return mwmpi_raise(NULL, MPI_ERR_TYPE, routine, "a predefined datatype has no contents");
    if (max_integers < c->ni || max_addresses < c->na || max_large_counts < c->nc || max_datatypes < c->nd)
        return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "arrays shorter than Type_get_envelope's counts");
    for (int i = 0; i < c->ni; i++) array_of_integers[i] = c->ints[i];
    for (int i = 0; i < c->na; i++) array_of_addresses[i] = c->aints[i];
    for (int i = 0; i < c->nc; i++) array_of_large_counts[i] = c->counts[i];
    for (int i = 0; i < c->nd; i++) {
        struct mwmpi_type *old = c->types[i];
        if (!old->predefined) old->refs++; /* the program frees what it gets */
        array_of_datatypes[i] = old->handle;
    }
    return MPI_SUCCESS;
}

int PMPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses, int max_datatypes,
                           int array_of_integers[], MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[]) {
    return PMPI_Type_get_contents_c(datatype, max_integers, max_addresses, 0, max_datatypes, array_of_integers,
                                    array_of_addresses, NULL, array_of_datatypes);
}

int PMPI_Type_get_value_index(MPI_Datatype value_type, MPI_Datatype index_type, MPI_Datatype *pair_type) {
    static const char routine[] = "MPI_Type_get_value_index";
    if (pair_type == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    if (mwmpi_type_of(value_type) == NULL || mwmpi_type_of(index_type) == NULL)
        return mwmpi_raise(NULL, MPI_ERR_TYPE, routine, "invalid datatype");
    *pair_type = MPI_DATATYPE_NULL;
    if (index_type != MPI_INT) return MPI_SUCCESS;
    if (value_type == MPI_FLOAT) *pair_type = MPI_FLOAT_INT;
    else if (value_type == MPI_DOUBLE) *pair_type = MPI_DOUBLE_INT;
    else if (value_type == MPI_LONG) *pair_type = MPI_LONG_INT;
    else if (value_type == MPI_INT) *pair_type = MPI_2INT;
    else if (value_type == MPI_SHORT) *pair_type = MPI_SHORT_INT;
    else if (value_type == MPI_LONG_DOUBLE) *pair_type = MPI_LONG_DOUBLE_INT;
    return MPI_SUCCESS;
}
