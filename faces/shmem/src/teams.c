/*
 * teams.c: teams (world, shared, split_strided, split_2d, translate,
 * config, destroy) over memwire teams, and contexts: each context keeps
 * the memwire handles of its nonblocking operations, which its quiet
 * finishes; blocking operations complete before they return.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct mwshmem_team mwshmem_world, mwshmem_shared;
shmem_team_t const SHMEM_TEAM_WORLD = &mwshmem_world;
shmem_team_t const SHMEM_TEAM_SHARED = &mwshmem_shared;

struct mwshmem_ctx mwshmem_default_ctx = {.team = &mwshmem_world, .lock = PTHREAD_MUTEX_INITIALIZER};
shmem_ctx_t const SHMEM_CTX_DEFAULT = &mwshmem_default_ctx;

/* A context drains its nonblocking operations once it holds this many. */
#define MAX_PENDING 4096

struct mwshmem_team *mwshmem_team(const char *routine, shmem_team_t team) {
    mwshmem_require_init(routine);
    if (team == SHMEM_TEAM_INVALID) mwshmem_fail(routine, "the team is SHMEM_TEAM_INVALID");
    return team;
}

static int *world_list(int n) {
    int *list = malloc((size_t)(n > 0 ? n : 1) * sizeof *list);
    if (list == NULL) mwshmem_fail("shmem_team", "out of memory");
    return list;
}

/* Fills in a team made by mw_team_split: this PE's place and every member's world PE. */
static void describe(const char *routine, struct mwshmem_team *team, mw_team *mt) {
    uint32_t rank, size;
    mwshmem_check(routine, mw_team_rank(mt, &rank, &size));
    team->mt = mt;
    team->my_pe = (int)rank;
    team->n_pes = (int)size;
    team->world = world_list((int)size);
    for (uint32_t i = 0; i < size; i++) {
        uint32_t world;
        mwshmem_check(routine, mw_team_world_rank(mt, i, &world));
        team->world[i] = (int)world;
    }
}

void mwshmem_teams_init(void) {
    mwshmem_world = (struct mwshmem_team){.mt = NULL, .my_pe = mwshmem.my_pe, .n_pes = mwshmem.n_pes, .predefined = true};
    mwshmem_world.world = world_list(mwshmem.n_pes);
    for (int pe = 0; pe < mwshmem.n_pes; pe++) mwshmem_world.world[pe] = pe;
    /* SHMEM_TEAM_SHARED: the PEs whose heaps this one maps (same host,
     * shared memory); the lowest of them names the group. */
    uint32_t color = (uint32_t)mwshmem.my_pe;
    for (int pe = 0; pe < mwshmem.n_pes; pe++)
        if (mwshmem.peer_heap[pe] != NULL) {
            color = (uint32_t)pe;
            break;
        }
    mw_team *mt = NULL;
    mwshmem_check("shmem_init", mw_team_split(mwshmem.ep, NULL, color, (uint32_t)mwshmem.my_pe, &mt));
    mwshmem_shared = (struct mwshmem_team){.predefined = true};
    describe("shmem_init", &mwshmem_shared, mt);
    mwshmem_default_ctx.team = &mwshmem_world;
}

static void free_team(struct mwshmem_team *team) {
    if (team->mt != NULL) mwshmem_check("shmem_team_destroy", mw_team_free(&team->mt));
    free(team->world);
    team->world = NULL;
}

void mwshmem_teams_fini(void) {
    mwshmem_ctx_complete("shmem_finalize", &mwshmem_default_ctx);
    free(mwshmem_default_ctx.pending);
    mwshmem_default_ctx.pending = NULL;
    mwshmem_default_ctx.npending = mwshmem_default_ctx.cap = 0;
    free_team(&mwshmem_shared);
    free_team(&mwshmem_world);
}

int shmem_team_my_pe(shmem_team_t team) {
    mwshmem_require_init("shmem_team_my_pe");
    return team == SHMEM_TEAM_INVALID ? -1 : team->my_pe;
}

int shmem_team_n_pes(shmem_team_t team) {
    mwshmem_require_init("shmem_team_n_pes");
    return team == SHMEM_TEAM_INVALID ? -1 : team->n_pes;
}

int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config) {
    mwshmem_require_init("shmem_team_get_config");
    if (team == SHMEM_TEAM_INVALID || config == NULL) return 1;
    if (config_mask & SHMEM_TEAM_NUM_CONTEXTS) config->num_contexts = team->config.num_contexts;
    return 0;
}

