/*
 * attr.c: keyvals and attributes (MPI-5.0 7.7) on communicators and
 * datatypes: create/free keyval, set/get/delete attribute, the copy
 * callbacks run by Comm_dup / Type_dup and the delete callbacks run by
 * delete, overwrite, free and (for COMM_SELF and COMM_WORLD) Finalize; the
 * deprecated Keyval_create/free and Attr_put/delete. The predefined
 * attributes (TAG_UB, ...) are answered by comm.c, not stored here.
 * Window keyvals can be created and freed; windows are not implemented.
 */
#include <stdlib.h>

#include "internal.h"

enum keyval_kind { KV_COMM, KV_TYPE, KV_WIN };

struct keyval {
    enum keyval_kind kind;
    void *copy_fn; /* the kind's copy function, or MPI_*_NULL_COPY_FN / _DUP_FN */
    void *delete_fn;
    void *extra_state;
    int attrs; /* attributes holding it: a freed keyval lives on until 0 */
    bool freed;
};

/* Keyval k is keyvals[k - KEYVAL_BASE]; below that lie the predefined
 * attribute keys (MPI_TAG_UB = 501, the window ones 60x). */
#define KEYVAL_BASE 1024
static struct keyval **keyvals;
static int nkeyvals;

static struct keyval *keyval_of(int k, enum keyval_kind kind) {
    if (k < KEYVAL_BASE || k - KEYVAL_BASE >= nkeyvals) return NULL;
    struct keyval *kv = keyvals[k - KEYVAL_BASE];
    return kv != NULL && kv->kind == kind && !kv->freed ? kv : NULL;
}

static void keyval_unref(int k) {
    struct keyval *kv = keyvals[k - KEYVAL_BASE];
    if (--kv->attrs == 0 && kv->freed) {
        free(kv);
        keyvals[k - KEYVAL_BASE] = NULL;
    }
}

