/*
 * info.c: info objects (ordered key/value strings, MPI-5.0 10): create,
 * dup, free, set, get, delete, the key queries, MPI_INFO_ENV (the job's
 * command, argv, maxprocs, host, wdir... as far as known), Info_create_env,
 * and Comm_set_info / Comm_get_info (a communicator keeps the hints it was
 * given; none changes how it behaves here).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* MPI_INFO_ENV's object: filled at first use. */
static struct mwmpi_info info_env;
static bool info_env_ready;

static void info_fill_env(struct mwmpi_info *info);

struct mwmpi_info *mwmpi_info_of(MPI_Info h) {
    if (h == MPI_INFO_ENV) {
        if (!info_env_ready) {
            info_env.obj.magic = MWMPI_MAGIC_INFO;
            info_fill_env(&info_env);
            info_env_ready = true;
        }
        return &info_env;
    }
    if ((uintptr_t)h < MWMPI_PREDEFINED_LIMIT) return NULL;
    struct mwmpi_info *info = (struct mwmpi_info *)h;
    return info->obj.magic == MWMPI_MAGIC_INFO ? info : NULL;
}

struct mwmpi_info *mwmpi_info_new(void) {
    struct mwmpi_info *info = calloc(1, sizeof *info);
    if (info != NULL) mwmpi_obj_register(&info->obj, MWMPI_MAGIC_INFO);
    return info;
}

void mwmpi_info_release(struct mwmpi_info *info) {
    if (info == NULL || info == &info_env) return;
    for (int i = 0; i < info->n; i++) {
        free(info->keys[i]);
        free(info->values[i]);
    }
    free(info->keys);
    free(info->values);
    mwmpi_obj_unregister(&info->obj);
    free(info);
}

static int find_key(const struct mwmpi_info *info, const char *key) {
    for (int i = 0; i < info->n; i++)
        if (strcmp(info->keys[i], key) == 0) return i;
    return -1;
}

int mwmpi_info_put(struct mwmpi_info *info, const char *key, const char *value) {
    int i = find_key(info, key);
    char *v = strdup(value);
    if (v == NULL) return MPI_ERR_NO_MEM;
    if (i >= 0) {
        free(info->values[i]);
        info->values[i] = v;
        return MPI_SUCCESS;
    }
    if (info->n == info->cap) {
        int cap = info->cap ? info->cap * 2 : 8;
        char **k = realloc(info->keys, (size_t)cap * sizeof *k);
        if (k != NULL) info->keys = k;
        char **vs = realloc(info->values, (size_t)cap * sizeof *vs);
        if (vs != NULL) info->values = vs;
        if (k == NULL || vs == NULL) {
            free(v);
            return MPI_ERR_NO_MEM;
        }
        info->cap = cap;
    }
    info->keys[info->n] = strdup(key);
    if (info->keys[info->n] == NULL) {
        free(v);
        return MPI_ERR_NO_MEM;
    }
    info->values[info->n++] = v;
    return MPI_SUCCESS;
}

int mwmpi_info_copy(const struct mwmpi_info *from, struct mwmpi_info **out) {
    struct mwmpi_info *info = mwmpi_info_new();
    if (info == NULL) return MPI_ERR_NO_MEM;
    for (int i = 0; from != NULL && i < from->n; i++)
        if (mwmpi_info_put(info, from->keys[i], from->values[i]) != MPI_SUCCESS) {
            mwmpi_info_release(info);
            return MPI_ERR_NO_MEM;
        }
    *out = info;
    return MPI_SUCCESS;
}

/* What MPI-5.0 10.4 names for MPI_INFO_ENV that this process knows. */
static void info_fill_env(struct mwmpi_info *info) {
    char buf[4096];
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (f != NULL) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        if (n > 0) {
            mwmpi_info_put(info, "command", buf);
            /* argv: the arguments after the command, space separated. */
            size_t first = strlen(buf) + 1;
            for (size_t i = first; i + 1 < n; i++)
                if (buf[i] == 0) buf[i] = ' ';
            if (first < n) mwmpi_info_put(info, "argv", buf + first);
        }
    }
    snprintf(buf, sizeof buf, "%d", mwmpi.world_size);
    mwmpi_info_put(info, "maxprocs", buf);
    mwmpi_info_put(info, "soft", buf);
    mwmpi_info_put(info, "host", mwmpi.processor_name);
    if (getcwd(buf, sizeof buf) != NULL) mwmpi_info_put(info, "wdir", buf);
    const char *level = mwmpi.thread_level == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE"
                        : mwmpi.thread_level == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
                        : mwmpi.thread_level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED"
                                                                    : "MPI_THREAD_SINGLE";
    mwmpi_info_put(info, "thread_level", level);
}

