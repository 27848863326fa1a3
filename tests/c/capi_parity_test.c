/* The C API's counterparts of the Rust API, with checks: version macros and
 * mw_version(), the configuration object (bad values refused, values taking
 * effect), matching contexts for tagged messages, synchronous sends, nonblocking and one-way
 * active messages, the peer-liveness calls, and the size-versioned mw_stats
 * (an older, shorter struct is not overrun). Any number of ranks (each works
 * with its right neighbour; with one rank, itself). Run by `make ctest`
 * under mwrun over shared memory and UDP. Exits 0 only if every check
 * passed. */
#include <memwire.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint32_t me, n, left, right;
static unsigned checks;
static mw_endpoint *ep;

#include "check.h"

static double now_s(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The settings this test runs with (checked in test_config_took_effect). */
enum { MTU = 1200, EAGER = 2048 };

static void test_version(void) {
    ASSERT_U64(MW_VERSION, (MW_VERSION_MAJOR << 16) | (MW_VERSION_MINOR << 8) | MW_VERSION_PATCH);
    ASSERT_U64(mw_version(), MW_VERSION);
    ASSERT_U64(mw_version() >> 16, MW_VERSION_MAJOR);
}

/* Before mw_init: every refusal names its reason and changes nothing. */
static void test_config_refusals(void) {
    mw_config *cfg = NULL;
    EXPECT(MW_ERR_NULL_POINTER, mw_config_new(NULL));
    OK(mw_config_new(&cfg));
    ASSERT(cfg != NULL);
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_config_set(cfg, "MW_NO_SUCH_SETTING", "1"));
    LAST_ERROR_MENTIONS("MW_NO_SUCH_SETTING");
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_config_set(cfg, "MW_RANK", "0")); /* bootstrap, not a setting */
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_config_set(cfg, "MW_PEER_DEAD_MS", "0"));
    LAST_ERROR_MENTIONS("MW_PEER_DEAD_MS");
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_config_set(cfg, "MW_MTU", "12"));
    LAST_ERROR_MENTIONS("MW_MTU");
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_config_set(cfg, "MW_PROGRESS", "sometimes"));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_config_set(cfg, "MW_FAULT_DROP", "2"));
    EXPECT(MW_ERR_NULL_POINTER, mw_config_set(cfg, NULL, "1"));
    EXPECT(MW_ERR_NULL_POINTER, mw_config_set(cfg, "MW_MTU", NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_config_set(NULL, "MW_MTU", "1500"));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_config_set_progress(cfg, 99));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_config_set_transport(cfg, 7));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_config_set_peer_dead_ms(cfg, 0));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_config_set_mtu(cfg, 100));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_config_set_mtu(cfg, 70000));
    /* Accepted values, and a later refusal leaves them as they were. */
    OK(mw_config_set_progress(cfg, MW_PROGRESS_INLINE));
    OK(mw_config_set_transport(cfg, MW_TRANSPORT_AUTO));
    OK(mw_config_set_peer_dead_ms(cfg, 3000));
    OK(mw_config_set(cfg, "MW_FAULT_DUP", "0.01"));
    OK(mw_config_free(&cfg));
    ASSERT(cfg == NULL);
    OK(mw_config_free(&cfg)); /* NULL: nothing to free */
    EXPECT(MW_ERR_NULL_POINTER, mw_config_free(NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_init_with(NULL, &ep));
}

/* Joins the job with the environment's settings (so `make ctest`'s
 * MW_TRANSPORT=udp still applies) plus this test's own. */
static void init_with_config(void) {
    mw_config *cfg;
    OK(mw_config_from_env(&cfg));
    OK(mw_config_set_mtu(cfg, MTU));
    OK(mw_config_set(cfg, "MW_EAGER_LIMIT", "2048"));
    OK(mw_config_set_progress(cfg, MW_PROGRESS_AUTO));
    OK(mw_init_with(cfg, &ep));
    mw_endpoint *second = NULL;
    EXPECT(MW_ERR_IN_USE, mw_init_with(cfg, &second));
    ASSERT(second == NULL);
    OK(mw_config_free(&cfg));
    OK(mw_rank(ep, &me));
    OK(mw_size(ep, &n));
    left = (me + n - 1) % n;
    right = (me + 1) % n;
}

