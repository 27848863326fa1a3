/* What the first part lacked, from the standard: info objects (order,
 * overwrite, delete, dup, truncation by valuelen, MPI_INFO_ENV),
 * keyvals and attributes on communicators and datatypes (copy callbacks
 * on dup, delete callbacks on delete, overwrite, free and Finalize for
 * COMM_SELF), datatype envelopes and contents of every constructor,
 * matched probes (a message taken by Mprobe is not seen by a later probe
 * or receive; Improbe; PROC_NULL), buffered sends (return before any
 * receive is posted, the data copied at the call; one larger than the
 * attached buffer fails with MPI_ERR_BUFFER), MPI_Cancel (of receives,
 * matched or not, of a send, of a persistent receive), Comm_idup,
 * Comm_split_type(SHARED) (every rank of this job runs on one host),
 * Dims_create, Alloc_mem. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int deleted, copied;

static int copy_fn(MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag) {
    (void)comm, (void)keyval;
    CHECK(extra == &copied, "copy callback's extra_state");
    copied++;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm, (void)keyval, (void)value, (void)extra;
    deleted++;
    return MPI_SUCCESS;
}

static int type_delete_fn(MPI_Datatype type, int keyval, void *value, void *extra) {
    (void)type, (void)keyval, (void)value, (void)extra;
    deleted++;
    return MPI_SUCCESS;
}

static void info(void) {
    MPI_Info in, dup;
    OK(MPI_Info_create(&in));
    OK(MPI_Info_set(in, "b", "2"));
    OK(MPI_Info_set(in, "a", "1"));
    OK(MPI_Info_set(in, "b", "22"));
    int nkeys, flag, len;
    char key[MPI_MAX_INFO_KEY], value[MPI_MAX_INFO_VAL];
    OK(MPI_Info_get_nkeys(in, &nkeys));
    CHECK(nkeys == 2, "nkeys %d", nkeys);
    OK(MPI_Info_get_nthkey(in, 0, key));
    CHECK(strcmp(key, "b") == 0, "first key %s (keys keep the order they were first set)", key);
    OK(MPI_Info_get_valuelen(in, "b", &len, &flag));
    CHECK(flag && len == 2, "valuelen %d", len);
    OK(MPI_Info_get(in, "b", 1, value, &flag));
    CHECK(flag && strcmp(value, "2") == 0, "Info_get with valuelen 1 gave '%s'", value);
    len = sizeof value;
    OK(MPI_Info_get_string(in, "a", &len, value, &flag));
    CHECK(flag && strcmp(value, "1") == 0 && len == 2, "get_string '%s' %d", value, len);
    OK(MPI_Info_dup(in, &dup));
    OK(MPI_Info_delete(in, "b"));
    OK(MPI_Info_get(in, "b", sizeof value - 1, value, &flag));
    CHECK(!flag, "deleted key still there");
    OK(MPI_Info_get(dup, "b", sizeof value - 1, value, &flag));
    CHECK(flag && strcmp(value, "22") == 0, "dup lost key b");
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    CHECK(MPI_Info_delete(in, "zz") == MPI_ERR_INFO_NOKEY, "deleting a missing key");
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Info_free(&in));
    OK(MPI_Info_free(&dup));
    CHECK(in == MPI_INFO_NULL, "Info_free did not null the handle");
    OK(MPI_Info_get(MPI_INFO_ENV, "maxprocs", sizeof value - 1, value, &flag));
    CHECK(flag && atoi(value) == np, "MPI_INFO_ENV maxprocs '%s'", value);
    /* A communicator keeps its hints, and its duplicate gets them. */
    MPI_Comm c;
    OK(MPI_Info_create(&in));
    OK(MPI_Info_set(in, "mpi_assert_no_any_tag", "true"));
    OK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, in, &c));
    OK(MPI_Comm_set_info(c, in));
    OK(MPI_Info_free(&in));
    OK(MPI_Comm_get_info(c, &in));
    OK(MPI_Info_get(in, "mpi_assert_no_any_tag", sizeof value - 1, value, &flag));
    CHECK(flag && strcmp(value, "true") == 0, "Comm_get_info lost the hint");
    OK(MPI_Info_free(&in));
    OK(MPI_Comm_free(&c));
}