static int keyval_create(enum keyval_kind kind, void *copy_fn, void *delete_fn, void *extra, int *out,
                         const char *routine) {
    if (out == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL keyval");
    struct keyval *kv = calloc(1, sizeof *kv);
    struct keyval **grown = realloc(keyvals, (size_t)(nkeyvals + 1) * sizeof *grown);
    if (kv == NULL || grown == NULL) {
        free(kv);
        return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    }
    keyvals = grown;
    *kv = (struct keyval){.kind = kind, .copy_fn = copy_fn, .delete_fn = delete_fn, .extra_state = extra};
    keyvals[nkeyvals] = kv;
    *out = KEYVAL_BASE + nkeyvals++;
    return MPI_SUCCESS;
}

static int keyval_free(enum keyval_kind kind, int *k, const char *routine) {
    if (k == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL keyval");
    struct keyval *kv = keyval_of(*k, kind);
    if (kv == NULL) return mwmpi_raise(NULL, MPI_ERR_KEYVAL, routine, "invalid keyval %d", *k);
    kv->freed = true;
    if (kv->attrs == 0) {
        free(kv);
        keyvals[*k - KEYVAL_BASE] = NULL;
    }
    *k = MPI_KEYVAL_INVALID;
    return MPI_SUCCESS;
}

/* ---- attribute lists ---------------------------------------------------- */

static struct mwmpi_attr **find(struct mwmpi_attr **list, int k) {
    for (; *list != NULL; list = &(*list)->next)
        if ((*list)->keyval == k) return list;
    return NULL;
}

/* Runs the delete callback of the attribute at *at and unlinks it. */
static int attr_remove(struct mwmpi_attr **at, void *handle) {
    struct mwmpi_attr *a = *at;
    struct keyval *kv = keyvals[a->keyval - KEYVAL_BASE];
    int err = MPI_SUCCESS;
    if (kv->delete_fn != NULL) {
        if (kv->kind == KV_TYPE)
            err = ((MPI_Type_delete_attr_function *)kv->delete_fn)((MPI_Datatype)handle, a->keyval, a->value,
                                                                  kv->extra_state);
        else
            err = ((MPI_Comm_delete_attr_function *)kv->delete_fn)((MPI_Comm)handle, a->keyval, a->value,
                                                                  kv->extra_state);
    }
    if (err != MPI_SUCCESS) return err;
    *at = a->next;
    keyval_unref(a->keyval);
    free(a);
    return MPI_SUCCESS;
}

static int attr_set(struct mwmpi_attr **list, void *handle, int k, void *value) {
    struct mwmpi_attr **at = find(list, k);
    if (at != NULL) {
        int err = attr_remove(at, handle);
        if (err != MPI_SUCCESS) return err;
    }
    struct mwmpi_attr *a = malloc(sizeof *a);
    if (a == NULL) return MPI_ERR_NO_MEM;
    a->keyval = k;
    a->value = value;
    /* Appended: copies and deletions run in the order attributes were set. */
    a->next = NULL;
    while (*list != NULL) list = &(*list)->next;
    *list = a;
    keyvals[k - KEYVAL_BASE]->attrs++;
    return MPI_SUCCESS;
}

int mwmpi_attrs_delete_all(struct mwmpi_attr **list, void *handle) {
    while (*list != NULL) {
        int err = attr_remove(list, handle);
        if (err != MPI_SUCCESS) return err;
    }
    return MPI_SUCCESS;
}

int mwmpi_attrs_copy(struct mwmpi_attr *from, void *old_handle, struct mwmpi_attr **to, void *new_handle) {
    for (struct mwmpi_attr *a = from; a != NULL; a = a->next) {
        struct keyval *kv = keyvals[a->keyval - KEYVAL_BASE];
        void *out = NULL;
        int flag = 0;
        if (kv->copy_fn == (void *)MPI_COMM_DUP_FN) {
            out = a->value;
            flag = 1;
        } else if (kv->copy_fn != NULL) {
            int err = kv->kind == KV_TYPE
                          ? ((MPI_Type_copy_attr_function *)kv->copy_fn)((MPI_Datatype)old_handle, a->keyval,
                                                                        kv->extra_state, a->value, &out, &flag)
                          : ((MPI_Comm_copy_attr_function *)kv->copy_fn)((MPI_Comm)old_handle, a->keyval,
                                                                        kv->extra_state, a->value, &out, &flag);
            if (err != MPI_SUCCESS) {
                mwmpi_attrs_delete_all(to, new_handle);
                return err;
            }
        }
        if (flag) {
            int err = attr_set(to, new_handle, a->keyval, out);
            if (err != MPI_SUCCESS) return err;
        }
    }
    return MPI_SUCCESS;
}

/* ---- communicators ------------------------------------------------------ */

int PMPI_Comm_create_keyval(MPI_Comm_copy_attr_function *copy_fn, MPI_Comm_delete_attr_function *delete_fn,
                            int *comm_keyval, void *extra_state) {
    return keyval_create(KV_COMM, (void *)copy_fn, (void *)delete_fn, extra_state, comm_keyval,
                         "MPI_Comm_create_keyval");
}

int PMPI_Keyval_create(MPI_Copy_function *copy_fn, MPI_Delete_function *delete_fn, int *keyval, void *extra_state) {
    return keyval_create(KV_COMM, (void *)copy_fn, (void *)delete_fn, extra_state, keyval, "MPI_Keyval_create");
}

int PMPI_Comm_free_keyval(int *comm_keyval) { return keyval_free(KV_COMM, comm_keyval, "MPI_Comm_free_keyval"); }
int PMPI_Keyval_free(int *keyval) { return keyval_free(KV_COMM, keyval, "MPI_Keyval_free"); }

int PMPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void *attribute_val) {
    static const char routine[] = "MPI_Comm_set_attr";
    MWMPI_COMM(c, comm, routine);
    if (keyval_of(comm_keyval, KV_COMM) == NULL)
        return mwmpi_raise(c, MPI_ERR_KEYVAL, routine, "invalid keyval %d", comm_keyval);
    int err = attr_set(&c->attrs, c->handle, comm_keyval, attribute_val);
    return err == MPI_SUCCESS ? err : mwmpi_raise(c, err, routine, "a delete callback failed");
}

int PMPI_Attr_put(MPI_Comm comm, int keyval, void *attribute_val) {
    return PMPI_Comm_set_attr(comm, keyval, attribute_val);
}

/* User attributes of a communicator (comm.c answers the predefined ones). */
int mwmpi_comm_user_attr(struct mwmpi_comm *c, int keyval, void *attribute_val, int *flag) {
    if (keyval_of(keyval, KV_COMM) == NULL) return MPI_ERR_KEYVAL;
    struct mwmpi_attr **at = find(&c->attrs, keyval);
    *flag = at != NULL;
    if (at != NULL) *(void **)attribute_val = (*at)->value;
    return MPI_SUCCESS;
}

int PMPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval) {
    static const char routine[] = "MPI_Comm_delete_attr";
    MWMPI_COMM(c, comm, routine);
    if (keyval_of(comm_keyval, KV_COMM) == NULL)
        return mwmpi_raise(c, MPI_ERR_KEYVAL, routine, "invalid keyval %d", comm_keyval);
    struct mwmpi_attr **at = find(&c->attrs, comm_keyval);
    if (at == NULL) return MPI_SUCCESS;
    int err = attr_remove(at, c->handle);
    return err == MPI_SUCCESS ? err : mwmpi_raise(c, err, routine, "the delete callback failed");
}