static void get_stats(mw_stats *st) {
    memset(st, 0, sizeof *st);
    st->size = sizeof *st;
    OK(mw_stats_get(ep, st));
    ASSERT_U64(st->size, sizeof *st);
}

static void test_config_took_effect(void) {
    mw_stats before, after;
    get_stats(&before);
    ASSERT_U64(before.udp_payload_mtu, MTU); /* the default on loopback is 65000 */
    /* Above the eager limit of 2048: by rendezvous; below: eagerly. */
    enum { BIG = 4000, SMALL = 1000 };
    static uint8_t out[BIG], in[BIG];
    for (size_t i = 0; i < BIG; i++) out[i] = (uint8_t)(i * 13 + me);
    mw_handle *r;
    mw_recv_status st;
    OK(mw_irecv(ep, left, 30, in, sizeof in, &r));
    OK(mw_send(ep, right, 30, out, BIG));
    OK(mw_wait_recv(&r, &st));
    ASSERT_U64(st.len, BIG);
    ASSERT(in[BIG - 1] == (uint8_t)((BIG - 1) * 13 + left));
    OK(mw_send(ep, right, 31, out, SMALL));
    OK(mw_recv(ep, left, 31, in, sizeof in, &st));
    ASSERT_U64(st.len, SMALL);
    get_stats(&after);
    ASSERT_U64(after.msg_rndv_sent - before.msg_rndv_sent, 1);
    ASSERT_U64(after.msg_eager_sent - before.msg_eager_sent, 1);
    OK(mw_barrier(ep));
}

/* Messages in one context never match receives or probes of another,
 * whatever their source and tag, and contexts do not reorder each other. */
static void test_contexts(void) {
    enum { A = 7, B = 9 };
    char got[16];
    mw_recv_status st;
    bool found;

    /* B's message first, then A's, then the default context's, all tag 5. */
    OK(mw_send_in(ep, B, right, 5, "from B", 7));
    OK(mw_probe_in(ep, B, left, 5, &st)); /* arrived (and stays queued) */
    ASSERT_U64(st.len, 7);
    OK(mw_iprobe_in(ep, A, left, 5, &found, &st));
    ASSERT(!found);
    OK(mw_iprobe(ep, MW_ANY_SOURCE, MW_ANY_TAG, &found, NULL));
    ASSERT(!found); /* B's message is not the default context's */
    OK(mw_barrier(ep)); /* nothing else was sent before the probes above */
    OK(mw_send_in(ep, A, right, 5, "from A", 7));
    OK(mw_send_in(ep, MW_CONTEXT_DEFAULT, right, 5, "default", 8));
    OK(mw_recv_in(ep, A, MW_ANY_SOURCE, MW_ANY_TAG, got, sizeof got, &st));
    ASSERT(strcmp(got, "from A") == 0 && st.source == left && st.tag == 5);
    OK(mw_recv(ep, left, 5, got, sizeof got, &st)); /* the default context */
    ASSERT(strcmp(got, "default") == 0);
    OK(mw_iprobe_in(ep, B, MW_ANY_SOURCE, 5, &found, &st));
    ASSERT(found && st.source == left);
    OK(mw_recv_in(ep, B, left, 5, got, sizeof got, &st));
    ASSERT(strcmp(got, "from B") == 0);

    /* Nonblocking: a receive posted in A is not taken by B's message. */
    mw_handle *recv_a, *send_b, *send_a;
    OK(mw_irecv_in(ep, A, left, 6, got, sizeof got, &recv_a));
    OK(mw_isend_in(ep, B, right, 6, "b6", 3, &send_b));
    OK(mw_isend_in(ep, A, right, 6, "a6", 3, &send_a));
    OK(mw_wait_recv(&recv_a, &st));
    ASSERT(strcmp(got, "a6") == 0 && st.len == 3);
    OK(mw_recv_in(ep, B, left, 6, got, sizeof got, NULL));
    ASSERT(strcmp(got, "b6") == 0);
    OK(mw_wait(&send_b));
    OK(mw_wait(&send_a));
    EXPECT(MW_ERR_NULL_POINTER, mw_send_in(NULL, A, right, 5, "x", 1));
    EXPECT(MW_ERR_NULL_POINTER, mw_probe_in(ep, A, left, 5, NULL));
    OK(mw_barrier(ep));
}

