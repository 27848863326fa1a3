/*
 * group.c: process groups (MPI-5.0 7.3): a group is the list of its
 * members' world ranks. Comm_group, size, rank, translate_ranks,
 * compare, incl, excl, range_incl, range_excl, union, intersection,
 * difference, free; MPI_GROUP_EMPTY.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct mwmpi_group mwmpi_group_empty = {{MWMPI_MAGIC_GROUP, 0}, 0, MPI_UNDEFINED, NULL, 1};

struct mwmpi_group *mwmpi_group_new(int size, const int *world) {
    struct mwmpi_group *g = calloc(1, sizeof *g);
    if (g == NULL) return NULL;
    g->world = malloc(((size_t)size + 1) * sizeof *g->world);
    if (g->world == NULL) {
        free(g);
        return NULL;
    }
    if (size > 0) memcpy(g->world, world, (size_t)size * sizeof *world);
    g->size = size;
    g->rank = MPI_UNDEFINED;
    for (int i = 0; i < size; i++)
        if (world[i] == mwmpi.world_rank) g->rank = i;
    g->refs = 1;
    mwmpi_obj_register(&g->obj, MWMPI_MAGIC_GROUP);
    return g;
}

void mwmpi_group_release(struct mwmpi_group *g) {
    if (g == &mwmpi_group_empty || --g->refs > 0) return;
    mwmpi_obj_unregister(&g->obj);
    free(g->world);
    free(g);
}

/* Stores a new group of `world[0..size]` in `*out`, or raises. */
static int group_out(int size, const int *world, MPI_Group *out, const char *routine) {
    if (size == 0) {
        *out = MPI_GROUP_EMPTY;
        return MPI_SUCCESS;
    }
    struct mwmpi_group *g = mwmpi_group_new(size, world);
    if (g == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    *out = (MPI_Group)g;
    return MPI_SUCCESS;
}

#define GROUP(var, h, routine)                                      \
    struct mwmpi_group *var = mwmpi_group_of(h);                         \
    if (var == NULL) return mwmpi_raise(NULL, MPI_ERR_GROUP, routine, "invalid group")

int PMPI_Comm_group(MPI_Comm comm, MPI_Group *group) {
    MWMPI_COMM(c, comm, "MPI_Comm_group");
    if (group == NULL) return mwmpi_raise(c, MPI_ERR_ARG, "MPI_Comm_group", "NULL argument");
    return group_out(c->size, c->world, group, "MPI_Comm_group");
}

int PMPI_Group_size(MPI_Group group, int *size) {
    GROUP(g, group, "MPI_Group_size");
    if (size == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Group_size", "NULL argument");
    *size = g->size;
    return MPI_SUCCESS;
}

int PMPI_Group_rank(MPI_Group group, int *rank) {
    GROUP(g, group, "MPI_Group_rank");
    if (rank == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Group_rank", "NULL argument");
    *rank = g->rank;
    return MPI_SUCCESS;
}

int PMPI_Group_free(MPI_Group *group) {
    if (group == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Group_free", "NULL argument");
    GROUP(g, *group, "MPI_Group_free");
    mwmpi_group_release(g);
    *group = MPI_GROUP_NULL;
    return MPI_SUCCESS;
}

static int index_of(const struct mwmpi_group *g, int world) {
    for (int i = 0; i < g->size; i++)
        if (g->world[i] == world) return i;
    return -1;
}

int PMPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]) {
    static const char routine[] = "MPI_Group_translate_ranks";
    GROUP(a, group1, routine);
    GROUP(b, group2, routine);
    if (n < 0 || (n > 0 && (ranks1 == NULL || ranks2 == NULL))) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "bad arrays");
    for (int i = 0; i < n; i++) {
        if (ranks1[i] == MPI_PROC_NULL) {
            ranks2[i] = MPI_PROC_NULL;
            continue;
        }
        if (ranks1[i] < 0 || ranks1[i] >= a->size)
            return mwmpi_raise(NULL, MPI_ERR_RANK, routine, "rank %d is not in group1", ranks1[i]);
        int j = index_of(b, a->world[ranks1[i]]);
        ranks2[i] = j >= 0 ? j : MPI_UNDEFINED;
    }
    return MPI_SUCCESS;
}

int PMPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result) {
    GROUP(a, group1, "MPI_Group_compare");
    GROUP(b, group2, "MPI_Group_compare");
    if (result == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, "MPI_Group_compare", "NULL argument");
    if (a->size != b->size) {
        *result = MPI_UNEQUAL;
        return MPI_SUCCESS;
    }
    bool same_order = true, same_set = true;
    for (int i = 0; i < a->size; i++) {
        same_order &= a->world[i] == b->world[i];
        same_set &= index_of(b, a->world[i]) >= 0;
    }
    *result = same_order ? MPI_IDENT : same_set ? MPI_SIMILAR : MPI_UNEQUAL;
    return MPI_SUCCESS;
}

int PMPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup) {
    static const char routine[] = "MPI_Group_incl";
    GROUP(g, group, routine);
    if (n < 0 || newgroup == NULL || (n > 0 && ranks == NULL)) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "bad arguments");
    int *world = malloc(((size_t)n + 1) * sizeof *world);
    if (world == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= g->size) {
            free(world);
            return mwmpi_raise(NULL, MPI_ERR_RANK, routine, "rank %d is not in the group", ranks[i]);
        }
        world[i] = g->world[ranks[i]];
        for (int j = 0; j < i; j++)
            if (world[j] == world[i]) {
                free(world);
                return mwmpi_raise(NULL, MPI_ERR_RANK, routine, "rank %d listed twice", ranks[i]);
            }
    }
    int err = group_out(n, world, newgroup, routine);
    free(world);
    return err;
}

/* The members of `g` for which keep[i] is set, in group order. */
static int group_keep(const struct mwmpi_group *g, const bool *keep, MPI_Group *newgroup, const char *routine) {
    int *world = malloc(((size_t)g->size + 1) * sizeof *world);
    if (world == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    int n = 0;
    for (int i = 0; i < g->size; i++)
        if (keep[i]) world[n++] = g->world[i];
    int err = group_out(n, world, newgroup, routine);
    free(world);
    return err;
}

int PMPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup) {
    static const char routine[] = "MPI_Group_excl";
    GROUP(g, group, routine);
    if (n < 0 || newgroup == NULL || (n > 0 && ranks == NULL)) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "bad arguments");
    bool *keep = malloc((size_t)g->size + 1);
    if (keep == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    memset(keep, 1, (size_t)g->size + 1);
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= g->size || !keep[ranks[i]]) {
            free(keep);
            return mwmpi_raise(NULL, MPI_ERR_RANK, routine, "rank %d is not in the group, or listed twice", ranks[i]);
        }
        keep[ranks[i]] = false;
    }
    int err = group_keep(g, keep, newgroup, routine);
    free(keep);
    return err;
}

/* The ranks of triplets (first, last, stride), in order; NULL on a bad triplet. */
static int *expand_ranges(const struct mwmpi_group *g, int n, int ranges[][3], int *count) {
    int total = 0;
    for (int i = 0; i < n; i++) {
        int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
        if (stride == 0 || first < 0 || first >= g->size || last < 0 || last >= g->size) return NULL;
        if ((stride > 0 && first > last) || (stride < 0 && first < last)) continue;
        total += (last - first) / stride + 1;
    }
    int *out = malloc(((size_t)total + 1) * sizeof *out);
    if (out == NULL) return NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
        for (int r = first; stride > 0 ? r <= last : r >= last; r += stride) out[k++] = r;
    }
    *count = total;
    return out;
}

int PMPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup) {
    static const char routine[] = "MPI_Group_range_incl";
    GROUP(g, group, routine);
    if (n < 0 || newgroup == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "bad arguments");
    int count;
    int *ranks = expand_ranges(g, n, ranges, &count);
    if (ranks == NULL) return mwmpi_raise(NULL, MPI_ERR_RANK, routine, "invalid range");
    int err = PMPI_Group_incl(group, count, ranks, newgroup);
    free(ranks);
    return err;
}

int PMPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup) {
    static const char routine[] = "MPI_Group_range_excl";
    GROUP(g, group, routine);
    if (n < 0 || newgroup == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "bad arguments");
    int count;
    int *ranks = expand_ranges(g, n, ranges, &count);
    if (ranks == NULL) return mwmpi_raise(NULL, MPI_ERR_RANK, routine, "invalid range");
    int err = PMPI_Group_excl(group, count, ranks, newgroup);
    free(ranks);
    return err;
}

/* Set operations: which members of a (in a's order), then of b, the result holds. */
enum set_op { SET_UNION, SET_INTERSECTION, SET_DIFFERENCE };

static int group_set(MPI_Group group1, MPI_Group group2, enum set_op op, MPI_Group *newgroup, const char *routine) {
    GROUP(a, group1, routine);
    GROUP(b, group2, routine);
    if (newgroup == NULL) return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "NULL argument");
    int *world = malloc(((size_t)a->size + (size_t)b->size + 1) * sizeof *world);
    if (world == NULL) return mwmpi_raise(NULL, MPI_ERR_NO_MEM, routine, NULL);
    int n = 0;
    for (int i = 0; i < a->size; i++) {
        bool in_b = index_of(b, a->world[i]) >= 0;
        if (op == SET_UNION || (op == SET_INTERSECTION && in_b) || (op == SET_DIFFERENCE && !in_b))
            world[n++] = a->world[i];
    }
    if (op == SET_UNION)
        for (int i = 0; i < b->size; i++)
            if (index_of(a, b->world[i]) < 0) world[n++] = b->world[i];
    int err = group_out(n, world, newgroup, routine);
    free(world);
    return err;
}

int PMPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup) {
    return group_set(group1, group2, SET_UNION, newgroup, "MPI_Group_union");
}

int PMPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup) {
    return group_set(group1, group2, SET_INTERSECTION, newgroup, "MPI_Group_intersection");
}

int PMPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup) {
    return group_set(group1, group2, SET_DIFFERENCE, newgroup, "MPI_Group_difference");
}

