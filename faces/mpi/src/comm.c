/*
 * comm.c: communicators: COMM_WORLD and COMM_SELF, dup, split, create,
 * free, compare, rank, size, names, the predefined attributes programs
 * query (TAG_UB, WTIME_IS_GLOBAL, APPNUM, UNIVERSE_SIZE, ...).
 *
 * Isolation: each communicator has an id, agreed by its members as the
 * maximum of their next unused ids, so no process ever has two live
 * communicators with one id; its messages travel in memwire matching
 * context MWMPI_CTX_BASE + 2 id, and so never match another's. Its
 * collectives run on a memwire team of its own.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct mwmpi_comm mwmpi_comm_world, mwmpi_comm_self;

static int *identity_from_world(const int *world, int size) {
    int *from = malloc((size_t)mwmpi.world_size * sizeof *from);
    if (from == NULL) return NULL;
    for (int i = 0; i < mwmpi.world_size; i++) from[i] = -1;
    for (int i = 0; i < size; i++) from[world[i]] = i;
    return from;
}

static void comm_setup(struct mwmpi_comm *c, MPI_Comm handle, uint32_t id, int size, int *world) {
    c->handle = handle;
    c->size = size;
    c->world = world;
    c->from_world = identity_from_world(world, size);
    c->rank = c->from_world != NULL ? c->from_world[mwmpi.world_rank] : -1;
    c->ctx = MWMPI_CTX_BASE + 2 * id;
    c->errh = &mwmpi_errors_are_fatal;
}

void mwmpi_comms_init(void) {
    int n = mwmpi.world_size;
    int *world = malloc((size_t)n * sizeof *world);
    int *self = malloc(sizeof *self);
    if (world == NULL || self == NULL) {
        fprintf(stderr, "MPI_Init: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < n; i++) world[i] = i;
    *self = mwmpi.world_rank;
    memset(&mwmpi_comm_world, 0, sizeof mwmpi_comm_world);
    memset(&mwmpi_comm_self, 0, sizeof mwmpi_comm_self);
    comm_setup(&mwmpi_comm_world, MPI_COMM_WORLD, 0, n, world);
    comm_setup(&mwmpi_comm_self, MPI_COMM_SELF, 1, 1, self);
    mwmpi_comm_world.obj.magic = mwmpi_comm_self.obj.magic = MWMPI_MAGIC_COMM;
    mwmpi_comm_world.predefined = mwmpi_comm_self.predefined = true;
    strcpy(mwmpi_comm_world.name, "MPI_COMM_WORLD");
    strcpy(mwmpi_comm_self.name, "MPI_COMM_SELF");
    mwmpi.next_comm_id = 2;
}

int mwmpi_comms_delete_attrs(void) {
    /* MPI-5.0 11.2.2: COMM_SELF's attributes go first, as if freed. */
    int err = mwmpi_attrs_delete_all(&mwmpi_comm_self.attrs, MPI_COMM_SELF);
    if (err == MPI_SUCCESS) err = mwmpi_attrs_delete_all(&mwmpi_comm_world.attrs, MPI_COMM_WORLD);
    return err;
}

void mwmpi_comms_fini(void) {
    mwmpi_info_release(mwmpi_comm_world.info);
    mwmpi_info_release(mwmpi_comm_self.info);
    free(mwmpi_comm_world.world);
    free(mwmpi_comm_world.from_world);
    free(mwmpi_comm_self.world);
    free(mwmpi_comm_self.from_world);
}

/* Whether collectives on `c` go to memwire (a team of two or more). */
static bool has_team(const struct mwmpi_comm *c) { return c->size > 1; }

