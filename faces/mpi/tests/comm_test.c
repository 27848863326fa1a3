/* Communicators and groups (MPI-5.0 chapter 7): dup, split, create,
 * compare, free, names, groups and their operations; messages on
 * different communicators never match each other, even under wildcard
 * receives posted before anything was sent. */
#include <string.h>

#include "check.h"

static void test_isolation(void) {
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    int result;
    OK(MPI_Comm_compare(MPI_COMM_WORLD, dup, &result));
    CHECK(result == MPI_CONGRUENT, "dup compares %d", result);
    OK(MPI_Comm_compare(dup, dup, &result));
    CHECK(result == MPI_IDENT, "self compare %d", result);
    int right = (me + 1) % np, left = (me + np - 1) % np;
    /* Wildcard receives on both, posted first; the messages go out in the
     * opposite order, same tag: each lands on its own communicator. */
    int on_world = -1, on_dup = -1;
    MPI_Request reqs[2];
    MPI_Status sts[2];
    OK(MPI_Irecv(&on_world, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &reqs[0]));
    OK(MPI_Irecv(&on_dup, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &reqs[1]));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int a = 1000 + me, b = 2000 + me;
    OK(MPI_Send(&b, 1, MPI_INT, right, 3, dup));
    OK(MPI_Send(&a, 1, MPI_INT, right, 3, MPI_COMM_WORLD));
    OK(MPI_Waitall(2, reqs, sts));
    CHECK(on_world == 1000 + left && on_dup == 2000 + left, "world got %d, dup got %d", on_world, on_dup);
    CHECK(sts[0].MPI_SOURCE == left && sts[1].MPI_SOURCE == left, "sources");
    /* Probe on one communicator does not see the other's message. */
    OK(MPI_Send(&a, 1, MPI_INT, right, 4, dup));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int flag = 1;
    OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    CHECK(!flag, "world sees dup's message");
    OK(MPI_Recv(&a, 1, MPI_INT, left, 4, dup, MPI_STATUS_IGNORE));
    OK(MPI_Comm_set_name(dup, "my dup"));
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Comm_get_name(dup, name, &len));
    CHECK(strcmp(name, "my dup") == 0 && len == 6, "name '%s'", name);
    OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0, "world's name '%s'", name);
    OK(MPI_Comm_free(&dup));
}

static void test_split(void) {
    /* Even and odd ranks, ordered by descending world rank. */
    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &half));
    int r, n;
    OK(MPI_Comm_rank(half, &r));
    OK(MPI_Comm_size(half, &n));
    int want_n = (np + 1 - me % 2) / 2;
    CHECK(n == want_n, "half size %d, want %d", n, want_n);
    /* Sum of world ranks within the half, and a ring inside it. */
    int sum = 0, want = 0;
    OK(MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, half));
    for (int i = me % 2; i < np; i += 2) want += i;
    CHECK(sum == want, "sum in half %d, want %d", sum, want);
    int highest_first;
    OK(MPI_Bcast((highest_first = me, &highest_first), 1, MPI_INT, 0, half));
    int top = np - 1 - ((np - 1) % 2 != me % 2);
    CHECK(highest_first == top, "rank 0 of the half is world %d, want %d", highest_first, top);
    int got;
    OK(MPI_Sendrecv(&me, 1, MPI_INT, (r + 1) % n, 0, &got, 1, MPI_INT, (r + n - 1) % n, 0, half, MPI_STATUS_IGNORE));
    int result;
    OK(MPI_Comm_compare(MPI_COMM_WORLD, half, &result));
    CHECK(result == (np == 1 ? MPI_CONGRUENT : MPI_UNEQUAL), "world vs half %d", result);
    /* MPI_UNDEFINED: no communicator. */
    MPI_Comm none;
    OK(MPI_Comm_split(MPI_COMM_WORLD, me == 0 ? MPI_UNDEFINED : 1, 0, &none));
    CHECK((me == 0) == (none == MPI_COMM_NULL), "undefined color");
    if (none != MPI_COMM_NULL) OK(MPI_Comm_free(&none));
    OK(MPI_Comm_free(&half));
}

static void test_groups(void) {
    MPI_Group world, evens, odds, all, none;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int size, rank;
    OK(MPI_Group_size(world, &size));
    OK(MPI_Group_rank(world, &rank));
    CHECK(size == np && rank == me, "world group %d %d", size, rank);
    int range[1][3] = {{0, np - 1, 2}};
    OK(MPI_Group_range_incl(world, 1, range, &evens));
    OK(MPI_Group_difference(world, evens, &odds));
    OK(MPI_Group_union(odds, evens, &all));
    OK(MPI_Group_intersection(odds, evens, &none));
    int n_even, n_odd, n_all, n_none, result;
    OK(MPI_Group_size(evens, &n_even));
    OK(MPI_Group_size(odds, &n_odd));
    OK(MPI_Group_size(all, &n_all));
    OK(MPI_Group_size(none, &n_none));
    CHECK(n_even == (np + 1) / 2 && n_odd == np / 2 && n_all == np && n_none == 0, "group sizes");
    CHECK(none == MPI_GROUP_EMPTY, "empty intersection is not GROUP_EMPTY");
    OK(MPI_Group_compare(world, all, &result));
    CHECK(result == (np == 1 ? MPI_IDENT : MPI_SIMILAR), "world vs odds+evens %d", result);
    int ranks[1] = {np - 1}, out[1];
    OK(MPI_Group_translate_ranks(world, 1, ranks, evens, out));
    CHECK(out[0] == ((np - 1) % 2 == 0 ? (np - 1) / 2 : MPI_UNDEFINED), "translate %d", out[0]);
    MPI_Group first;
    int zero[1] = {0};
    OK(MPI_Group_excl(world, 1, zero, &first));
    OK(MPI_Group_size(first, &size));
    CHECK(size == np - 1, "excl size %d", size);
    /* Comm_create: the even ranks get a communicator, the others none. */
    MPI_Comm ce;
    OK(MPI_Comm_create(MPI_COMM_WORLD, evens, &ce));
    CHECK((me % 2 == 0) == (ce != MPI_COMM_NULL), "comm_create membership");
    if (ce != MPI_COMM_NULL) {
        int r, total = 0;
        OK(MPI_Comm_rank(ce, &r));
        CHECK(r == me / 2, "rank in evens %d", r);
        OK(MPI_Allreduce(&me, &total, 1, MPI_INT, MPI_SUM, ce));
        int want = 0;
        for (int i = 0; i < np; i += 2) want += i;
        CHECK(total == want, "evens sum %d", total);
        OK(MPI_Comm_free(&ce));
    }
    MPI_Group *gs[] = {&world, &evens, &odds, &all, &first};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        if (*gs[i] != MPI_GROUP_EMPTY) OK(MPI_Group_free(gs[i]));
    }
}

int main(int argc, char **argv) {
    START(argc, argv);
    test_isolation();
    test_split();
    test_groups();
    /* MPI_COMM_SELF works alone. */
    int r, n, v = 5;
    OK(MPI_Comm_rank(MPI_COMM_SELF, &r));
    OK(MPI_Comm_size(MPI_COMM_SELF, &n));
    CHECK(r == 0 && n == 1, "self");
    OK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF));
    CHECK(v == 5, "self allreduce");
    OK(MPI_Sendrecv_replace(&v, 1, MPI_INT, 0, 1, 0, 1, MPI_COMM_SELF, MPI_STATUS_IGNORE));
    PASSED("comm_test");
    return 0;
}