static void attributes(void) {
    int key, nullkey;
    static char base[8];
    OK(MPI_Comm_create_keyval(copy_fn, delete_fn, &key, &copied));
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &nullkey, NULL));
    OK(MPI_Comm_set_attr(MPI_COMM_WORLD, key, base));
    OK(MPI_Comm_set_attr(MPI_COMM_WORLD, nullkey, base + 4));
    void *v;
    int flag;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, key, &v, &flag));
    CHECK(flag && v == base, "get_attr");
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK(copied == 1, "copy callback ran %d times", copied);
    OK(MPI_Comm_get_attr(dup, key, &v, &flag));
    CHECK(flag && v == base + 1, "the copy callback's value");
    OK(MPI_Comm_get_attr(dup, nullkey, &v, &flag));
    CHECK(!flag, "MPI_COMM_NULL_COPY_FN copied the attribute");
    OK(MPI_Comm_set_attr(dup, key, base + 2)); /* overwrite: the old value is deleted */
    CHECK(deleted == 1, "overwrite ran %d deletes", deleted);
    OK(MPI_Comm_free(&dup));
    CHECK(deleted == 2, "free ran %d deletes", deleted);
    OK(MPI_Comm_delete_attr(MPI_COMM_WORLD, key));
    CHECK(deleted == 3, "delete_attr ran %d deletes", deleted);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, key, &v, &flag));
    CHECK(!flag, "deleted attribute still there");
    /* The predefined ones still answer. */
    int *ub;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
    CHECK(flag && *ub >= 32767, "TAG_UB");
    /* A freed keyval lives on while an attribute uses it; Finalize deletes
     * COMM_SELF's attribute (counted by the Finalize check in main). */
    OK(MPI_Comm_set_attr(MPI_COMM_SELF, key, base));
    OK(MPI_Comm_free_keyval(&key));
    CHECK(key == MPI_KEYVAL_INVALID, "free_keyval did not reset the key");
    OK(MPI_Comm_free_keyval(&nullkey));
    /* Datatypes. */
    int tkey;
    MPI_Datatype t, t2;
    OK(MPI_Type_create_keyval(MPI_TYPE_DUP_FN, type_delete_fn, &tkey, NULL));
    OK(MPI_Type_contiguous(2, MPI_INT, &t));
    OK(MPI_Type_set_attr(t, tkey, base + 3));
    OK(MPI_Type_dup(t, &t2));
    OK(MPI_Type_get_attr(t2, tkey, &v, &flag));
    CHECK(flag && v == base + 3, "MPI_TYPE_DUP_FN");
    OK(MPI_Type_delete_attr(t2, tkey));
    CHECK(deleted == 4, "type delete_attr ran %d deletes", deleted);
    OK(MPI_Type_free(&t2));
    OK(MPI_Type_free(&t));
    CHECK(deleted == 5, "type free ran %d deletes", deleted);
    OK(MPI_Type_free_keyval(&tkey));
}

/* Checks t's envelope and its integers / addresses / types. */
static void envelope(MPI_Datatype t, int combiner, int ni, const int *ints, int na, const MPI_Aint *aints, int nd,
                     const MPI_Datatype *types) {
    int gi, ga, gd, gc;
    OK(MPI_Type_get_envelope(t, &gi, &ga, &gd, &gc));
    CHECK(gc == combiner && gi == ni && ga == na && gd == nd, "envelope %d %d %d %d, want %d %d %d %d", gc, gi, ga, gd,
          combiner, ni, na, nd);
    int gints[16];
    MPI_Aint gaints[16];
    MPI_Datatype gtypes[16];
    OK(MPI_Type_get_contents(t, 16, 16, 16, gints, gaints, gtypes));
    for (int i = 0; i < ni; i++) CHECK(gints[i] == ints[i], "combiner %d integer %d: %d", combiner, i, gints[i]);
    for (int i = 0; i < na; i++) CHECK(gaints[i] == aints[i], "combiner %d address %d", combiner, i);
    for (int i = 0; i < nd; i++) {
        int sub_i, sub_a, sub_d, sub_c;
        OK(MPI_Type_get_envelope(gtypes[i], &sub_i, &sub_a, &sub_d, &sub_c));
        if (sub_c == MPI_COMBINER_NAMED) CHECK(gtypes[i] == types[i], "combiner %d type %d", combiner, i);
        else OK(MPI_Type_free(&gtypes[i]));
    }
}