/* Agrees on a fresh communicator id among `parent`'s members. */
static int agree_id(struct mwmpi_comm *parent, uint32_t *id, const char *routine) {
    uint32_t mine = mwmpi.next_comm_id, agreed = mine;
    if (has_team(parent)) {
        mw_status st = mw_allreduce(mwmpi.ep, parent->team, MW_DTYPE_U32, MW_OP_MAX, &mine, &agreed, 1);
        if (st != MW_OK) return mwmpi_raise_mw(parent, st, routine);
    }
    if (agreed >= (UINT32_MAX - MWMPI_CTX_BASE) / 2)
        return mwmpi_raise(parent, MPI_ERR_INTERN, routine, "communicator ids exhausted");
    *id = agreed;
    mwmpi.next_comm_id = agreed + 1;
    return MPI_SUCCESS;
}

/* A new communicator object for `team` (or, with no team, this process
 * alone), inheriting `parent`'s error handler. */
static int comm_new(struct mwmpi_comm *parent, uint32_t id, mw_team *team, MPI_Comm *out, const char *routine) {
    int size = 1;
    int *world;
    if (team != NULL) {
        uint32_t r, n;
        mw_status st = mw_team_rank(team, &r, &n);
        if (st != MW_OK) return mwmpi_raise_mw(parent, st, routine);
        size = (int)n;
        world = malloc((size_t)size * sizeof *world);
        if (world == NULL) return mwmpi_raise(parent, MPI_ERR_NO_MEM, routine, NULL);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t w;
            st = mw_team_world_rank(team, i, &w);
            if (st != MW_OK) {
                free(world);
                return mwmpi_raise_mw(parent, st, routine);
            }
            world[i] = (int)w;
        }
    } else {
        world = malloc(sizeof *world);
        if (world == NULL) return mwmpi_raise(parent, MPI_ERR_NO_MEM, routine, NULL);
        world[0] = mwmpi.world_rank;
    }
    struct mwmpi_comm *c = calloc(1, sizeof *c);
    if (c == NULL) {
        free(world);
        return mwmpi_raise(parent, MPI_ERR_NO_MEM, routine, NULL);
    }
    mwmpi_obj_register(&c->obj, MWMPI_MAGIC_COMM);
    comm_setup(c, (MPI_Comm)c, id, size, world);
    if (c->from_world == NULL) {
        free(world);
        mwmpi_obj_unregister(&c->obj);
        free(c);
        return mwmpi_raise(parent, MPI_ERR_NO_MEM, routine, NULL);
    }
    /* A team of one does nothing memwire needs to do. */
    if (team != NULL && size == 1) mw_team_free(&team);
    c->team = team;
    c->errh = parent->errh;
    mwmpi_errh_retain(c->errh);
    *out = c->handle;
    return MPI_SUCCESS;
}

int PMPI_Comm_size(MPI_Comm comm, int *size) {
    MWMPI_COMM(c, comm, "MPI_Comm_size");
    if (size == NULL) return mwmpi_raise(c, MPI_ERR_ARG, "MPI_Comm_size", "NULL argument");
    *size = c->size;
    return MPI_SUCCESS;
}

int PMPI_Comm_rank(MPI_Comm comm, int *rank) {
    MWMPI_COMM(c, comm, "MPI_Comm_rank");
    if (rank == NULL) return mwmpi_raise(c, MPI_ERR_ARG, "MPI_Comm_rank", "NULL argument");
    *rank = c->rank;
    return MPI_SUCCESS;
}

/* memwire's key is unsigned: this keeps the order of MPI's signed keys. */
static uint32_t order_key(int key) { return (uint32_t)key ^ 0x80000000u; }

int PMPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    static const char routine[] = "MPI_Comm_split";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    if (newcomm == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL newcomm");
    if (color < 0 && color != MPI_UNDEFINED) return mwmpi_raise(c, MPI_ERR_ARG, routine, "negative color %d", color);
    uint32_t id;
    int err = agree_id(c, &id, routine);
    if (err != MPI_SUCCESS) return err;
    mw_team *team = NULL;
    if (has_team(c)) {
        mw_status st = mw_team_split(mwmpi.ep, c->team, color == MPI_UNDEFINED ? MW_TEAM_NONE : (uint32_t)color,
                                     order_key(key), &team);
        if (st != MW_OK) return mwmpi_raise_mw(c, st, routine);
    }
    if (color == MPI_UNDEFINED) {
        *newcomm = MPI_COMM_NULL;
        return MPI_SUCCESS;
    }
    return comm_new(c, id, team, newcomm, routine);
}

int PMPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    static const char routine[] = "MPI_Comm_dup";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    if (newcomm == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL newcomm");
    uint32_t id;
    int err = agree_id(c, &id, routine);
    if (err != MPI_SUCCESS) return err;
    mw_team *team = NULL;
    if (has_team(c)) {
        mw_status st = mw_team_split(mwmpi.ep, c->team, 0, (uint32_t)c->rank, &team);
        if (st != MW_OK) return mwmpi_raise_mw(c, st, routine);
    }
    err = comm_new(c, id, team, newcomm, routine);
    if (err != MPI_SUCCESS) return err;
    struct mwmpi_comm *n = mwmpi_comm_of(*newcomm);
    if (c->info != NULL) mwmpi_info_copy(c->info, &n->info);
    err = mwmpi_attrs_copy(c->attrs, c->handle, &n->attrs, n->handle);
    if (err != MPI_SUCCESS) {
        PMPI_Comm_free(newcomm);
        return mwmpi_raise(c, err, routine, "an attribute copy callback failed");
    }
    return MPI_SUCCESS;
}

int PMPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
    (void)info; /* no info key changes how a communicator behaves here */
    return PMPI_Comm_dup(comm, newcomm);
}

int PMPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
    static const char routine[] = "MPI_Comm_create";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    if (newcomm == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL newcomm");
    struct mwmpi_group *g = mwmpi_group_of(group);
    if (g == NULL) return mwmpi_raise(c, MPI_ERR_GROUP, routine, "invalid group");
    uint32_t *ranks = malloc(((size_t)g->size + 1) * sizeof *ranks);
    if (ranks == NULL) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    bool member = false;
    for (int i = 0; i < g->size; i++) {
        int r = c->from_world[g->world[i]];
        if (r < 0) {
            free(ranks);
            return mwmpi_raise(c, MPI_ERR_GROUP, routine, "the group is not a subset of the communicator's");
        }
        ranks[i] = (uint32_t)r;
        member |= r == c->rank;
    }
    uint32_t id;
    int err = agree_id(c, &id, routine);
    mw_team *team = NULL;
    if (err == MPI_SUCCESS && has_team(c) && g->size > 0) {
        mw_status st = mw_team_from_ranks(mwmpi.ep, c->team, ranks, (size_t)g->size, &team);
        if (st != MW_OK) err = mwmpi_raise_mw(c, st, routine);
    }
    free(ranks);
    if (err != MPI_SUCCESS) return err;
    if (!member) {
        *newcomm = MPI_COMM_NULL;
        return MPI_SUCCESS;
    }
    return comm_new(c, id, team, newcomm, routine);
}

int PMPI_Comm_free(MPI_Comm *comm) {
    static const char routine[] = "MPI_Comm_free";
    if (comm == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    MWMPI_COMM(c, *comm, routine);
    if (c->predefined) return mwmpi_raise(c, MPI_ERR_COMM, routine, "a predefined communicator cannot be freed");
    int err = mwmpi_attrs_delete_all(&c->attrs, c->handle);
    if (err != MPI_SUCCESS) return mwmpi_raise(c, err, routine, "an attribute delete callback failed");
    if (c->team != NULL) {
        mw_status st = mw_team_free(&c->team);
        if (st != MW_OK) return mwmpi_raise_mw(c, st, routine);
    }
    mwmpi_errh_release(c->errh);
    mwmpi_info_release(c->info);
    free(c->world);
    free(c->from_world);
    mwmpi_obj_unregister(&c->obj);
    free(c);
    *comm = MPI_COMM_NULL;
    return MPI_SUCCESS;
}

int PMPI_Comm_disconnect(MPI_Comm *comm) { return PMPI_Comm_free(comm); }

int PMPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result) {
    static const char routine[] = "MPI_Comm_compare";
    MWMPI_COMM(a, comm1, routine);
    MWMPI_COMM(b, comm2, routine);
    if (result == NULL) return mwmpi_raise(a, MPI_ERR_ARG, routine, "NULL argument");
    if (a == b) {
        *result = MPI_IDENT;
        return MPI_SUCCESS;
    }
    if (a->size != b->size) {
        *result = MPI_UNEQUAL;
        return MPI_SUCCESS;
    }
    bool same_order = true, same_set = true;
    for (int i = 0; i < a->size; i++) {
        same_order &= a->world[i] == b->world[i];
        same_set &= b->from_world[a->world[i]] >= 0;
    }
    *result = same_order ? MPI_CONGRUENT : same_set ? MPI_SIMILAR : MPI_UNEQUAL;
    return MPI_SUCCESS;
}

