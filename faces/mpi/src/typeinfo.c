/*
 * typeinfo.c: what a program asks of a datatype and does with one outside
 * communication: commit, free, size, extents, names, addresses, counts of
 * a status in elements, and MPI_Pack / MPI_Unpack / MPI_Pack_size.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define TYPE(var, h, routine)                                    \
    struct mwmpi_type *var = mwmpi_type_of(h);                   \
    if (var == NULL) return mwmpi_raise(NULL, MPI_ERR_TYPE, routine, "invalid datatype")

int PMPI_Type_commit(MPI_Datatype *datatype) {
    if (datatype == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_commit", "NULL argument");
    TYPE(t, *datatype, "MPI_Type_commit");
    t->committed = true;
    return MPI_SUCCESS;
}

int PMPI_Type_free(MPI_Datatype *datatype) {
    if (datatype == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_free", "NULL argument");
    TYPE(t, *datatype, "MPI_Type_free");
    if (t->predefined) return mwmpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_free", "a predefined datatype cannot be freed");
    mwmpi_type_release(t);
    *datatype = MPI_DATATYPE_NULL;
    return MPI_SUCCESS;
}

int PMPI_Type_size_c(MPI_Datatype datatype, MPI_Count *size) {
    TYPE(t, datatype, "MPI_Type_size");
    if (size == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_size", "NULL argument");
    *size = (MPI_Count)t->size;
    return MPI_SUCCESS;
}

int PMPI_Type_size(MPI_Datatype datatype, int *size) {
    MPI_Count c;
    int err = PMPI_Type_size_c(datatype, &c);
    if (err != MPI_SUCCESS) return err;
    *size = c > 0x7fffffff ? MPI_UNDEFINED : (int)c;
    return MPI_SUCCESS;
}

int PMPI_Type_size_x(MPI_Datatype datatype, MPI_Count *size) { return PMPI_Type_size_c(datatype, size); }

int PMPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent) {
    TYPE(t, datatype, "MPI_Type_get_extent");
    if (lb == NULL || extent == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_get_extent", "NULL argument");
    *lb = t->lb;
    *extent = t->extent;
    return MPI_SUCCESS;
}

int PMPI_Type_get_extent_c(MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent) {
    MPI_Aint l, e;
    int err = PMPI_Type_get_extent(datatype, &l, &e);
    if (err != MPI_SUCCESS) return err;
    *lb = l;
    *extent = e;
    return MPI_SUCCESS;
}

int PMPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent) {
    return PMPI_Type_get_extent_c(datatype, lb, extent);
}

int PMPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *true_lb, MPI_Aint *true_extent) {
    TYPE(t, datatype, "MPI_Type_get_true_extent");
    if (true_lb == NULL || true_extent == NULL)
        return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_get_true_extent", "NULL argument");
    *true_lb = t->true_lb;
    *true_extent = t->true_extent;
    return MPI_SUCCESS;
}

int PMPI_Type_get_true_extent_c(MPI_Datatype datatype, MPI_Count *true_lb, MPI_Count *true_extent) {
    MPI_Aint l, e;
    int err = PMPI_Type_get_true_extent(datatype, &l, &e);
    if (err != MPI_SUCCESS) return err;
    *true_lb = l;
    *true_extent = e;
    return MPI_SUCCESS;
}

int PMPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count *true_lb, MPI_Count *true_extent) {
    return PMPI_Type_get_true_extent_c(datatype, true_lb, true_extent);
}

int PMPI_Type_set_name(MPI_Datatype datatype, const char *type_name) {
    TYPE(t, datatype, "MPI_Type_set_name");
    if (type_name == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_set_name", "NULL argument");
    snprintf(t->name, sizeof t->name, "%s", type_name);
    return MPI_SUCCESS;
}

int PMPI_Type_get_name(MPI_Datatype datatype, char *type_name, int *resultlen) {
    if (datatype == MPI_DATATYPE_NULL && type_name != NULL && resultlen != NULL) {
        *resultlen = snprintf(type_name, MPI_MAX_OBJECT_NAME, "MPI_DATATYPE_NULL"); /* MPI-4.1 7.8 */
        return MPI_SUCCESS;
    }
    TYPE(t, datatype, "MPI_Type_get_name");
    if (type_name == NULL || resultlen == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_get_name", "NULL argument");
    snprintf(type_name, MPI_MAX_OBJECT_NAME, "%s", t->name);
    *resultlen = (int)strlen(type_name);
    return MPI_SUCCESS;
}

int PMPI_Get_address(const void *location, MPI_Aint *address) {
    if (address == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Get_address", "NULL argument");
    *address = (MPI_Aint)(uintptr_t)location;
    return MPI_SUCCESS;
}

MPI_Aint PMPI_Aint_add(MPI_Aint base, MPI_Aint disp) { return (MPI_Aint)((uintptr_t)base + (uintptr_t)disp); }
MPI_Aint PMPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2) { return (MPI_Aint)((uintptr_t)addr1 - (uintptr_t)addr2); }

/* ---- counts of a received message ------------------------------------------ */

int PMPI_Get_count_c(const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count) {
    TYPE(t, datatype, "MPI_Get_count");
    if (status == NULL || count == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Get_count", "NULL argument");
    MPI_Count bytes = mwmpi_status_count(status);
    if (t->size == 0) *count = bytes == 0 ? 0 : MPI_UNDEFINED;
    else *count = bytes % (MPI_Count)t->size == 0 ? bytes / (MPI_Count)t->size : MPI_UNDEFINED;
    return MPI_SUCCESS;
}

int PMPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count) {
    MPI_Count c;
    int err = PMPI_Get_count_c(status, datatype, &c);
    if (err != MPI_SUCCESS) return err;
    *count = c > 0x7fffffff ? MPI_UNDEFINED : (int)c;
    return MPI_SUCCESS;
}