#define INFO(var, h, routine)                                                          \
    struct mwmpi_info *var = mwmpi_info_of(h);                                         \
    if (var == NULL) return mwmpi_raise(NULL, MPI_ERR_INFO, routine, "invalid info")

static int check_key(const char *key, const char *routine) {
    if (key == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL key");
    size_t len = strlen(key);
    if (len == 0 || len >= MPI_MAX_INFO_KEY)
        return mwmpi_raise(NULL, MPI_ERR_INFO_KEY, routine, "key of %zu characters", len);
    return MPI_SUCCESS;
}

int PMPI_Info_create(MPI_Info *info) {
    if (info == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Info_create", "NULL argument");
    struct mwmpi_info *i = mwmpi_info_new();
    if (i == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Info_create", NULL);
    *info = (MPI_Info)i;
    return MPI_SUCCESS;
}

int PMPI_Info_create_env(int argc, char *argv[], MPI_Info *info) {
    (void)argc;
    (void)argv; /* the environment is this process's, whatever argv says */
    if (info == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Info_create_env", "NULL argument");
    struct mwmpi_info *copy;
    if (mwmpi_info_copy(mwmpi_info_of(MPI_INFO_ENV), &copy) != MPI_SUCCESS)
        return mwmpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Info_create_env", NULL);
    *info = (MPI_Info)copy;
    return MPI_SUCCESS;
}

int PMPI_Info_dup(MPI_Info info, MPI_Info *newinfo) {
    INFO(i, info, "MPI_Info_dup");
    if (newinfo == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Info_dup", "NULL argument");
    struct mwmpi_info *copy;
    if (mwmpi_info_copy(i, &copy) != MPI_SUCCESS) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Info_dup", NULL);
    *newinfo = (MPI_Info)copy;
    return MPI_SUCCESS;
}

int PMPI_Info_free(MPI_Info *info) {
    if (info == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Info_free", "NULL argument");
    INFO(i, *info, "MPI_Info_free");
    if (i == &info_env) return mwmpi_raise(NULL, MPI_ERR_INFO, "MPI_Info_free", "MPI_INFO_ENV cannot be freed");
    mwmpi_info_release(i);
    *info = MPI_INFO_NULL;
    return MPI_SUCCESS;
}

int PMPI_Info_set(MPI_Info info, const char *key, const char *value) {
    static const char routine[] = "MPI_Info_set";
    INFO(i, info, routine);
    int err = check_key(key, routine);
    if (err != MPI_SUCCESS) return err;
    if (value == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL value");
    if (strlen(value) >= MPI_MAX_INFO_VAL) return mwmpi_raise(NULL, MPI_ERR_INFO_VALUE, routine, "value too long");
    if (i == &info_env) return mwmpi_raise(NULL, MPI_ERR_INFO, routine, "MPI_INFO_ENV is read-only");
    err = mwmpi_info_put(i, key, value);
    return err == MPI_SUCCESS ? err : mwmpi_raise(NULL, err, routine, NULL);
}

int PMPI_Info_delete(MPI_Info info, const char *key) {
    static const char routine[] = "MPI_Info_delete";
    INFO(i, info, routine);
    int err = check_key(key, routine);
    if (err != MPI_SUCCESS) return err;
    int at = find_key(i, key);
    if (at < 0) return mwmpi_raise(NULL, MPI_ERR_INFO_NOKEY, routine, "no key '%s'", key);
    if (i == &info_env) return mwmpi_raise(NULL, MPI_ERR_INFO, routine, "MPI_INFO_ENV is read-only");
    free(i->keys[at]);
    free(i->values[at]);
    memmove(i->keys + at, i->keys + at + 1, (size_t)(i->n - at - 1) * sizeof *i->keys);
    memmove(i->values + at, i->values + at + 1, (size_t)(i->n - at - 1) * sizeof *i->values);
    i->n--;
    return MPI_SUCCESS;
}

int PMPI_Info_get(MPI_Info info, const char *key, int valuelen, char *value, int *flag) {
    static const char routine[] = "MPI_Info_get";
    INFO(i, info, routine);
    int err = check_key(key, routine);
    if (err != MPI_SUCCESS) return err;
    if (flag == NULL || (value == NULL && valuelen > 0)) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    if (valuelen < 0) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "negative valuelen");
    int at = find_key(i, key);
    *flag = at >= 0;
    if (at >= 0 && value != NULL) {
        /* valuelen excludes the terminating null (MPI-5.0 10.2). */
        size_t n = strlen(i->values[at]);
        if (n > (size_t)valuelen) n = (size_t)valuelen;
        memcpy(value, i->values[at], n);
        value[n] = 0;
    }
    return MPI_SUCCESS;
}

int PMPI_Info_get_string(MPI_Info info, const char *key, int *buflen, char *value, int *flag) {
    static const char routine[] = "MPI_Info_get_string";
    INFO(i, info, routine);
    int err = check_key(key, routine);
    if (err != MPI_SUCCESS) return err;
    if (flag == NULL || buflen == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    int at = find_key(i, key);
    *flag = at >= 0;
    if (at < 0) return MPI_SUCCESS;
    int need = (int)strlen(i->values[at]) + 1;
    if (*buflen > 0 && value != NULL) {
        int n = need < *buflen ? need : *buflen;
        memcpy(value, i->values[at], (size_t)n - 1);
        value[n - 1] = 0;
    }
    *buflen = need;
    return MPI_SUCCESS;
}

int PMPI_Info_get_valuelen(MPI_Info info, const char *key, int *valuelen, int *flag) {
    static const char routine[] = "MPI_Info_get_valuelen";
    INFO(i, info, routine);
    int err = check_key(key, routine);
    if (err != MPI_SUCCESS) return err;
    if (flag == NULL || valuelen == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    int at = find_key(i, key);
    *flag = at >= 0;
    if (at >= 0) *valuelen = (int)strlen(i->values[at]);
    return MPI_SUCCESS;
}

int PMPI_Info_get_nkeys(MPI_Info info, int *nkeys) {
    INFO(i, info, "MPI_Info_get_nkeys");
    if (nkeys == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Info_get_nkeys", "NULL argument");
    *nkeys = i->n;
    return MPI_SUCCESS;
}

int PMPI_Info_get_nthkey(MPI_Info info, int n, char *key) {
    INFO(i, info, "MPI_Info_get_nthkey");
    if (key == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Info_get_nthkey", "NULL argument");
    if (n < 0 || n >= i->n) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Info_get_nthkey", "no key %d of %d", n, i->n);
    snprintf(key, MPI_MAX_INFO_KEY, "%s", i->keys[n]);
    return MPI_SUCCESS;
}

/* ---- hints kept by communicators ---------------------------------------- */

int PMPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
    static const char routine[] = "MPI_Comm_set_info";
    MWMPI_COMM(c, comm, routine);
    struct mwmpi_info *i = mwmpi_info_of(info);
    if (i == NULL) return mwmpi_raise(c, MPI_ERR_INFO, routine, "invalid info");
    struct mwmpi_info *copy;
    if (mwmpi_info_copy(i, &copy) != MPI_SUCCESS) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    mwmpi_info_release(c->info);
    c->info = copy;
    return MPI_SUCCESS;
}

int PMPI_Comm_get_info(MPI_Comm comm, MPI_Info *info_used) {
    static const char routine[] = "MPI_Comm_get_info";
    MWMPI_COMM(c, comm, routine);
    if (info_used == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL argument");
    struct mwmpi_info *copy;
    if (mwmpi_info_copy(c->info, &copy) != MPI_SUCCESS) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    *info_used = (MPI_Info)copy;
    return MPI_SUCCESS;
}