int PMPI_Comm_test_inter(MPI_Comm comm, int *flag) {
    MWMPI_COMM(c, comm, "MPI_Comm_test_inter");
    if (flag == NULL) return mwmpi_raise(c, MPI_ERR_ARG, "MPI_Comm_test_inter", "NULL argument");
    *flag = 0; /* this library makes intra-communicators only */
    return MPI_SUCCESS;
}

int PMPI_Comm_set_name(MPI_Comm comm, const char *comm_name) {
    MWMPI_COMM(c, comm, "MPI_Comm_set_name");
    if (comm_name == NULL) return mwmpi_raise(c, MPI_ERR_ARG, "MPI_Comm_set_name", "NULL argument");
    snprintf(c->name, sizeof c->name, "%s", comm_name);
    return MPI_SUCCESS;
}

int PMPI_Comm_get_name(MPI_Comm comm, char *comm_name, int *resultlen) {
    if (comm == MPI_COMM_NULL && comm_name != NULL && resultlen != NULL) {
        *resultlen = snprintf(comm_name, MPI_MAX_OBJECT_NAME, "MPI_COMM_NULL"); /* MPI-4.1 7.8 */
        return MPI_SUCCESS;
    }
    MWMPI_COMM(c, comm, "MPI_Comm_get_name");
    if (comm_name == NULL || resultlen == NULL) return mwmpi_raise(c, MPI_ERR_ARG, "MPI_Comm_get_name", "NULL argument");
    snprintf(comm_name, MPI_MAX_OBJECT_NAME, "%s", c->name);
    *resultlen = (int)strlen(comm_name);
    return MPI_SUCCESS;
}

/* The predefined attributes' values (MPI-5.0 11.1.2). */
static int attr_tag_ub = INT_MAX, attr_wtime_is_global = 0, attr_appnum = 0, attr_universe_size = 0,
           attr_host = MPI_PROC_NULL, attr_io = MPI_ANY_SOURCE, attr_lastusedcode = MPI_ERR_ABI;

int PMPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val, int *flag) {
    static const char routine[] = "MPI_Comm_get_attr";
    MWMPI_COMM(c, comm, routine);
    if (attribute_val == NULL || flag == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL argument");
    int *value;
    attr_universe_size = mwmpi.world_size;
    switch (comm_keyval) {
    case MPI_TAG_UB: value = &attr_tag_ub; break;
    case MPI_WTIME_IS_GLOBAL: value = &attr_wtime_is_global; break;
    case MPI_APPNUM: value = &attr_appnum; break;
    case MPI_UNIVERSE_SIZE: value = &attr_universe_size; break;
    case MPI_HOST: value = &attr_host; break;
    case MPI_IO: value = &attr_io; break;
    case MPI_LASTUSEDCODE: value = &attr_lastusedcode; break;
    default: {
        int err = mwmpi_comm_user_attr(c, comm_keyval, attribute_val, flag);
        if (err != MPI_SUCCESS) return mwmpi_raise(c, err, routine, "invalid keyval %d", comm_keyval);
        return MPI_SUCCESS;
    }
    }
    /* Only COMM_WORLD carries them (MPI-5.0 11.1.2), but programs ask any. */
    *(int **)attribute_val = value;
    *flag = 1;
    return MPI_SUCCESS;
}

int PMPI_Attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag) {
    return PMPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}