static void contents(void) {
    MPI_Datatype t, inner;
    int ni, na, nd, combiner;
    OK(MPI_Type_get_envelope(MPI_INT, &ni, &na, &nd, &combiner));
    CHECK(combiner == MPI_COMBINER_NAMED && ni + na + nd == 0, "MPI_INT is named");
    OK(MPI_Type_contiguous(3, MPI_INT, &inner));
    envelope(inner, MPI_COMBINER_CONTIGUOUS, 1, (int[]){3}, 0, NULL, 1, (MPI_Datatype[]){MPI_INT});
    OK(MPI_Type_vector(2, 1, 4, inner, &t));
    OK(MPI_Type_free(&inner)); /* t keeps it alive: its contents name it */
    envelope(t, MPI_COMBINER_VECTOR, 3, (int[]){2, 1, 4}, 0, NULL, 1, NULL);
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_hvector(2, 3, 40, MPI_DOUBLE, &t));
    envelope(t, MPI_COMBINER_HVECTOR, 2, (int[]){2, 3}, 1, (MPI_Aint[]){40}, 1, (MPI_Datatype[]){MPI_DOUBLE});
    OK(MPI_Type_free(&t));
    OK(MPI_Type_indexed(2, (int[]){1, 2}, (int[]){5, 0}, MPI_SHORT, &t));
    envelope(t, MPI_COMBINER_INDEXED, 5, (int[]){2, 1, 2, 5, 0}, 0, NULL, 1, (MPI_Datatype[]){MPI_SHORT});
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_hindexed(2, (int[]){1, 2}, (MPI_Aint[]){16, 0}, MPI_CHAR, &t));
    envelope(t, MPI_COMBINER_HINDEXED, 3, (int[]){2, 1, 2}, 2, (MPI_Aint[]){16, 0}, 1, (MPI_Datatype[]){MPI_CHAR});
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_indexed_block(2, 3, (int[]){4, 0}, MPI_INT, &t));
    envelope(t, MPI_COMBINER_INDEXED_BLOCK, 4, (int[]){2, 3, 4, 0}, 0, NULL, 1, (MPI_Datatype[]){MPI_INT});
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_hindexed_block(2, 3, (MPI_Aint[]){32, 0}, MPI_INT, &t));
    envelope(t, MPI_COMBINER_HINDEXED_BLOCK, 2, (int[]){2, 3}, 2, (MPI_Aint[]){32, 0}, 1, (MPI_Datatype[]){MPI_INT});
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_struct(2, (int[]){1, 2}, (MPI_Aint[]){0, 8}, (MPI_Datatype[]){MPI_INT, MPI_FLOAT}, &t));
    envelope(t, MPI_COMBINER_STRUCT, 3, (int[]){2, 1, 2}, 2, (MPI_Aint[]){0, 8}, 2,
             (MPI_Datatype[]){MPI_INT, MPI_FLOAT});
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_subarray(2, (int[]){4, 5}, (int[]){2, 3}, (int[]){1, 2}, MPI_ORDER_C, MPI_INT, &t));
    envelope(t, MPI_COMBINER_SUBARRAY, 8, (int[]){2, 4, 5, 2, 3, 1, 2, MPI_ORDER_C}, 0, NULL, 1,
             (MPI_Datatype[]){MPI_INT});
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_resized(MPI_INT, -4, 16, &t));
    envelope(t, MPI_COMBINER_RESIZED, 0, NULL, 2, (MPI_Aint[]){-4, 16}, 1, (MPI_Datatype[]){MPI_INT});
    OK(MPI_Type_free(&t));
    OK(MPI_Type_dup(MPI_INT, &t));
    envelope(t, MPI_COMBINER_DUP, 0, NULL, 0, NULL, 1, (MPI_Datatype[]){MPI_INT});
    OK(MPI_Type_free(&t));
    MPI_Datatype pair;
    OK(MPI_Type_get_value_index(MPI_DOUBLE, MPI_INT, &pair));
    CHECK(pair == MPI_DOUBLE_INT, "value_index(DOUBLE, INT)");
}