/* Synchronous sends complete only once the receive matched: an issend
 * stays incomplete while no receive is posted, even for a message well
 * under the eager limit; a blocking ssend (also of 0 bytes) returns once
 * the receive posted first has taken it. And mw_cancel_recv withdraws only
 * a receive no message has matched. */
static void test_synchronous_send(void) {
    enum { CTX = 11 };
    char got[16];
    mw_recv_status st;
    mw_handle *send, *recv;
    bool done = true;
    OK(mw_issend_in(ep, CTX, right, 3, "sync", 5, &send));
    double until = now_s() + 0.05;
    while (now_s() < until) {
        OK_UNCOUNTED(mw_test(send, &done));
        if (done) break;
    }
    ASSERT(!done); /* nobody has posted a receive yet */
    OK(mw_barrier(ep));
    OK(mw_recv_in(ep, CTX, left, 3, got, sizeof got, &st));
    ASSERT(strcmp(got, "sync") == 0 && st.len == 5 && st.source == left);
    OK(mw_wait(&send));

    /* Blocking, with the receive posted first (it may be our own). */
    OK(mw_irecv_in(ep, CTX, left, 4, got, sizeof got, &recv));
    OK(mw_barrier(ep));
    OK(mw_ssend_in(ep, CTX, right, 4, "block", 6));
    OK(mw_wait_recv(&recv, &st));
    ASSERT(strcmp(got, "block") == 0 && st.len == 6);
    OK(mw_irecv_in(ep, CTX, left, 5, got, sizeof got, &recv));
    OK(mw_barrier(ep));
    OK(mw_ssend_in(ep, CTX, right, 5, NULL, 0));
    OK(mw_wait_recv(&recv, &st));
    ASSERT(st.len == 0 && st.tag == 5);
    /* Cancel: an unmatched receive is withdrawn (its handle consumed, the
     * buffer untouched); one a message has matched is not, and completes. */
    bool cancelled = false;
    memset(got, 0x5a, sizeof got);
    OK(mw_irecv_in(ep, CTX, left, 6, got, sizeof got, &recv));
    OK(mw_cancel_recv(&recv, &cancelled));
    ASSERT(cancelled && recv == NULL && got[0] == 0x5a);
    OK(mw_barrier(ep));
    OK(mw_send_in(ep, CTX, right, 6, "late", 5));
    OK(mw_probe_in(ep, CTX, left, 6, &st)); /* here: a receive now matches it at once */
    OK(mw_irecv_in(ep, CTX, left, 6, got, sizeof got, &recv));
    OK(mw_cancel_recv(&recv, &cancelled));
    ASSERT(!cancelled && recv != NULL);
    OK(mw_wait_recv(&recv, &st));
    ASSERT(strcmp(got, "late") == 0 && st.len == 5);
    EXPECT(MW_ERR_NULL_POINTER, mw_cancel_recv(NULL, &cancelled));
    EXPECT(MW_ERR_NULL_POINTER, mw_ssend_in(NULL, CTX, right, 5, "x", 1));
    EXPECT(MW_ERR_NULL_POINTER, mw_issend_in(ep, CTX, right, 5, "x", 1, NULL));
    OK(mw_barrier(ep));
}

