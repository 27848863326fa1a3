/*
 * internal.h: what the OpenSHMEM face's sources share: the library's
 * state (memwire endpoint, symmetric heap, registered data segments),
 * contexts and teams as the face keeps them, address translation, and the
 * abort path every error takes. Uses memwire's public C API only.
 */
#ifndef MWSHMEM_INTERNAL_H
#define MWSHMEM_INTERNAL_H

#include <memwire.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MWSHMEM_NO_GENERIC
#include "shmem.h"

/* Most writable segments of the executable (data, bss) made remotely accessible. */
#define MWSHMEM_MAX_SEGMENTS 4

/* One symmetric memory area: the heap, or one writable segment of the
 * executable. `keys[pe]` names it at `pe` (the heap's key is the same on
 * every PE; a registered segment's key differs). */
struct mwshmem_area {
    char *base;
    size_t len;
    mw_region *region;
    mw_key *keys;
    /* Where `base` lies in the region at each PE (NULL: at its start). */
    uint64_t *starts;
    uint64_t local_start;
};

/* A nonblocking operation the face must finish at quiet: the memwire
 * handle, and for a fetching AMO where its old value goes. */
struct mwshmem_pending {
    mw_handle *handle;
    void *fetch_out; /* NULL: nothing to store */
    unsigned fetch_width; /* 4 or 8 */
};

struct mwshmem_team {
    mw_team *mt; /* NULL: the whole job (memwire's own job team) */
    int my_pe, n_pes;
    int *world; /* world PE of each member */
    shmem_team_config_t config;
    bool predefined;
};

struct mwshmem_ctx {
    struct mwshmem_team *team;
    long options;
    pthread_mutex_t lock;
    struct mwshmem_pending *pending;
    size_t npending, cap;
    /* Set (atomically) when an implicit put (mw_put_nbi) was issued on the
     * context since its last quiet: the quiet then calls mw_quiet. */
    int implicit;
};

struct mwshmem_state {
    mw_endpoint *ep;
    int my_pe, n_pes;
    int initialized; /* 1 between init and finalize */
    int ever_initialized;
    int thread_level;
    struct mwshmem_area heap;
    struct mwshmem_area segs[MWSHMEM_MAX_SEGMENTS];
    int nsegs;
    /* The heap of each PE as mapped here, or NULL (shmem_ptr). */
    char **peer_heap;
    /* Scratch symmetric words the face's own algorithms use (locks, collect). */
    long *scratch;
};

extern struct mwshmem_state mwshmem;
extern struct mwshmem_team mwshmem_world, mwshmem_shared;
extern struct mwshmem_ctx mwshmem_default_ctx;

/* Prints "routine: message" and ends the job as shmem_global_exit(1). */
MWSHMEM_NORETURN void mwshmem_fail(const char *routine, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Aborts with memwire's reason unless `status` is MW_OK. */
void mwshmem_check(const char *routine, mw_status status);
/* Aborts unless the library is initialized. */
void mwshmem_require_init(const char *routine);

/* Where `addr..addr+len` of the calling PE's symmetric memory lives on
 * `pe` (a world PE): its region key and offset. Aborts, naming the
 * routine and argument, when the range is not symmetric. */
struct mwshmem_remote {
    mw_key key;
    uint64_t offset;
};
struct mwshmem_remote mwshmem_translate(const char *routine, const char *arg, const void *addr, size_t len, int pe);
/* The local area holding `addr..addr+len`, or NULL. */
const struct mwshmem_area *mwshmem_area_of(const void *addr, size_t len);

/* World PE of `pe` in the context's team; aborts when out of range. */
int mwshmem_ctx_world_pe(const char *routine, shmem_ctx_t ctx, int pe);
/* The context to use (SHMEM_CTX_DEFAULT resolves here); aborts on SHMEM_CTX_INVALID. */
struct mwshmem_ctx *mwshmem_ctx(const char *routine, shmem_ctx_t ctx);
/* Records a nonblocking operation on `ctx` to be finished by its quiet. */
void mwshmem_ctx_add(struct mwshmem_ctx *ctx, mw_handle *handle, void *fetch_out, unsigned fetch_width);
/* Finishes every recorded operation of `ctx`. */
void mwshmem_ctx_complete(const char *routine, struct mwshmem_ctx *ctx);

/* A team handle checked for use (aborts on SHMEM_TEAM_INVALID). */
struct mwshmem_team *mwshmem_team(const char *routine, shmem_team_t team);

/* Waits politely: progress memwire, and give the CPU away after a while. */
void mwshmem_poll(unsigned *spins);

/* Heap setup and teardown (heap.c). */
void mwshmem_heap_init(void);
void mwshmem_heap_fini(void);
/* Team setup and teardown (teams.c). */
void mwshmem_teams_init(void);
void mwshmem_teams_fini(void);

#endif /* MWSHMEM_INTERNAL_H */