int PMPI_Get_elements_c(const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count) {
    TYPE(t, datatype, "MPI_Get_elements");
    if (status == NULL || count == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Get_elements", "NULL argument");
    MPI_Count bytes = mwmpi_status_count(status);
    /* Basic elements: exact for types of one basic kind (the common case)
     * and for whole elements of any type whose basic elements are known. */
    size_t per = t->kind != K_NONE && t->kind_count > 0 ? t->kind_count : (t->predefined ? 1 : 0);
    if (t->size == 0) {
        *count = 0;
    } else if (per > 0 && t->size % per == 0 && !(t->kind >= K_FLOAT_INT && t->kind <= K_LDBL_INT)) {
        size_t basic = t->size / per;
        *count = bytes % (MPI_Count)basic == 0 ? bytes / (MPI_Count)basic : MPI_UNDEFINED;
    } else {
        *count = bytes % (MPI_Count)t->size == 0 ? bytes / (MPI_Count)t->size * (MPI_Count)(per ? per : 1) : MPI_UNDEFINED;
        if (t->kind >= K_FLOAT_INT && t->kind <= K_LDBL_INT && *count != MPI_UNDEFINED) *count *= 2;
    }
    return MPI_SUCCESS;
}

int PMPI_Get_elements(const MPI_Status *status, MPI_Datatype datatype, int *count) {
    MPI_Count c;
    int err = PMPI_Get_elements_c(status, datatype, &c);
    if (err != MPI_SUCCESS) return err;
    *count = c > 0x7fffffff ? MPI_UNDEFINED : (int)c;
    return MPI_SUCCESS;
}

int PMPI_Get_elements_x(const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count) {
    return PMPI_Get_elements_c(status, datatype, count);
}

/* ---- pack and unpack --------------------------------------------------------- */

int PMPI_Pack_size_c(MPI_Count incount, MPI_Datatype datatype, MPI_Comm comm, MPI_Count *size) {
    MWMPI_COMM(c, comm, "MPI_Pack_size");
    struct mwmpi_type *t;
    int err = mwmpi_type_check(c, datatype, "MPI_Pack_size", &t);
    if (err != MPI_SUCCESS) return err;
    if (size == NULL || incount < 0) return mwmpi_raise(c, MPI_ERR_ARG, "MPI_Pack_size", "bad arguments");
    *size = incount * (MPI_Count)t->size;
    return MPI_SUCCESS;
}

int PMPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int *size) {
    MPI_Count s;
    int err = PMPI_Pack_size_c(incount, datatype, comm, &s);
    if (err != MPI_SUCCESS) return err;
    *size = s > 0x7fffffff ? MPI_UNDEFINED : (int)s;
    return MPI_SUCCESS;
}

int PMPI_Pack_c(const void *inbuf, MPI_Count incount, MPI_Datatype datatype, void *outbuf, MPI_Count outsize,
                MPI_Count *position, MPI_Comm comm) {
    static const char routine[] = "MPI_Pack";
    MWMPI_COMM(c, comm, routine);
    struct mwmpi_type *t;
    int err = mwmpi_type_check(c, datatype, routine, &t);
    if (err != MPI_SUCCESS) return err;
    if (position == NULL || incount < 0) return mwmpi_raise(c, MPI_ERR_ARG, routine, "bad arguments");
    MPI_Count need = incount * (MPI_Count)t->size;
    if (*position < 0 || *position + need > outsize)
        return mwmpi_raise(c, MPI_ERR_TRUNCATE, routine, "%lld bytes do not fit at position %lld of %lld", (long long)need,
                           (long long)*position, (long long)outsize);
    mwmpi_pack(t, incount, inbuf, (char *)outbuf + *position);
    *position += need;
    return MPI_SUCCESS;
}

int PMPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize, int *position,
              MPI_Comm comm) {
    if (position == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Pack", "NULL position");
    MPI_Count pos = *position;
    int err = PMPI_Pack_c(inbuf, incount, datatype, outbuf, outsize, &pos, comm);
    if (err == MPI_SUCCESS) *position = (int)pos;
    return err;
}

int PMPI_Unpack_c(const void *inbuf, MPI_Count insize, MPI_Count *position, void *outbuf, MPI_Count outcount,
                  MPI_Datatype datatype, MPI_Comm comm) {
    static const char routine[] = "MPI_Unpack";
    MWMPI_COMM(c, comm, routine);
    struct mwmpi_type *t;
    int err = mwmpi_type_check(c, datatype, routine, &t);
    if (err != MPI_SUCCESS) return err;
    if (position == NULL || outcount < 0) return mwmpi_raise(c, MPI_ERR_ARG, routine, "bad arguments");
    MPI_Count need = outcount * (MPI_Count)t->size;
    if (*position < 0 || *position + need > insize)
        return mwmpi_raise(c, MPI_ERR_TRUNCATE, routine, "%lld bytes wanted at position %lld of %lld", (long long)need,
                           (long long)*position, (long long)insize);
    mwmpi_unpack(t, outcount, (const char *)inbuf + *position, (size_t)need, outbuf);
    *position += need;
    return MPI_SUCCESS;
}

int PMPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount, MPI_Datatype datatype,
                MPI_Comm comm) {
    if (position == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Unpack", "NULL position");
    MPI_Count pos = *position;
    int err = PMPI_Unpack_c(inbuf, insize, &pos, outbuf, outcount, datatype, comm);
    if (err == MPI_SUCCESS) *position = (int)pos;
    return err;
}