static void mprobe(void) {
    int right = (me + 1) % np, left = (me + np - 1) % np;
    int out[3] = {me, 2 * me, 3 * me}, in[3] = {-1, -1, -1};
    MPI_Request req, sends[2];
    OK(MPI_Isend(out, 3, MPI_INT, right, 9, MPI_COMM_WORLD, &sends[0]));
    OK(MPI_Isend(out, 1, MPI_INT, right, 10, MPI_COMM_WORLD, &sends[1]));
    MPI_Message msg;
    MPI_Status st;
    OK(MPI_Mprobe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &msg, &st));
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 9, "mprobe status %d %d", st.MPI_SOURCE, st.MPI_TAG);
    int count;
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 3, "mprobe count %d", count);
    /* The taken message is invisible to probes now. */
    int flag;
    OK(MPI_Iprobe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    CHECK(!flag, "an mprobed message is still visible to Iprobe");
    OK(MPI_Mrecv(in, 3, MPI_INT, &msg, &st));
    CHECK(msg == MPI_MESSAGE_NULL, "Mrecv did not null the message");
    CHECK(in[0] == left && in[1] == 2 * left && in[2] == 3 * left, "mrecv data");
    /* Improbe until the tag 10 message is there, then Imrecv. */
    flag = 0;
    while (!flag) OK(MPI_Improbe(left, 10, MPI_COMM_WORLD, &flag, &msg, &st));
    OK(MPI_Imrecv(in, 1, MPI_INT, &msg, &req));
    OK(MPI_Wait(&req, &st));
    CHECK(in[0] == left && st.MPI_TAG == 10, "imrecv");
    OK(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &msg, &st));
    CHECK(msg == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL, "mprobe PROC_NULL");
    OK(MPI_Mrecv(in, 1, MPI_INT, &msg, &st));
    OK(MPI_Waitall(2, sends, MPI_STATUSES_IGNORE));
}