int PMPI_Attr_delete(MPI_Comm comm, int keyval) { return PMPI_Comm_delete_attr(comm, keyval); }

/* ---- datatypes ---------------------------------------------------------- */

int PMPI_Type_create_keyval(MPI_Type_copy_attr_function *copy_fn, MPI_Type_delete_attr_function *delete_fn,
                            int *type_keyval, void *extra_state) {
    return keyval_create(KV_TYPE, (void *)copy_fn, (void *)delete_fn, extra_state, type_keyval,
                         "MPI_Type_create_keyval");
}

int PMPI_Type_free_keyval(int *type_keyval) { return keyval_free(KV_TYPE, type_keyval, "MPI_Type_free_keyval"); }

#define TYPE(var, h, routine)                                                            \
    struct mwmpi_type *var = mwmpi_type_of(h);                                           \
    if (var == NULL) return mwmpi_raise(NULL, MPI_ERR_TYPE, routine, "invalid datatype")

int PMPI_Type_set_attr(MPI_Datatype datatype, int type_keyval, void *attribute_val) {
    static const char routine[] = "MPI_Type_set_attr";
    TYPE(t, datatype, routine);
    if (keyval_of(type_keyval, KV_TYPE) == NULL)
        return mwmpi_raise(NULL, MPI_ERR_KEYVAL, routine, "invalid keyval %d", type_keyval);
    int err = attr_set(&t->attrs, datatype, type_keyval, attribute_val);
    return err == MPI_SUCCESS ? err : mwmpi_raise(NULL, err, routine, "a delete callback failed");
}

int PMPI_Type_get_attr(MPI_Datatype datatype, int type_keyval, void *attribute_val, int *flag) {
    static const char routine[] = "MPI_Type_get_attr";
    TYPE(t, datatype, routine);
    if (attribute_val == NULL || flag == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    if (keyval_of(type_keyval, KV_TYPE) == NULL)
        return mwmpi_raise(NULL, MPI_ERR_KEYVAL, routine, "invalid keyval %d", type_keyval);
    struct mwmpi_attr **at = find(&t->attrs, type_keyval);
    *flag = at != NULL;
    if (at != NULL) *(void **)attribute_val = (*at)->value;
    return MPI_SUCCESS;
}

int PMPI_Type_delete_attr(MPI_Datatype datatype, int type_keyval) {
    static const char routine[] = "MPI_Type_delete_attr";
    TYPE(t, datatype, routine);
    if (keyval_of(type_keyval, KV_TYPE) == NULL)
        return mwmpi_raise(NULL, MPI_ERR_KEYVAL, routine, "invalid keyval %d", type_keyval);
    struct mwmpi_attr **at = find(&t->attrs, type_keyval);
    if (at == NULL) return MPI_SUCCESS;
    int err = attr_remove(at, datatype);
    return err == MPI_SUCCESS ? err : mwmpi_raise(NULL, err, routine, "the delete callback failed");
}

/* ---- windows: keyvals only ----------------------------------------------- */

int PMPI_Win_create_keyval(MPI_Win_copy_attr_function *copy_fn, MPI_Win_delete_attr_function *delete_fn,
                           int *win_keyval, void *extra_state) {
    return keyval_create(KV_WIN, (void *)copy_fn, (void *)delete_fn, extra_state, win_keyval,
                         "MPI_Win_create_keyval");
}

int PMPI_Win_free_keyval(int *win_keyval) { return keyval_free(KV_WIN, win_keyval, "MPI_Win_free_keyval"); }