int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team) {
    mwshmem_require_init("shmem_team_translate_pe");
    if (src_team == SHMEM_TEAM_INVALID || dest_team == SHMEM_TEAM_INVALID) return -1;
    if (src_pe < 0 || src_pe >= src_team->n_pes) return -1;
    int world = src_team->world[src_pe];
    for (int i = 0; i < dest_team->n_pes; i++)
        if (dest_team->world[i] == world) return i;
    return -1;
}

/* Collective over `parent`: members (those with a color) form a team, in `key` order. */
static struct mwshmem_team *split(const char *routine, struct mwshmem_team *parent, bool member, uint32_t color,
                                  uint32_t key, const shmem_team_config_t *config, long mask) {
    mw_team *mt = NULL;
    mwshmem_check(routine, mw_team_split(mwshmem.ep, parent->mt, member ? color : MW_TEAM_NONE, key, &mt));
    if (!member) return SHMEM_TEAM_INVALID;
    struct mwshmem_team *team = calloc(1, sizeof *team);
    if (team == NULL) mwshmem_fail(routine, "out of memory");
    describe(routine, team, mt);
    if (config != NULL && (mask & SHMEM_TEAM_NUM_CONTEXTS)) team->config.num_contexts = config->num_contexts;
    return team;
}

int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t *config, long config_mask, shmem_team_t *new_team) {
    const char *routine = "shmem_team_split_strided";
    mwshmem_require_init(routine);
    if (new_team != NULL) *new_team = SHMEM_TEAM_INVALID;
    if (parent_team == SHMEM_TEAM_INVALID || new_team == NULL) return 1;
    struct mwshmem_team *parent = parent_team;
    long last = (long)start + (long)(size - 1) * stride;
    /* Every PE sees the same arguments, so every PE refuses alike. */
    if (size < 1 || start < 0 || start >= parent->n_pes || last < 0 || last >= parent->n_pes ||
        (stride == 0 && size > 1))
        return 1;
    int me = parent->my_pe, index = -1;
    if (stride == 0) index = me == start ? 0 : -1;
    else if ((me - start) % stride == 0 && (me - start) / stride >= 0 && (me - start) / stride < size)
        index = (me - start) / stride;
    *new_team = split(routine, parent, index >= 0, 0, (uint32_t)(index < 0 ? 0 : index), config, config_mask);
    return 0;
}

int shmem_team_split_2d(shmem_team_t parent_team, int xrange, const shmem_team_config_t *xaxis_config,
                        long xaxis_mask, shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config,
                        long yaxis_mask, shmem_team_t *yaxis_team) {
    const char *routine = "shmem_team_split_2d";
    mwshmem_require_init(routine);
    if (xaxis_team != NULL) *xaxis_team = SHMEM_TEAM_INVALID;
    if (yaxis_team != NULL) *yaxis_team = SHMEM_TEAM_INVALID;
    if (parent_team == SHMEM_TEAM_INVALID || xaxis_team == NULL || yaxis_team == NULL || xrange < 1) return 1;
    struct mwshmem_team *parent = parent_team;
    if (xrange > parent->n_pes) xrange = parent->n_pes;
    int me = parent->my_pe, x = me % xrange, y = me / xrange;
    *xaxis_team = split(routine, parent, true, (uint32_t)y, (uint32_t)x, xaxis_config, xaxis_mask);
    *yaxis_team = split(routine, parent, true, (uint32_t)x, (uint32_t)y, yaxis_config, yaxis_mask);
    return 0;
}

void shmem_team_destroy(shmem_team_t team) {
    mwshmem_require_init("shmem_team_destroy");
    if (team == SHMEM_TEAM_INVALID) return;
    if (team->predefined) mwshmem_fail("shmem_team_destroy", "a predefined team cannot be destroyed");
    free_team(team);
    free(team);
}

/* ---- contexts -------------------------------------------------------------- */

struct mwshmem_ctx *mwshmem_ctx(const char *routine, shmem_ctx_t ctx) {
    if (ctx == SHMEM_CTX_INVALID) mwshmem_fail(routine, "the context is SHMEM_CTX_INVALID");
    return ctx;
}

int mwshmem_ctx_world_pe(const char *routine, shmem_ctx_t ctx, int pe) {
    struct mwshmem_team *team = ctx->team;
    if (pe < 0 || pe >= team->n_pes)
        mwshmem_fail(routine, "PE %d is not in the context's team (0..%d)", pe, team->n_pes - 1);
    return team->world[pe];
}

