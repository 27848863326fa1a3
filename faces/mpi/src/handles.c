/*
 * handles.c: the mapping between the standard ABI's handles and this
 * face's objects. Predefined handles are the ABI's small integers; a user
 * object's handle is its address, and it also gets an integer handle
 * (MPI_X_toint / MPI_X_fromint, the ABI's replacement for c2f/f2c) from a
 * registry of live objects.
 */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mwmpi_obj **registry;
static int registry_len, registry_cap, registry_free_hint;

void mwmpi_obj_register(struct mwmpi_obj *obj, uint32_t magic) {
    obj->magic = magic;
    pthread_mutex_lock(&registry_lock);
    int slot = -1;
    for (int i = registry_free_hint; i < registry_len; i++)
        if (registry[i] == NULL) {
            slot = i;
            break;
        }
    if (slot < 0) {
        if (registry_len == registry_cap) {
            int cap = registry_cap ? registry_cap * 2 : 64;
            struct mwmpi_obj **grown = realloc(registry, (size_t)cap * sizeof *grown);
            if (grown == NULL) {
                pthread_mutex_unlock(&registry_lock);
                obj->id = -1; /* no integer handle; the object still works */
                return;
            }
            registry = grown;
            registry_cap = cap;
        }
        slot = registry_len++;
    }
    registry[slot] = obj;
    registry_free_hint = slot + 1;
    obj->id = MWMPI_ID_BASE + slot;
    pthread_mutex_unlock(&registry_lock);
}

void mwmpi_obj_unregister(struct mwmpi_obj *obj) {
    pthread_mutex_lock(&registry_lock);
    int slot = obj->id - MWMPI_ID_BASE;
    if (obj->id >= MWMPI_ID_BASE && slot < registry_len && registry[slot] == obj) {
        registry[slot] = NULL;
        if (slot < registry_free_hint) registry_free_hint = slot;
    }
    pthread_mutex_unlock(&registry_lock);
    obj->magic = MWMPI_MAGIC_DEAD;
}

void mwmpi_objs_each(void (*fn)(struct mwmpi_obj *obj)) {
    /* Finalize only: no other thread is in the library. */
    for (int i = 0; i < registry_len; i++)
        if (registry[i] != NULL) fn(registry[i]);
}

static void *object_of(const void *h, uint32_t magic) {
    if ((uintptr_t)h < MWMPI_PREDEFINED_LIMIT) return NULL;
    const struct mwmpi_obj *obj = h;
    return obj->magic == magic ? (void *)h : NULL;
}

struct mwmpi_comm *mwmpi_comm_of(MPI_Comm h) {
    if (h == MPI_COMM_WORLD) return &mwmpi_comm_world;
    if (h == MPI_COMM_SELF) return &mwmpi_comm_self;
    return object_of(h, MWMPI_MAGIC_COMM);
}

struct mwmpi_group *mwmpi_group_of(MPI_Group h) {
    if (h == MPI_GROUP_EMPTY) return &mwmpi_group_empty;
    return object_of(h, MWMPI_MAGIC_GROUP);
}
struct mwmpi_req *mwmpi_req_of(MPI_Request h) { return object_of(h, MWMPI_MAGIC_REQ); }

/* ---- integer handles ----------------------------------------------------- */

static int to_int(const void *h) {
    if ((uintptr_t)h < MWMPI_PREDEFINED_LIMIT) return (int)(uintptr_t)h;
    return ((const struct mwmpi_obj *)h)->id;
}

static void *from_int(int value) {
    if (value >= 0 && (unsigned)value < MWMPI_PREDEFINED_LIMIT) return (void *)(uintptr_t)value;
    void *found = NULL;
    pthread_mutex_lock(&registry_lock);
    int slot = value - MWMPI_ID_BASE;
    if (value >= MWMPI_ID_BASE && slot < registry_len) found = registry[slot];
    pthread_mutex_unlock(&registry_lock);
    return found;
}

/* A handle that names no live object converts to the kind's null handle. */
#define INT_HANDLES(Type, Name, null)                                        \
    int PMPI_##Name##_toint(Type h) { return to_int(h); }                    \
    Type PMPI_##Name##_fromint(int value) {                                  \
        void *h = from_int(value);                                           \
        return h != NULL ? (Type)h : null;                                   \
    }

INT_HANDLES(MPI_Comm, Comm, MPI_COMM_NULL)
INT_HANDLES(MPI_Errhandler, Errhandler, MPI_ERRHANDLER_NULL)
INT_HANDLES(MPI_File, File, MPI_FILE_NULL)
INT_HANDLES(MPI_Group, Group, MPI_GROUP_NULL)
INT_HANDLES(MPI_Info, Info, MPI_INFO_NULL)
INT_HANDLES(MPI_Message, Message, MPI_MESSAGE_NULL)
INT_HANDLES(MPI_Op, Op, MPI_OP_NULL)
INT_HANDLES(MPI_Request, Request, MPI_REQUEST_NULL)
INT_HANDLES(MPI_Session, Session, MPI_SESSION_NULL)
INT_HANDLES(MPI_Datatype, Type, MPI_DATATYPE_NULL)
INT_HANDLES(MPI_Win, Win, MPI_WIN_NULL)
