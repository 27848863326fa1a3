/* Point-to-point (MPI-5.0 chapter 3), checked on any number of ranks: each
 * rank works with its neighbours in a ring. Blocking, nonblocking and
 * synchronous sends of 0 B to 1 MiB (eager and rendezvous), status fields
 * and counts, wildcards, PROC_NULL, probe/iprobe, sendrecv, truncation as
 * an error, waitany/waitsome/testall under varied completion order,
 * persistent requests, request_free, and the non-overtaking order. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int right, left;

static unsigned char pattern(int from, size_t i, int salt) { return (unsigned char)(from * 31 + i * 7 + salt); }

static void fill(unsigned char *buf, size_t n, int from, int salt) {
    for (size_t i = 0; i < n; i++) buf[i] = pattern(from, i, salt);
}

static void expect(const unsigned char *buf, size_t n, int from, int salt) {
    for (size_t i = 0; i < n; i++)
        CHECK(buf[i] == pattern(from, i, salt), "byte %zu of %zu from %d: %u", i, n, from, buf[i]);
}

static void test_sizes(void) {
    static const size_t sizes[] = {0, 1, 8, 1000, 65536, 1 << 20};
    size_t max = 1 << 20;
    unsigned char *out = malloc(max), *in = malloc(max);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        fill(out, n, me, (int)k);
        memset(in, 0, max);
        MPI_Request req;
        MPI_Status st;
        /* Nonblocking receive first, blocking send: no ordering trouble in a ring. */
        OK(MPI_Irecv(in, (int)max, MPI_BYTE, left, (int)k, MPI_COMM_WORLD, &req));
        OK(MPI_Send(out, (int)n, MPI_BYTE, right, (int)k, MPI_COMM_WORLD));
        OK(MPI_Wait(&req, &st));
        CHECK(req == MPI_REQUEST_NULL, "wait did not free the request");
        int count;
        OK(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(count == (int)n && st.MPI_SOURCE == left && st.MPI_TAG == (int)k, "status: count %d source %d tag %d",
              count, st.MPI_SOURCE, st.MPI_TAG);
        expect(in, n, left, (int)k);

        /* Synchronous, and Isend + blocking Recv. */
        fill(out, n, me, (int)k + 50);
        OK(MPI_Irecv(in, (int)n, MPI_BYTE, left, 100, MPI_COMM_WORLD, &req));
        OK(MPI_Ssend(out, (int)n, MPI_BYTE, right, 100, MPI_COMM_WORLD));
        OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        expect(in, n, left, (int)k + 50);
        fill(out, n, me, (int)k + 90);
        OK(MPI_Isend(out, (int)n, MPI_BYTE, right, 101, MPI_COMM_WORLD, &req));
        OK(MPI_Recv(in, (int)n, MPI_BYTE, left, 101, MPI_COMM_WORLD, &st));
        OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        expect(in, n, left, (int)k + 90);
    }
    free(out);
    free(in);
}