/* One-way messages handled here: count and the sum of their first argument. */
static volatile uint64_t posted_seen, posted_sum, posted_wanted_reply;

static void echo_handler(mw_am_context *ctx, const mw_am_message *msg, void *user) {
    (void)user;
    uint8_t rev[64];
    size_t len = msg->len < sizeof rev ? msg->len : sizeof rev;
    for (size_t i = 0; i < len; i++) rev[i] = ((const uint8_t *)msg->payload)[len - 1 - i];
    uint64_t arg = msg->nargs > 0 ? msg->args[0] * 2 : 0;
    (void)mw_am_reply(ctx, &arg, 1, rev, len);
}

/* Replies with the sum of the payload's bytes (large payloads). */
static void sum_handler(mw_am_context *ctx, const mw_am_message *msg, void *user) {
    (void)user;
    uint64_t sum = 0;
    for (size_t i = 0; i < msg->len; i++) sum += ((const uint8_t *)msg->payload)[i];
    uint64_t reply[2] = {sum, msg->len};
    (void)mw_am_reply(ctx, reply, 2, NULL, 0);
}

static void oneway_handler(mw_am_context *ctx, const mw_am_message *msg, void *user) {
    (void)user;
    bool wants = true;
    if (mw_am_source(ctx, NULL, &wants) == MW_OK && wants) posted_wanted_reply++;
    posted_sum += msg->nargs > 0 ? msg->args[0] : 0;
    posted_seen++;
}