static void complete_locked(const char *routine, struct mwshmem_ctx *ctx) {
    for (size_t i = 0; i < ctx->npending; i++) {
        struct mwshmem_pending *p = &ctx->pending[i];
        if (p->fetch_out == NULL) {
            mwshmem_check(routine, mw_wait(&p->handle));
            continue;
        }
        uint64_t value;
        mwshmem_check(routine, mw_wait_value(&p->handle, &value));
        if (p->fetch_width == 4) {
            uint32_t v32 = (uint32_t)value;
            memcpy(p->fetch_out, &v32, 4);
        } else {
            memcpy(p->fetch_out, &value, 8);
        }
    }
    ctx->npending = 0;
}

void mwshmem_ctx_add(struct mwshmem_ctx *ctx, mw_handle *handle, void *fetch_out, unsigned fetch_width) {
    pthread_mutex_lock(&ctx->lock);
    if (ctx->npending == MAX_PENDING) complete_locked("shmem_quiet", ctx);
    if (ctx->npending == ctx->cap) {
        size_t cap = ctx->cap ? 2 * ctx->cap : 64;
        struct mwshmem_pending *grown = realloc(ctx->pending, cap * sizeof *grown);
        if (grown == NULL) mwshmem_fail("shmem_ctx", "out of memory");
        ctx->pending = grown;
        ctx->cap = cap;
    }
    ctx->pending[ctx->npending++] = (struct mwshmem_pending){handle, fetch_out, fetch_width};
    pthread_mutex_unlock(&ctx->lock);
}

void mwshmem_ctx_complete(const char *routine, struct mwshmem_ctx *ctx) {
    pthread_mutex_lock(&ctx->lock);
    complete_locked(routine, ctx);
    pthread_mutex_unlock(&ctx->lock);
    if (__atomic_exchange_n(&ctx->implicit, 0, __ATOMIC_ACQ_REL)) mwshmem_check(routine, mw_quiet(mwshmem.ep));
    /* Stores through shmem_ptr pointers are ordered too. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx) {
    mwshmem_require_init("shmem_team_create_ctx");
    if (ctx == NULL) return 1;
    *ctx = SHMEM_CTX_INVALID;
    if (team == SHMEM_TEAM_INVALID) return 1;
    if (options & ~(SHMEM_CTX_SERIALIZED | SHMEM_CTX_PRIVATE | SHMEM_CTX_NOSTORE)) return 1;
    struct mwshmem_ctx *made = calloc(1, sizeof *made);
    if (made == NULL) return 1;
    made->team = team;
    made->options = options;
    pthread_mutex_init(&made->lock, NULL);
    *ctx = made;
    return 0;
}

int shmem_ctx_create(long options, shmem_ctx_t *ctx) { return shmem_team_create_ctx(SHMEM_TEAM_WORLD, options, ctx); }

void shmem_ctx_destroy(shmem_ctx_t ctx) {
    mwshmem_require_init("shmem_ctx_destroy");
    if (ctx == SHMEM_CTX_INVALID) return;
    if (ctx == SHMEM_CTX_DEFAULT) mwshmem_fail("shmem_ctx_destroy", "SHMEM_CTX_DEFAULT cannot be destroyed");
    mwshmem_ctx_complete("shmem_ctx_destroy", ctx);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx->pending);
    free(ctx);
}

int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team) {
    mwshmem_require_init("shmem_ctx_get_team");
    if (team == NULL) return 1;
    if (ctx == SHMEM_CTX_INVALID) {
        *team = SHMEM_TEAM_INVALID;
        return 1;
    }
    *team = ctx->team;
    return 0;
}

/* ---- ordering --------------------------------------------------------------- */

void shmem_ctx_fence(shmem_ctx_t ctx) {
    mwshmem_require_init("shmem_ctx_fence");
    if (ctx == SHMEM_CTX_INVALID) return;
    /* memwire executes one initiator's operations at a target in issue
     * order on every path; the store fence orders shmem_ptr stores. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    mwshmem_check("shmem_ctx_fence", mw_fence(mwshmem.ep));
}

void shmem_fence(void) { shmem_ctx_fence(SHMEM_CTX_DEFAULT); }

void shmem_ctx_quiet(shmem_ctx_t ctx) {
    mwshmem_require_init("shmem_ctx_quiet");
    if (ctx == SHMEM_CTX_INVALID) return;
    mwshmem_ctx_complete("shmem_ctx_quiet", ctx);
}

void shmem_quiet(void) { shmem_ctx_quiet(SHMEM_CTX_DEFAULT); }

void shmem_ctx_pe_quiet(shmem_ctx_t ctx, const int *target_pes, size_t npes) {
    (void)target_pes;
    (void)npes;
    /* Completing everything of the context includes the operations to those PEs. */
    shmem_ctx_quiet(ctx);
}

void shmem_pe_quiet(const int *target_pes, size_t npes) { shmem_ctx_pe_quiet(SHMEM_CTX_DEFAULT, target_pes, npes); }