/* Ints, with counts in elements; ANY_SOURCE / ANY_TAG report the real ones. */
static void test_wildcards_and_probe(void) {
    int out[5] = {me, me + 1, me + 2, me + 3, me + 4}, in[8];
    MPI_Status st;
    OK(MPI_Send(out, 5, MPI_INT, right, 40 + me, MPI_COMM_WORLD));
    OK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    int count;
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 40 + left && count == 5, "probe: %d %d %d", st.MPI_SOURCE,
          st.MPI_TAG, count);
    int flag = 0;
    while (!flag) OK(MPI_Iprobe(left, 40 + left, MPI_COMM_WORLD, &flag, &st));
    OK(MPI_Recv(in, 8, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 5 && in[0] == left && in[4] == left + 4 && st.MPI_TAG == 40 + left, "recv after probe");
    OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
    CHECK(count == MPI_UNDEFINED, "20 bytes as doubles: %d", count);
    OK(MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    CHECK(!flag, "iprobe found a message never sent");
    /* PROC_NULL: sends vanish, receives complete at once, empty. */
    OK(MPI_Send(out, 5, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    OK(MPI_Recv(in, 5, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st));
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0, "PROC_NULL status");
    /* Sendrecv around the ring. */
    int got = -1;
    OK(MPI_Sendrecv(&me, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7, MPI_COMM_WORLD, &st));
    CHECK(got == left && st.MPI_SOURCE == left, "sendrecv got %d", got);
}

/* Messages between a pair are not overtaken (MPI-5.0 3.5), also when a
 * small one follows a large one. */
static void test_order(void) {
    enum { N = 20 };
    static int big[1 << 16];
    MPI_Request reqs[N];
    int vals[N];
    for (int i = 0; i < N; i++) OK(MPI_Irecv(i == 3 ? big : &vals[i], i == 3 ? 1 << 16 : 1, MPI_INT, left, 5,
                                             MPI_COMM_WORLD, &reqs[i]));
    for (int i = 0; i < N; i++) {
        if (i == 3) {
            for (int j = 0; j < 1 << 16; j++) big[j] = j ^ me;
            OK(MPI_Send(big, 1 << 16, MPI_INT, right, 5, MPI_COMM_WORLD));
        } else {
            int v = i * 1000 + me;
            OK(MPI_Send(&v, 1, MPI_INT, right, 5, MPI_COMM_WORLD));
        }
    }
    OK(MPI_Waitall(N, reqs, MPI_STATUSES_IGNORE));
    for (int i = 0; i < N; i++)
        if (i != 3) CHECK(vals[i] == i * 1000 + left, "message %d out of order: %d", i, vals[i]);
    CHECK(big[77] == (77 ^ left), "big message");
}

/* waitany/waitsome/testall: the receives complete in the order the
 * senders pick (reverse, then interleaved), not in array order. */
static void test_completion_sets(void) {
    enum { N = 8 };
    int in[N], out[N];
    MPI_Request reqs[N];
    for (int i = 0; i < N; i++) OK(MPI_Irecv(&in[i], 1, MPI_INT, left, i, MPI_COMM_WORLD, &reqs[i]));
    int flag = 1;
    MPI_Status sts[N];
    OK(MPI_Testall(N, reqs, &flag, sts));
    CHECK(!flag, "testall complete before any send");
    OK(MPI_Barrier(MPI_COMM_WORLD)); /* every rank tested before anyone sends */
    for (int i = N - 1; i >= 0; i--) {
        out[i] = 10 * i + me;
        OK(MPI_Send(&out[i], 1, MPI_INT, right, i, MPI_COMM_WORLD));
    }
    int seen = 0, index;
    MPI_Status st;
    for (int k = 0; k < N / 2; k++) {
        OK(MPI_Waitany(N, reqs, &index, &st));
        CHECK(index >= 0 && index < N && reqs[index] == MPI_REQUEST_NULL && st.MPI_TAG == index, "waitany %d", index);
        CHECK(in[index] == 10 * index + left, "waitany data");
        seen |= 1 << index;
    }
    while (seen != (1 << N) - 1) {
        int outcount, indices[N];
        OK(MPI_Waitsome(N, reqs, &outcount, indices, sts));
        CHECK(outcount > 0, "waitsome returned nothing");
        for (int k = 0; k < outcount; k++) {
            CHECK(!(seen & (1 << indices[k])) && sts[k].MPI_TAG == indices[k], "waitsome index %d", indices[k]);
            seen |= 1 << indices[k];
        }
    }
    OK(MPI_Waitany(N, reqs, &index, &st));
    CHECK(index == MPI_UNDEFINED, "waitany over nothing: %d", index);
    int outcount, indices[N];
    OK(MPI_Waitsome(N, reqs, &outcount, indices, MPI_STATUSES_IGNORE));
    CHECK(outcount == MPI_UNDEFINED, "waitsome over nothing");
    OK(MPI_Testall(N, reqs, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag, "testall over nulls");
}

static void test_persistent_and_free(void) {
    int out, in = -1;
    MPI_Request sreq, rreq;
    OK(MPI_Recv_init(&in, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &rreq));
    OK(MPI_Send_init(&out, 1, MPI_INT, right, 9, MPI_COMM_WORLD, &sreq));
    for (int round = 0; round < 5; round++) {
        out = round * 100 + me;
        MPI_Request both[2] = {rreq, sreq};
        OK(MPI_Startall(2, both));
        OK(MPI_Waitall(2, both, MPI_STATUSES_IGNORE));
        CHECK(both[0] == rreq && both[1] == sreq, "persistent requests were freed");
        CHECK(in == round * 100 + left, "round %d got %d", round, in);
    }
    OK(MPI_Request_free(&rreq));
    OK(MPI_Request_free(&sreq));
    CHECK(rreq == MPI_REQUEST_NULL, "request_free did not null");
    /* A send request freed while active still delivers. */
    MPI_Request req;
    out = 4242 + me;
    OK(MPI_Isend(&out, 1, MPI_INT, right, 10, MPI_COMM_WORLD, &req));
    OK(MPI_Request_free(&req));
    OK(MPI_Recv(&in, 1, MPI_INT, left, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(in == 4242 + left, "freed isend delivered %d", in);
    /* Issend: not complete before the receive is posted (here after a barrier). */
    OK(MPI_Issend(&out, 1, MPI_INT, right, 11, MPI_COMM_WORLD, &req));
    int flag = 1;
    double until = MPI_Wtime() + 0.05;
    while (MPI_Wtime() < until && !flag) OK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    flag = 0;
    for (int i = 0; i < 100; i++) {
        OK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag, "issend completed with no receive posted");
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Recv(&in, 1, MPI_INT, left, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
}

/* A message longer than the receive is MPI_ERR_TRUNCATE (ERRORS_RETURN). */
static void test_truncation(void) {
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int out[4] = {1, 2, 3, 4}, in[2];
    OK(MPI_Send(out, 4, MPI_INT, right, 12, MPI_COMM_WORLD));
    MPI_Status st;
    int rc = MPI_Recv(in, 2, MPI_INT, left, 12, MPI_COMM_WORLD, &st);
    CHECK(rc == MPI_ERR_TRUNCATE, "truncated receive gave %d", rc);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv) {
    START(argc, argv);
    right = (me + 1) % np;
    left = (me + np - 1) % np;
    test_sizes();
    test_wildcards_and_probe();
    OK(MPI_Barrier(MPI_COMM_WORLD));
    test_order();
    test_completion_sets();
    test_persistent_and_free();
    test_truncation();
    PASSED("p2p_test");
    return 0;
}