static void test_active_messages(void) {
    OK(mw_register_handler(ep, 20, echo_handler, NULL));
    OK(mw_register_handler(ep, 21, oneway_handler, NULL));
    OK(mw_register_handler(ep, 22, sum_handler, NULL));
    OK(mw_barrier(ep));

    /* Nonblocking request: polled, then its reply taken. */
    uint64_t arg = 21;
    uint8_t buf[16];
    mw_am_reply_data reply = {{0}, 0, buf, sizeof buf, 0};
    mw_handle *h;
    OK(mw_am_request_nb(ep, right, 20, &arg, 1, "hello", 5, &h));
    bool done = false;
    while (!done) OK_UNCOUNTED(mw_test(h, &done));
    OK(mw_wait_reply(&h, &reply));
    ASSERT(h == NULL);
    ASSERT(reply.nargs == 1 && reply.args[0] == 42 && reply.len == 5 && memcmp(buf, "olleh", 5) == 0);

    /* Many in flight, consumed by mw_wait_all, mw_wait and mw_handle_free. */
    mw_handle *many[8];
    for (uint64_t i = 0; i < 8; i++) OK(mw_am_request_nb(ep, right, 20, &i, 1, "ab", 2, &many[i]));
    OK(mw_wait(&many[7]));
    OK(mw_handle_free(&many[6]));
    OK(mw_wait_all(many, 6));
    for (int i = 0; i < 8; i++) ASSERT(many[i] == NULL);

    /* A large payload is copied by the call: changing it afterwards does not
     * change what the handler sees. */
    enum { LARGE = 100000 };
    static uint8_t large[LARGE];
    uint64_t want = 0;
    for (size_t i = 0; i < LARGE; i++) {
        large[i] = (uint8_t)(i * 7 + me);
        want += large[i];
    }
    OK(mw_am_request_nb(ep, right, 22, NULL, 0, large, LARGE, &h));
    memset(large, 0, sizeof large);
    mw_am_reply_data sum = {{0}, 0, NULL, 0, 0};
    OK(mw_wait_reply(&h, &sum));
    ASSERT(sum.nargs == 2 && sum.args[0] == want && sum.args[1] == LARGE);

    /* Errors: truncation, no handler, a handle of another kind, and the
     * AM handle refused where it does not fit; all consume the handle. */
    uint8_t tiny[2];
    mw_am_reply_data small = {{0}, 0, tiny, sizeof tiny, 0};
    OK(mw_am_request_nb(ep, right, 20, &arg, 1, "hello", 5, &h));
    EXPECT(MW_ERR_TRUNCATED, mw_wait_reply(&h, &small));
    ASSERT(h == NULL && small.len == 5);
    OK(mw_am_request_nb(ep, right, 99, NULL, 0, NULL, 0, &h));
    EXPECT(MW_ERR_NO_HANDLER, mw_wait_reply(&h, NULL));
    ASSERT(h == NULL);
    OK(mw_am_request_nb(ep, right, 20, &arg, 1, NULL, 0, &h));
    uint64_t value;
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_wait_value(&h, &value));
    ASSERT(h == NULL);
    OK(mw_isend(ep, right, 40, "x", 1, &h));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_wait_reply(&h, NULL));
    ASSERT(h == NULL);
    OK(mw_recv(ep, left, 40, buf, sizeof buf, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_wait_reply(&h, NULL));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_am_request_nb(ep, right, 0xFF00, NULL, 0, NULL, 0, &h));
    EXPECT(MW_ERR_BAD_RANK, mw_am_request_nb(ep, n, 20, NULL, 0, NULL, 0, &h));
    EXPECT(MW_ERR_NULL_POINTER, mw_am_request_nb(ep, right, 20, NULL, 0, NULL, 0, NULL));

    /* One-way messages from application code: each runs its handler once at
     * the target, nothing comes back; one to an unknown handler is counted
     * there. Argument errors are refused at the call. */
    uint64_t nine[9] = {0};
    EXPECT(MW_ERR_BAD_RANK, mw_am_post(ep, n, 21, NULL, 0, NULL, 0));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_am_post(ep, right, 0xFF00, NULL, 0, NULL, 0));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_am_post(ep, right, 21, nine, 9, NULL, 0));
    EXPECT(MW_ERR_NULL_POINTER, mw_am_post(ep, right, 21, NULL, 3, NULL, 0));
    mw_stats before;
    get_stats(&before);
    OK(mw_barrier(ep)); /* no rank posts before every rank has its `before` */
    uint64_t one = me + 1;
    OK(mw_am_post(ep, right, 21, &one, 1, large, LARGE)); /* large: pulled by the target */
    OK(mw_am_post(ep, right, 99, &one, 1, "lost", 4));
    for (int i = 0; i < 5; i++) OK(mw_am_post(ep, right, 21, &one, 1, "x", 1));
    double start = now_s();
    while (posted_seen < 6) {
        if (now_s() - start > 30) FAIL("only %llu of 6 one-way messages ran", (unsigned long long)posted_seen);
        OK_UNCOUNTED(mw_progress(ep));
    }
    OK(mw_barrier(ep)); /* every rank's have run: none arrives after */
    ASSERT_U64(posted_seen, 6);
    ASSERT_U64(posted_sum, 6 * (left + 1));
    ASSERT_U64(posted_wanted_reply, 0);
    mw_stats after;
    get_stats(&after);
    ASSERT(after.am_no_handler >= before.am_no_handler + 1);
    ASSERT(after.am_handled >= before.am_handled + 6);
    bool removed;
    OK(mw_unregister_handler(ep, 20, &removed));
    OK(mw_unregister_handler(ep, 21, &removed));
    OK(mw_unregister_handler(ep, 22, &removed));
    OK(mw_barrier(ep));
}

/* Every peer is alive here (the peer-death test is peer_event_test.c). */
static void test_peer_liveness(void) {
    bool down = true, found = true;
    mw_peer_event event = {0, 0};
    OK(mw_is_peer_down(ep, right, &down));
    ASSERT(!down);
    OK(mw_is_peer_down(ep, me, &down));
    ASSERT(!down);
    EXPECT(MW_ERR_BAD_RANK, mw_is_peer_down(ep, n, &down));
    EXPECT(MW_ERR_NULL_POINTER, mw_is_peer_down(ep, right, NULL));
    OK(mw_poll_peer_event(ep, &found, &event));
    ASSERT(!found);
    OK(mw_poll_peer_event(ep, &found, NULL));
    ASSERT(!found);
    EXPECT(MW_ERR_NULL_POINTER, mw_poll_peer_event(ep, NULL, &event));
    ASSERT(MW_PEER_DOWN != MW_PEER_RESTARTED);
}