static void bsend(void) {
    int right = (me + 1) % np, left = (me + np - 1) % np;
    int size = 4 * (1000 * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
    char *buf = malloc((size_t)size);
    OK(MPI_Buffer_attach(buf, size));
    int *data = malloc(1000 * sizeof(int)), *in = malloc(1000 * sizeof(int));
    for (int i = 0; i < 1000; i++) data[i] = me * i;
    /* Three sends, nobody receiving yet: they return at once. */
    for (int k = 0; k < 3; k++) OK(MPI_Bsend(data, 1000, MPI_INT, right, 20 + k, MPI_COMM_WORLD));
    MPI_Request req;
    OK(MPI_Ibsend(data, 1000, MPI_INT, right, 23, MPI_COMM_WORLD, &req));
    int flag;
    OK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    CHECK(flag, "an Ibsend is complete once buffered");
    for (int i = 0; i < 1000; i++) data[i] = -1; /* the buffered copies must not change */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int *big = calloc((size_t)size, 1);
    CHECK(MPI_Bsend(big, size / (int)sizeof(int), MPI_INT, right, 30, MPI_COMM_WORLD) == MPI_ERR_BUFFER,
          "a send larger than the attached buffer");
    free(big);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    for (int k = 3; k >= 0; k--) {
        OK(MPI_Recv(in, 1000, MPI_INT, left, 20 + k, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < 1000; i++) CHECK(in[i] == left * i, "bsend %d element %d", k, i);
    }
    void *back;
    OK(MPI_Buffer_detach(&back, &size));
    CHECK(back == buf, "detach returned another buffer");
    free(buf), free(data), free(in);
}

/* Cancel: a receive nothing matched is cancelled (Test_cancelled, buffer
 * untouched, the message sent later goes to the next receive); one a
 * message matched is not; a send's cancel leaves it to complete as sent. */
static void cancel(void) {
    int right = (me + 1) % np, left = (me + np - 1) % np;
    int buf[4] = {-1, -1, -1, -1}, flag;
    MPI_Request req;
    MPI_Status st;
    OK(MPI_Irecv(buf, 4, MPI_INT, left, 40, MPI_COMM_WORLD, &req));
    OK(MPI_Cancel(&req));
    OK(MPI_Wait(&req, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag && buf[0] == -1, "an unmatched receive was not cancelled");
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int out[4] = {me, me, me, me};
    OK(MPI_Send(out, 4, MPI_INT, right, 40, MPI_COMM_WORLD));
    OK(MPI_Probe(left, 40, MPI_COMM_WORLD, &st)); /* arrived: the next receive matches it at once */
    OK(MPI_Irecv(buf, 4, MPI_INT, left, 40, MPI_COMM_WORLD, &req));
    OK(MPI_Cancel(&req));
    OK(MPI_Wait(&req, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(!flag && buf[3] == left && st.MPI_SOURCE == left, "a matched receive was cancelled");
    OK(MPI_Isend(out, 4, MPI_INT, right, 41, MPI_COMM_WORLD, &req));
    OK(MPI_Cancel(&req));
    OK(MPI_Recv(buf, 4, MPI_INT, left, 41, MPI_COMM_WORLD, &st));
    OK(MPI_Wait(&req, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(!flag && buf[0] == left, "a send's cancel");
    /* A persistent receive: cancelled while active, then started again. */
    OK(MPI_Recv_init(buf, 4, MPI_INT, left, 42, MPI_COMM_WORLD, &req));
    OK(MPI_Start(&req));
    OK(MPI_Cancel(&req));
    OK(MPI_Wait(&req, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag, "an active persistent receive was not cancelled");
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Start(&req));
    OK(MPI_Send(out, 4, MPI_INT, right, 42, MPI_COMM_WORLD));
    OK(MPI_Wait(&req, &st));
    CHECK(buf[0] == left, "the restarted persistent receive");
    OK(MPI_Request_free(&req));
}

static void comms(void) {
    MPI_Comm node, dup;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int result;
    OK(MPI_Comm_compare(node, MPI_COMM_WORLD, &result));
    CHECK(result == MPI_CONGRUENT, "split_type(SHARED) on one host: compare %d", result);
    MPI_Request req;
    OK(MPI_Comm_idup(node, &dup, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    int sum = 0;
    OK(MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, dup));
    CHECK(sum == np * (np - 1) / 2, "allreduce on the idup'ed communicator");
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&node));
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &node));
    CHECK(node == MPI_COMM_NULL, "split_type(UNDEFINED)");
    int dims[3] = {0, 0, 0};
    OK(MPI_Dims_create(12, 3, dims));
    CHECK(dims[0] == 3 && dims[1] == 2 && dims[2] == 2, "Dims_create(12, 3): %d %d %d", dims[0], dims[1], dims[2]);
    int dims2[2] = {0, 3};
    OK(MPI_Dims_create(6, 2, dims2));
    CHECK(dims2[0] == 2 && dims2[1] == 3, "Dims_create(6, {0, 3})");
    int topo;
    OK(MPI_Topo_test(MPI_COMM_WORLD, &topo));
    CHECK(topo == MPI_UNDEFINED, "Topo_test");
    double *mem;
    OK(MPI_Alloc_mem(64 * sizeof(double), MPI_INFO_NULL, &mem));
    mem[63] = 1.0;
    OK(MPI_Free_mem(mem));
}

int main(int argc, char **argv) {
    START(argc, argv);
    info();
    attributes();
    contents();
    mprobe();
    bsend();
    cancel();
    comms();
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("misc_test: rank %d of %d: %lu checks passed\n", me, np, checks);
    int before = deleted;
    OK(MPI_Finalize());
    if (deleted != before + 1) {
        fprintf(stderr, "rank %d: Finalize ran %d delete callbacks on COMM_SELF, want 1\n", me, deleted - before);
        return 1;
    }
    return 0;
}