/* Comm_idup: the duplicate is made at the call (an id agreement and a team
 * split among the members, as Comm_dup), and the request is complete. */
int PMPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, MPI_Request *request) {
    static const char routine[] = "MPI_Comm_idup";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    if (request == NULL) return mwmpi_raise(c, MPI_ERR_ARG, routine, "NULL request");
    int err = PMPI_Comm_dup(comm, newcomm);
    if (err != MPI_SUCCESS) return err;
    if (info != MPI_INFO_NULL && (err = PMPI_Comm_set_info(*newcomm, info)) != MPI_SUCCESS) return err;
    struct mwmpi_req *r = mwmpi_req_new(REQ_DONE, c);
    if (r == NULL) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    r->complete = true;
    *request = (MPI_Request)r;
    return MPI_SUCCESS;
}

int PMPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request) {
    return PMPI_Comm_idup_with_info(comm, MPI_INFO_NULL, newcomm, request);
}

/* Whether `info` holds key = value. */
static bool info_says(MPI_Info info, const char *key, const char *value) {
    struct mwmpi_info *i = info != MPI_INFO_NULL ? mwmpi_info_of(info) : NULL;
    for (int k = 0; i != NULL && k < i->n; k++)
        if (strcmp(i->keys[k], key) == 0) return strcmp(i->values[k], value) == 0;
    return false;
}

/* Comm_split_type (MPI-5.0 7.4.2): the one hardware domain this library
 * knows is the host (same processor name; the color is the lowest comm
 * rank there). MPI_COMM_TYPE_SHARED splits by host; HW_GUIDED and
 * RESOURCE_GUIDED do when the info's "mpi_hw_resource_type" is
 * "mpi_shared_memory", and give MPI_COMM_NULL otherwise; HW_UNGUIDED splits by host when that is a
 * strict subset, else gives MPI_COMM_NULL. Collective in every case. */
int PMPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm) {
    static const char routine[] = "MPI_Comm_split_type";
    MWMPI_REQUIRE_INIT(routine);
    MWMPI_COMM(c, comm, routine);
    if (split_type != MPI_UNDEFINED && split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_COMM_TYPE_HW_GUIDED &&
        split_type != MPI_COMM_TYPE_HW_UNGUIDED && split_type != MPI_COMM_TYPE_RESOURCE_GUIDED)
        return mwmpi_raise(c, MPI_ERR_ARG, routine, "unknown split type %d", split_type);
    size_t len = sizeof mwmpi.processor_name;
    char *names = malloc((size_t)c->size * len);
    if (names == NULL) return mwmpi_raise(c, MPI_ERR_NO_MEM, routine, NULL);
    if (has_team(c)) {
        mw_status st = mw_allgather(mwmpi.ep, c->team, mwmpi.processor_name, len, names);
        if (st != MW_OK) {
            free(names);
            return mwmpi_raise_mw(c, st, routine);
        }
    } else {
        memcpy(names, mwmpi.processor_name, len);
    }
    int color = -1, same_host = 0;
    for (int i = 0; i < c->size; i++)
        if (strncmp(names + (size_t)i * len, mwmpi.processor_name, len) == 0) {
            if (color < 0) color = i;
            same_host++;
        }
    free(names);
    bool by_host = split_type == MPI_COMM_TYPE_SHARED ||
                   (split_type == MPI_COMM_TYPE_HW_GUIDED &&
                    info_says(info, "mpi_hw_resource_type", "mpi_shared_memory")) ||
                   (split_type == MPI_COMM_TYPE_RESOURCE_GUIDED &&
                    info_says(info, "mpi_hw_resource_type", "mpi_shared_memory")) ||
                   (split_type == MPI_COMM_TYPE_HW_UNGUIDED && same_host < c->size);
    return PMPI_Comm_split(comm, by_host ? color : MPI_UNDEFINED, key, newcomm);
}