/* mw_wait_timeout: completes like mw_wait when the peer answers. The
 * receive forms with a timeout end a wait for a message nobody sends with
 * MW_ERR_TIMEOUT (the receive cancelled, the buffer untouched), and still
 * receive one that comes; a pop from an empty FIFO ends the same way. A
 * wait on a peer that stops answering mid-transfer is tested in Rust
 * (crates/core/tests/deadline.rs), where a peer can be made to nap. */
static void test_wait_timeout(void) {
    mw_region *region;
    mw_key key;
    mw_handle *h = NULL;
    uint64_t word = 0x5eed0000ULL + me, back = 0;
    OK(mw_region_alloc_symmetric(ep, 64, MW_ACCESS_ALL, &region));
    OK(mw_region_key(region, &key));
    OK(mw_put_nb(ep, right, key, 8 * (me % 8), &word, sizeof word, &h));
    OK(mw_wait_timeout(&h, 30000));
    ASSERT(h == NULL);
    OK(mw_get_nb(ep, right, key, 8 * (me % 8), &back, sizeof back, &h));
    OK(mw_wait_timeout(&h, 30000));
    ASSERT(h == NULL);
    ASSERT_U64(back, word);
    EXPECT(MW_ERR_NULL_POINTER, mw_wait_timeout(&h, 1));
    EXPECT(MW_ERR_NULL_POINTER, mw_wait_timeout(NULL, 1));

    uint8_t in[8];
    mw_recv_status st;
    memset(in, 0xEE, sizeof in);
    OK(mw_irecv(ep, left, 4242, in, sizeof in, &h));
    EXPECT(MW_ERR_TIMEOUT, mw_wait_timeout(&h, 1));
    ASSERT(h == NULL); /* consumed, the receive cancelled */
    OK(mw_irecv(ep, left, 4242, in, sizeof in, &h));
    EXPECT(MW_ERR_TIMEOUT, mw_wait_recv_timeout(&h, &st, 1));
    ASSERT(h == NULL);
    EXPECT(MW_ERR_TIMEOUT, mw_recv_timeout(ep, MW_CONTEXT_DEFAULT, left, 4242, in, sizeof in, &st, 1));
    EXPECT(MW_ERR_TIMEOUT, mw_probe_timeout(ep, MW_CONTEXT_DEFAULT, left, 4242, &st, 1));
    for (size_t i = 0; i < sizeof in; i++) ASSERT(in[i] == 0xEE);
    OK(mw_barrier(ep));
    /* Nothing is left posted: what comes now goes to the next receive. */
    uint64_t mine = 0xfeed0000ULL + me, got = 0;
    OK(mw_send(ep, right, 4242, &mine, sizeof mine));
    OK(mw_probe_timeout(ep, MW_CONTEXT_DEFAULT, left, 4242, &st, 30000));
    ASSERT_U64(st.len, sizeof got);
    OK(mw_recv_timeout(ep, MW_CONTEXT_DEFAULT, left, 4242, &got, sizeof got, &st, 30000));
    ASSERT_U64(got, 0xfeed0000ULL + (uint64_t)left);
    OK(mw_send(ep, right, 4243, &mine, sizeof mine));
    OK(mw_irecv(ep, left, 4243, &got, sizeof got, &h));
    OK(mw_wait_recv_timeout(&h, &st, 30000));
    ASSERT_U64(st.source, left);

    mw_fifo *fifo = NULL;
    size_t len = 0;
    OK(mw_fifo_create(ep, 8, 2, &fifo));
    EXPECT(MW_ERR_TIMEOUT, mw_fifo_pop_timeout(fifo, in, sizeof in, &len, 1));
    uint64_t fifo_key;
    OK(mw_fifo_key(fifo, &fifo_key));
    OK(mw_fifo_push(ep, me, fifo_key, "entry", 5));
    OK(mw_fifo_pop_timeout(fifo, in, sizeof in, &len, 30000));
    ASSERT_U64(len, 5);
    OK(mw_fifo_free(&fifo));
    OK(mw_barrier(ep));
    OK(mw_region_free(&region));
}

/* mw_stats grows by appending: a caller built against a shorter struct
 * gets its prefix and nothing past it; a longer one learns what was filled. */
static void test_stats_versions(void) {
    enum { FILL = 0xA5 };
    /* The layout a program of an earlier version knows: up to shm_streamed_bytes. */
    const size_t old_size = offsetof(mw_stats, shm_streamed_bytes) + sizeof(uint64_t);
    uint64_t buf[sizeof(mw_stats) / 8 + 8];
    unsigned char *bytes = (unsigned char *)buf;

    memset(buf, FILL, sizeof buf);
    buf[0] = old_size;
    OK(mw_stats_get(ep, (mw_stats *)buf));
    ASSERT_U64(buf[0], old_size);
    for (size_t i = old_size; i < sizeof buf; i++)
        if (bytes[i] != FILL) FAIL("byte %zu past the caller's %zu-byte mw_stats was written", i, old_size);
    checks++;
    mw_stats full;
    get_stats(&full);
    /* The prefix holds counters (no counter reaches the fill pattern), and
     * they only grow between the calls. */
    for (size_t i = 1; i < old_size / 8; i++)
        if (buf[i] == 0xA5A5A5A5A5A5A5A5ULL) FAIL("counter %zu of the prefix was not written", i);
    checks++;
    ASSERT(buf[1] <= full.ops_initiated && buf[9] <= full.packets_sent);
    ASSERT(full.am_handled > 0 && full.msg_eager_sent > 0);
    ASSERT_U64(full.udp_payload_mtu, MTU);
    ASSERT_U64(full.drops_unproven_epoch, 0);

    /* A newer program's longer struct: filled up to this library's size. */
    memset(buf, FILL, sizeof buf);
    buf[0] = sizeof buf;
    OK(mw_stats_get(ep, (mw_stats *)buf));
    ASSERT_U64(buf[0], sizeof(mw_stats));
    for (size_t i = sizeof(mw_stats); i < sizeof buf; i++)
        if (bytes[i] != FILL) FAIL("byte %zu past the library's mw_stats was written", i);
    checks++;

    /* Size not set: refused, nothing written. */
    memset(buf, FILL, sizeof buf);
    buf[0] = 0;
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_stats_get(ep, (mw_stats *)buf));
    LAST_ERROR_MENTIONS("size");
    ASSERT(buf[0] == 0 && bytes[8] == FILL);
    buf[0] = 8;
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_stats_get(ep, (mw_stats *)buf));
    EXPECT(MW_ERR_NULL_POINTER, mw_stats_get(ep, NULL));

    const char *transport = getenv("MW_TRANSPORT");
    if (n > 1 && transport && strcmp(transport, "udp") == 0) {
        ASSERT(full.udp_send_calls > 0 && full.udp_datagrams_sent >= full.udp_send_calls);
        ASSERT(full.udp_recv_calls > 0 && full.udp_datagrams_received >= full.udp_recv_calls);
        ASSERT(full.data_received > 0);
        /* Nothing larger than the configured MTU went out. */
        ASSERT(full.bytes_sent <= full.packets_sent * MTU);
    }
}

int main(void) {
    test_version();
    test_config_refusals();
    init_with_config();
    test_config_took_effect();
    test_contexts();
    test_synchronous_send();
    test_active_messages();
    test_peer_liveness();
    test_wait_timeout();
    test_stats_versions();
    OK(mw_finalize(&ep));
    printf("capi_parity_test: rank %u of %u: %u checks passed\n", me, n, checks);
    return 0;
}
