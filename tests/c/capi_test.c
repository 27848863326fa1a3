/* Exercises every function of memwire's C API with checks, on any number of
 * ranks (each rank works with its right neighbour; with one rank, itself).
 * Run by `make ctest` under `mwrun -n 4`, `-n 2` and `-n 1`, linked against
 * libmemwire.so and libmemwire.a. Exits 0 only if every check passed. */
#include <memwire.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t me, n, left, right;
static unsigned checks;

#include "check.h"

/* Byte `i` of the pattern rank `r` writes. */
static uint8_t pat(uint32_t r, size_t i) { return (uint8_t)(r * 31u + i * 7u + 1u); }

static void fill(uint8_t *buf, size_t len, uint32_t r) {
    for (size_t i = 0; i < len; i++) buf[i] = pat(r, i);
}

static void check_pattern(const uint8_t *buf, size_t len, uint32_t r, const char *what) {
    for (size_t i = 0; i < len; i++)
        if (buf[i] != pat(r, i)) FAIL("%s: byte %zu is %u, want %u (from rank %u)", what, i, buf[i], pat(r, i), r);
    checks++;
}

/* Layout of the symmetric region S (every rank writes only into its right
 * neighbour's copy, so each copy has exactly one remote writer: `left`). */
enum {
    S_LEN = 4096,
    OFF_COUNTER = 0,   /* u64 on rank 0: every rank adds */
    OFF_W64 = 8,       /* u64 atomics */
    OFF_W32 = 16,      /* u32 atomics */
    OFF_PUT = 64,      /* put / put_nb / get: 256 bytes */
    OFF_SIGNAL = 320,  /* put_signal's signal word */
    OFF_SIGDATA = 384, /* put_signal's data: 128 bytes */
    OFF_STRIDED = 640, /* 512 bytes */
    OFF_IOV = 1152,    /* 256 bytes */
    OFF_MASK64 = 1408, /* 64-byte masked block */
    OFF_MASK256 = 1536, /* 256-byte masked block */
    OFF_REG = 1792,    /* address register window: 64 bytes */
    OFF_VALUE = 1856,  /* put_value / get_value word */
    OFF_NB = 2048,     /* wait_all puts: 4 x 64 bytes */
    OFF_FLUSH = 2304,  /* flush: 64 bytes */
};

static mw_endpoint *ep;
static mw_region *S;
static mw_key skey;

static void read_local(mw_region *r, uint64_t off, void *out, size_t len) { OK(mw_region_read(r, off, out, len)); }

static void test_status_and_null_arguments(void) {
    ASSERT(strcmp(mw_strerror(MW_OK), "success") == 0);
    ASSERT(strcmp(mw_strerror(MW_ERR_BAD_KEY), "unknown region key at the target") == 0);
    ASSERT(strcmp(mw_strerror(12345), "unknown status code") == 0);
    ASSERT(strcmp(mw_strerror(-1), "unknown status code") == 0);
    for (int s = MW_OK; s <= MW_ERR_INTERNAL; s++) ASSERT(strcmp(mw_strerror(s), "unknown status code") != 0);
    uint32_t x = 77;
    EXPECT(MW_ERR_NULL_POINTER, mw_rank(NULL, &x));
    ASSERT(x == 77); /* outputs only on success */
    ASSERT(strstr(mw_last_error(), "ep") != NULL);
    EXPECT(MW_ERR_NULL_POINTER, mw_init(NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_finalize(NULL));
    mw_endpoint *none = NULL;
    EXPECT(MW_ERR_NULL_POINTER, mw_finalize(&none));
    EXPECT(MW_ERR_NULL_POINTER, mw_wait(NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_test(NULL, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_put(NULL, 0, 1, 0, NULL, 0));
}

static void test_endpoint(void) {
    OK(mw_init(&ep));
    ASSERT(ep != NULL);
    mw_endpoint *second = NULL;
    EXPECT(MW_ERR_IN_USE, mw_init(&second));
    ASSERT(second == NULL);
    OK(mw_rank(ep, &me));
    OK(mw_size(ep, &n));
    ASSERT(n >= 1 && me < n);
    EXPECT(MW_ERR_NULL_POINTER, mw_size(ep, NULL));
    left = (me + n - 1) % n;
    right = (me + 1) % n;
    OK(mw_progress(ep));
    OK(mw_fence(ep));
    OK(mw_quiet(ep));
    OK(mw_flush(ep, right));
    EXPECT(MW_ERR_BAD_RANK, mw_flush(ep, n));
    OK(mw_barrier(ep));
}

static void test_regions_local(void) {
    OK(mw_region_alloc_symmetric(ep, S_LEN, MW_ACCESS_ALL, &S));
    OK(mw_region_key(S, &skey));
    ASSERT(skey != 0);
    size_t len = 0;
    OK(mw_region_len(S, &len));
    ASSERT_U64(len, S_LEN);
    void *base = NULL;
    OK(mw_region_ptr(S, &base));
    ASSERT(base != NULL && ((uintptr_t)base % 64) == 0);

    /* Local access on a private region: read/write/load/store, bounds, alignment. */
    mw_region *local;
    OK(mw_region_alloc(ep, 64, MW_ACCESS_NONE, &local));
    uint8_t in[16], out[16];
    fill(in, sizeof in, me);
    OK(mw_region_write(local, 5, in, sizeof in));
    OK(mw_region_read(local, 5, out, sizeof out));
    ASSERT(memcmp(in, out, sizeof in) == 0);
    void *lbase;
    OK(mw_region_ptr(local, &lbase));
    ASSERT(memcmp((uint8_t *)lbase + 5, in, sizeof in) == 0);
    OK(mw_region_write(local, 0, NULL, 0));
    EXPECT(MW_ERR_OUT_OF_BOUNDS, mw_region_read(local, 60, out, 8));
    EXPECT(MW_ERR_OUT_OF_BOUNDS, mw_region_write(local, UINT64_MAX, in, 2));
    EXPECT(MW_ERR_NULL_POINTER, mw_region_write(local, 0, NULL, 4));
    OK(mw_region_store_u64(local, 32, 0x1122334455667788ull));
    uint64_t v = 0;
    OK(mw_region_load_u64(local, 32, &v));
    ASSERT_U64(v, 0x1122334455667788ull);
    EXPECT(MW_ERR_MISALIGNED, mw_region_load_u64(local, 33, &v));
    EXPECT(MW_ERR_OUT_OF_BOUNDS, mw_region_store_u64(local, 64, 1));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_region_alloc(ep, 64, 8, &local));
    EXPECT(MW_ERR_NULL_POINTER, mw_region_alloc(ep, 64, MW_ACCESS_ALL, NULL));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_region_alloc_shared(ep, 64, 8, &local));
    EXPECT(MW_ERR_NULL_POINTER, mw_region_alloc_shared(ep, 64, MW_ACCESS_ALL, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_region_alloc_shared(NULL, 64, MW_ACCESS_ALL, &local));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_region_enable_arrival_log(local, 0));

    /* Free through the caller's variable: it becomes NULL; again is a no-op. */
    mw_region *copy = local;
    OK(mw_region_free(&local));
    ASSERT(local == NULL);
    OK(mw_region_free(&local));
    (void)copy;
    EXPECT(MW_ERR_NULL_POINTER, mw_region_free(NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_region_key(NULL, &skey));
}

static void test_put_get(void) {
    uint8_t src[256], dst[256];
    fill(src, sizeof src, me);
    /* Odd offsets and lengths: any byte alignment works. */
    OK(mw_put(ep, right, skey, OFF_PUT + 3, src, 200));
    mw_handle *h = NULL;
    OK(mw_put_nb(ep, right, skey, OFF_PUT + 203, src + 200, 51, &h));
    ASSERT(h != NULL);
    bool done = false;
    for (int i = 0; i < 1000000 && !done; i++) OK_UNCOUNTED(mw_test(h, &done));
    ASSERT(done);
    OK(mw_wait(&h));
    ASSERT(h == NULL);
    EXPECT(MW_ERR_NULL_POINTER, mw_wait(&h)); /* consumed: a second wait is an error, not a double free */
    OK(mw_handle_free(&h));
    OK(mw_barrier(ep));
    read_local(S, OFF_PUT + 3, dst, 251);
    check_pattern(dst, 251, left, "put + put_nb from left");

    memset(dst, 0, sizeof dst);
    OK(mw_get(ep, right, skey, OFF_PUT + 3, dst, 251));
    check_pattern(dst, 251, me, "get from right");
    memset(dst, 0, sizeof dst);
    OK(mw_get_nb(ep, right, skey, OFF_PUT + 3, dst, 100, &h));
    OK(mw_wait(&h));
    check_pattern(dst, 100, me, "get_nb from right");
    /* A released get never writes its buffer afterwards (between same-host
     * ranks it may have been filled inside mw_get_nb already). */
    memset(dst, 0, sizeof dst);
    OK(mw_get_nb(ep, right, skey, OFF_PUT + 3, dst, 100, &h));
    OK(mw_handle_free(&h));
    ASSERT(h == NULL);
    memset(dst, 0xEE, sizeof dst);
    OK(mw_quiet(ep));
    for (int i = 0; i < 100; i++) OK(mw_progress(ep));
    for (size_t i = 0; i < 100; i++)
        if (dst[i] != 0xEE) FAIL("released get wrote byte %zu", i);
    OK(mw_get(ep, right, skey, 0, NULL, 0));

    /* Single words. */
    OK(mw_put_value(ep, right, skey, OFF_VALUE, 0xABCD0000ull + me));
    uint64_t v = 0;
    OK(mw_get_value(ep, right, skey, OFF_VALUE, &v));
    ASSERT_U64(v, 0xABCD0000ull + me);
    OK(mw_barrier(ep));
    OK(mw_region_load_u64(S, OFF_VALUE, &v));
    ASSERT_U64(v, 0xABCD0000ull + left);

    /* Errors at the initiator and at the target; the target's memory is untouched. */
    v = 99;
    EXPECT(MW_ERR_BAD_RANK, mw_get_value(ep, n, skey, OFF_VALUE, &v));
    ASSERT_U64(v, 99);
    EXPECT(MW_ERR_BAD_KEY, mw_put(ep, right, skey ^ 0x5a5a, 0, src, 8));
    EXPECT(MW_ERR_OUT_OF_BOUNDS, mw_put(ep, right, skey, S_LEN - 4, src, 8));
    EXPECT(MW_ERR_OUT_OF_BOUNDS, mw_get(ep, right, skey, S_LEN - 4, dst, 8));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_get(ep, right, skey, UINT64_MAX - 2, dst, 8)); /* offset + len overflows */
    EXPECT(MW_ERR_NULL_POINTER, mw_put(ep, right, skey, 0, NULL, 8));
    EXPECT(MW_ERR_NULL_POINTER, mw_get(ep, right, skey, 0, NULL, 8));
    EXPECT(MW_ERR_NULL_POINTER, mw_put_nb(ep, right, skey, 0, src, 8, NULL));
    OK(mw_put(ep, right, skey, 0, NULL, 0));
    OK(mw_barrier(ep));
}

/* A region of caller memory, 1 MiB + 13 bytes: big puts and gets cross
 * several chunks and packets; keys come from mw_region_exchange_keys. */
static void test_registered_and_big(void) {
    const size_t big = (1u << 20) + 13;
    uint8_t *mem = calloc(big, 1), *src = malloc(big), *back = malloc(big);
    if (!mem || !src || !back) FAIL("out of memory");
    mw_region *R;
    EXPECT(MW_ERR_NULL_POINTER, mw_region_register(ep, NULL, 64, MW_ACCESS_ALL, &R));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_region_register(ep, mem, big, 0x10, &R));
    OK(mw_region_register(ep, mem, big, MW_ACCESS_READ_WRITE, &R));
    void *p;
    OK(mw_region_ptr(R, &p));
    ASSERT(p == (void *)mem);
    mw_key *keys = calloc(n, sizeof *keys), mine;
    if (!keys) FAIL("out of memory");
    OK(mw_region_key(R, &mine));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_region_exchange_keys(ep, R, keys, n - 1));
    OK(mw_region_exchange_keys(ep, R, keys, n));
    ASSERT(keys[me] == mine);
    fill(src, big, me);
    OK(mw_put(ep, right, keys[right], 0, src, big));
    OK(mw_barrier(ep));
    check_pattern(mem, big, left, "1 MiB put into registered memory");
    OK(mw_get(ep, right, keys[right], 0, back, big));
    check_pattern(back, big, me, "1 MiB get from registered memory");
    /* READ_WRITE grants no atomics. */
    uint64_t old = 5;
    EXPECT(MW_ERR_NO_PERMISSION, mw_fetch_add_u64(ep, right, keys[right], 0, 1, &old));
    ASSERT_U64(old, 5);
    OK(mw_barrier(ep));
    OK(mw_region_free(&R));
    OK(mw_barrier(ep));
    /* The key is gone everywhere; the memory is the caller's again. */
    EXPECT(MW_ERR_BAD_KEY, mw_put(ep, right, keys[right], 0, src, 8));
    OK(mw_barrier(ep));
    free(keys);
    free(mem);
    free(src);
    free(back);

    /* A read-only region: gets work; writes and atomics (even loads) are refused. */
    mw_region *ro;
    OK(mw_region_alloc_shared(ep, 128, MW_ACCESS_READ, &ro));
    OK(mw_region_store_u64(ro, 8, 4242));
    mw_key rokeys[64];
    if (n > 64) FAIL("test supports up to 64 ranks");
    OK(mw_region_exchange_keys(ep, ro, rokeys, 64));
    OK(mw_barrier(ep));
    uint64_t v;
    OK(mw_get_value(ep, right, rokeys[right], 8, &v));
    ASSERT_U64(v, 4242);
    EXPECT(MW_ERR_NO_PERMISSION, mw_atomic_load_u64(ep, right, rokeys[right], 8, &v));
    EXPECT(MW_ERR_NO_PERMISSION, mw_put_value(ep, right, rokeys[right], 8, 1));
    EXPECT(MW_ERR_NO_PERMISSION, mw_add_u64(ep, right, rokeys[right], 8, 1));
    EXPECT(MW_ERR_NO_PERMISSION, mw_atomic_store_u64(ep, right, rokeys[right], 8, 1));
    OK(mw_barrier(ep));
    OK(mw_region_load_u64(ro, 8, &v));
    ASSERT_U64(v, 4242);
    OK(mw_region_free(&ro));
}

static void test_atomics(void) {
    /* Exactly once: every rank adds 1 + 20 times to rank 0's counter. */
    uint64_t ticket;
    OK(mw_fetch_add_u64(ep, 0, skey, OFF_COUNTER, 1, &ticket));
    ASSERT(ticket < 21ull * n);
    for (int i = 0; i < 20; i++) OK(mw_add_u64(ep, 0, skey, OFF_COUNTER, 1));
    OK(mw_barrier(ep));
    uint64_t total;
    OK(mw_atomic_load_u64(ep, 0, skey, OFF_COUNTER, &total));
    ASSERT_U64(total, 21ull * n);

    /* Every u64 operation on right's word (its only remote writer is us). */
    uint64_t o;
    OK(mw_atomic_store_u64(ep, right, skey, OFF_W64, 100));
    OK(mw_atomic_load_u64(ep, right, skey, OFF_W64, &o));   ASSERT_U64(o, 100);
    OK(mw_fetch_add_u64(ep, right, skey, OFF_W64, 5, &o));  ASSERT_U64(o, 100);
    OK(mw_add_u64(ep, right, skey, OFF_W64, 5));
    OK(mw_swap_u64(ep, right, skey, OFF_W64, 7, &o));       ASSERT_U64(o, 110);
    OK(mw_compare_swap_u64(ep, right, skey, OFF_W64, 7, 9, &o)); ASSERT_U64(o, 7);
    OK(mw_compare_swap_u64(ep, right, skey, OFF_W64, 1, 2, &o)); ASSERT_U64(o, 9);
    OK(mw_fetch_and_u64(ep, right, skey, OFF_W64, 0xC, &o)); ASSERT_U64(o, 9);   /* -> 8 */
    OK(mw_and_u64(ep, right, skey, OFF_W64, 0xF));                                 /* -> 8 */
    OK(mw_fetch_or_u64(ep, right, skey, OFF_W64, 3, &o));   ASSERT_U64(o, 8);    /* -> 11 */
    OK(mw_or_u64(ep, right, skey, OFF_W64, 0x10));                                 /* -> 27 */
    OK(mw_fetch_xor_u64(ep, right, skey, OFF_W64, 1, &o));  ASSERT_U64(o, 27);   /* -> 26 */
    OK(mw_xor_u64(ep, right, skey, OFF_W64, 0xFF));                                /* -> 229 */
    OK(mw_atomic_load_u64(ep, right, skey, OFF_W64, &o));   ASSERT_U64(o, 229);
    OK(mw_add_u64(ep, right, skey, OFF_W64, UINT64_MAX));   /* wraps: -> 228 */
    OK(mw_fetch_add_u64(ep, right, skey, OFF_W64, 0, &o));  ASSERT_U64(o, 228);

    /* Every u32 operation. */
    uint32_t w;
    OK(mw_atomic_store_u32(ep, right, skey, OFF_W32, 0xFFFFFFF0u));
    OK(mw_atomic_load_u32(ep, right, skey, OFF_W32, &w));   ASSERT_U64(w, 0xFFFFFFF0u);
    OK(mw_fetch_add_u32(ep, right, skey, OFF_W32, 0x20, &w)); ASSERT_U64(w, 0xFFFFFFF0u); /* wraps -> 0x10 */
    OK(mw_add_u32(ep, right, skey, OFF_W32, 2));                                           /* -> 0x12 */
    OK(mw_swap_u32(ep, right, skey, OFF_W32, 40, &w));      ASSERT_U64(w, 0x12);
    OK(mw_compare_swap_u32(ep, right, skey, OFF_W32, 40, 41, &w)); ASSERT_U64(w, 40);
    OK(mw_compare_swap_u32(ep, right, skey, OFF_W32, 40, 42, &w)); ASSERT_U64(w, 41);
    OK(mw_fetch_and_u32(ep, right, skey, OFF_W32, 0x21, &w)); ASSERT_U64(w, 41);   /* 41 & 33 = 33 */
    OK(mw_and_u32(ep, right, skey, OFF_W32, 0x3));                                   /* -> 1 */
    OK(mw_fetch_or_u32(ep, right, skey, OFF_W32, 0x6, &w)); ASSERT_U64(w, 1);      /* -> 7 */
    OK(mw_or_u32(ep, right, skey, OFF_W32, 0x8));                                    /* -> 15 */
    OK(mw_fetch_xor_u32(ep, right, skey, OFF_W32, 0x5, &w)); ASSERT_U64(w, 15);    /* -> 10 */
    OK(mw_xor_u32(ep, right, skey, OFF_W32, 0x3));                                   /* -> 9 */
    OK(mw_atomic_load_u32(ep, right, skey, OFF_W32, &w));   ASSERT_U64(w, 9);
    OK(mw_barrier(ep));
    /* The neighbour word next to the u32 is untouched. */
    uint32_t pair[2];
    read_local(S, OFF_W32, pair, sizeof pair);
    ASSERT_U64(pair[0], 9);
    ASSERT_U64(pair[1], 0);
    /* Read before the left neighbour's next atomics on this word land (over
     * shared memory they are done in nanoseconds). */
    OK(mw_barrier(ep));

    /* Nonblocking atomics. */
    mw_handle *h = NULL;
    uint64_t val = 0;
    OK(mw_atomic_nb(ep, right, skey, OFF_W64, MW_ATOMIC_ADD, MW_WIDTH_U64, 2, 0, true, &h));
    OK(mw_wait_value(&h, &val));
    ASSERT(h == NULL);
    ASSERT_U64(val, 228);
    OK(mw_atomic_nb(ep, right, skey, OFF_W64, MW_ATOMIC_STORE, MW_WIDTH_U64, 500, 0, false, &h));
    OK(mw_wait(&h));
    OK(mw_atomic_nb(ep, right, skey, OFF_W64, MW_ATOMIC_LOAD, MW_WIDTH_U64, 0, 0, false, &h));
    OK(mw_wait_value(&h, &val));
    ASSERT_U64(val, 500);
    OK(mw_atomic_nb(ep, right, skey, OFF_W32, MW_ATOMIC_COMPARE_SWAP, MW_WIDTH_U32, 77, 9, true, &h));
    OK(mw_wait_value(&h, &val));
    ASSERT_U64(val, 9);
    OK(mw_atomic_nb(ep, right, skey, OFF_W32, MW_ATOMIC_XOR, MW_WIDTH_U32, 1, 0, false, &h));
    val = 3;
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_wait_value(&h, &val)); /* fetched nothing; consumed anyway */
    ASSERT(h == NULL);
    ASSERT_U64(val, 3);
    OK(mw_atomic_load_u32(ep, right, skey, OFF_W32, &w));
    ASSERT_U64(w, 76);

    /* Bad arguments. */
    EXPECT(MW_ERR_MISALIGNED, mw_fetch_add_u64(ep, right, skey, OFF_W64 + 4, 1, &o));
    EXPECT(MW_ERR_MISALIGNED, mw_add_u32(ep, right, skey, OFF_W32 + 2, 1));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_atomic_nb(ep, right, skey, OFF_W64, 99, MW_WIDTH_U64, 1, 0, true, &h));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_atomic_nb(ep, right, skey, OFF_W64, MW_ATOMIC_ADD, 3, 1, 0, true, &h));
    EXPECT(MW_ERR_INVALID_ARGUMENT,
           mw_atomic_nb(ep, right, skey, OFF_W32, MW_ATOMIC_ADD, MW_WIDTH_U32, 1ull << 40, 0, true, &h));
    ASSERT(h == NULL);
    EXPECT(MW_ERR_NULL_POINTER, mw_fetch_add_u64(ep, right, skey, OFF_W64, 1, NULL));
    EXPECT(MW_ERR_OUT_OF_BOUNDS, mw_swap_u64(ep, right, skey, S_LEN, 1, &o));
    OK(mw_barrier(ep));
}

static void test_signal(void) {
    uint8_t src[128], dst[128];
    fill(src, sizeof src, me + 100);
    mw_signal sig = {skey, OFF_SIGNAL, MW_SIGNAL_ADD, 1};
    OK(mw_put_signal(ep, right, skey, OFF_SIGDATA, src, 100, sig));
    uint64_t seen = 0;
    OK(mw_wait_until(ep, S, OFF_SIGNAL, MW_CMP_GE, 1, &seen));
    ASSERT(seen >= 1);
    read_local(S, OFF_SIGDATA, dst, 100);
    check_pattern(dst, 100, left + 100, "put_signal data visible once the signal is");
    OK(mw_barrier(ep));

    mw_handle *h = NULL;
    sig.op = MW_SIGNAL_SET;
    sig.value = 42;
    OK(mw_put_signal_nb(ep, right, skey, OFF_SIGDATA + 100, src + 100, 28, sig, &h));
    OK(mw_wait(&h));
    OK(mw_wait_until(ep, S, OFF_SIGNAL, MW_CMP_EQ, 42, NULL));
    read_local(S, OFF_SIGDATA, dst, 128);
    check_pattern(dst, 128, left + 100, "put_signal_nb data");
    OK(mw_wait_until(ep, S, OFF_SIGNAL, MW_CMP_NE, 0, &seen));
    OK(mw_wait_until(ep, S, OFF_SIGNAL, MW_CMP_GT, 41, &seen));
    OK(mw_wait_until(ep, S, OFF_SIGNAL, MW_CMP_LT, 43, &seen));
    OK(mw_wait_until(ep, S, OFF_SIGNAL, MW_CMP_LE, 42, &seen));
    ASSERT_U64(seen, 42);

    /* Implicit puts: no handle, complete when a later flush returns. */
    OK(mw_barrier(ep));
    uint8_t fresh[128];
    fill(fresh, sizeof fresh, me + 200);
    sig.value = 43;
    OK(mw_put_nbi(ep, right, skey, OFF_SIGDATA, fresh, 100));
    OK(mw_put_signal_nbi(ep, right, skey, OFF_SIGDATA + 100, fresh + 100, 28, sig));
    OK(mw_flush(ep, right));
    OK(mw_wait_until(ep, S, OFF_SIGNAL, MW_CMP_EQ, 43, NULL));
    read_local(S, OFF_SIGDATA, dst, 128);
    check_pattern(dst, 128, left + 200, "put_nbi and put_signal_nbi data");
    /* Out of bounds: found at issue (same host, direct) or reported by the
     * next flush toward the target, exactly once. */
    mw_status issued = mw_put_nbi(ep, right, skey, S_LEN - 4, fresh, 8);
    mw_status flushed = mw_flush(ep, right);
    ASSERT((issued == MW_ERR_OUT_OF_BOUNDS && flushed == MW_OK) || (issued == MW_OK && flushed == MW_ERR_OUT_OF_BOUNDS));
    OK(mw_quiet(ep));

    sig.op = 7;
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_put_signal(ep, right, skey, OFF_SIGDATA, src, 8, sig));
    sig.op = MW_SIGNAL_SET;
    sig.offset = OFF_SIGNAL + 1;
    EXPECT(MW_ERR_MISALIGNED, mw_put_signal(ep, right, skey, OFF_SIGDATA, src, 8, sig));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_wait_until(ep, S, OFF_SIGNAL, 99, 0, NULL));
    EXPECT(MW_ERR_MISALIGNED, mw_wait_until(ep, S, OFF_SIGNAL + 1, MW_CMP_EQ, 0, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_wait_until(ep, NULL, OFF_SIGNAL, MW_CMP_EQ, 0, NULL));
    OK(mw_barrier(ep));
}

static void test_strided_iov_masked(void) {
    /* 8 elements of 6 bytes: from src every 10 bytes, to the target every 16. */
    uint8_t src[80], back[120], area[512];
    fill(src, sizeof src, me);
    OK(mw_put_strided(ep, right, skey, OFF_STRIDED, src, 6, 8, 10, 16));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_put_strided(ep, right, skey, OFF_STRIDED, src, 6, 8, 4, 16));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_put_strided(ep, right, skey, OFF_STRIDED, src, 6, 8, 10, 5));
    EXPECT(MW_ERR_NULL_POINTER, mw_put_strided(ep, right, skey, OFF_STRIDED, NULL, 6, 8, 10, 16));
    OK(mw_put_strided(ep, right, skey, OFF_STRIDED, NULL, 6, 0, 10, 16));
    OK(mw_barrier(ep));
    uint8_t want_src[80];
    fill(want_src, sizeof want_src, left);
    read_local(S, OFF_STRIDED, area, 128);
    for (int i = 0; i < 8; i++) {
        ASSERT(memcmp(area + 16 * i, want_src + 10 * i, 6) == 0);
        for (int j = 6; j < 16; j++) ASSERT(area[16 * i + j] == 0); /* gaps untouched */
    }
    /* Gather back what we put at right, landing every 15 bytes. */
    memset(back, 0xAB, sizeof back);
    OK(mw_get_strided(ep, right, skey, OFF_STRIDED, back, 6, 8, 16, 15));
    for (int i = 0; i < 8; i++) {
        ASSERT(memcmp(back + 15 * i, src + 10 * i, 6) == 0);
        if (i < 7) ASSERT(back[15 * i + 6] == 0xAB);
    }
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_get_strided(ep, right, skey, OFF_STRIDED, back, 6, 8, 16, 3));
    EXPECT(MW_ERR_OUT_OF_BOUNDS, mw_get_strided(ep, right, skey, S_LEN - 8, back, 6, 8, 16, 15));

    /* Vectored put, including an empty segment with no data pointer. */
    uint8_t a[5], b[17], c[1];
    fill(a, sizeof a, me);
    fill(b, sizeof b, me + 1);
    fill(c, sizeof c, me + 2);
    mw_iov segs[4] = {
        {OFF_IOV, a, sizeof a},
        {OFF_IOV + 100, b, sizeof b},
        {OFF_IOV + 50, NULL, 0},
        {OFF_IOV + 200, c, sizeof c},
    };
    OK(mw_put_iov(ep, right, skey, segs, 4));
    EXPECT(MW_ERR_NULL_POINTER, mw_put_iov(ep, right, skey, NULL, 2));
    OK(mw_put_iov(ep, right, skey, NULL, 0));
    OK(mw_barrier(ep));
    read_local(S, OFF_IOV, area, 256);
    check_pattern(area, 5, left, "iov segment 0");
    check_pattern(area + 100, 17, left + 1, "iov segment 1");
    check_pattern(area + 200, 1, left + 2, "iov segment 2");
    ASSERT(area[5] == 0 && area[99] == 0 && area[117] == 0 && area[199] == 0 && area[201] == 0);

    /* Masked put: only the selected 4-byte words of the block are written. */
    uint8_t ones[64 + 256 + 64];
    memset(ones, 0x11, sizeof ones);
    OK(mw_region_write(S, OFF_MASK64, ones, 64 + 256 + 64));
    OK(mw_barrier(ep));
    uint8_t blk[256];
    fill(blk, sizeof blk, me);
    uint64_t mask64 = (1u << 0) | (1u << 2) | (1u << 13) | (1u << 15);
    OK(mw_put_masked(ep, right, skey, OFF_MASK64, blk, 64, mask64));
    uint64_t mask256 = (1ull << 63) | 1ull;
    OK(mw_put_masked(ep, right, skey, OFF_MASK256, blk, 256, mask256));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_put_masked(ep, right, skey, OFF_MASK64, blk, 32, 1));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_put_masked(ep, right, skey, OFF_MASK64, blk, 64, 1u << 16));
    OK(mw_barrier(ep));
    uint8_t want[256];
    fill(want, sizeof want, left);
    read_local(S, OFF_MASK64, area, 64);
    for (int word = 0; word < 16; word++)
        for (int k = 0; k < 4; k++)
            ASSERT(area[4 * word + k] == ((mask64 >> word) & 1 ? want[4 * word + k] : 0x11));
    read_local(S, OFF_MASK256, area, 256);
    for (int word = 0; word < 64; word++)
        for (int k = 0; k < 4; k++)
            ASSERT(area[4 * word + k] == ((mask256 >> word) & 1 ? want[4 * word + k] : 0x11));
    OK(mw_barrier(ep));
}

static void test_registers(void) {
    OK(mw_set_register(ep, 3, S, OFF_REG, 64));
    EXPECT(MW_ERR_OUT_OF_BOUNDS, mw_set_register(ep, 4, S, S_LEN - 8, 64));
    EXPECT(MW_ERR_NULL_POINTER, mw_set_register(ep, 4, NULL, 0, 8));
    OK(mw_barrier(ep));
    char msg[32];
    int len = snprintf(msg, sizeof msg, "hello from rank %u", me);
    OK(mw_put_to_register(ep, right, 3, msg, (size_t)len + 1));
    uint8_t big[65] = {0};
    EXPECT(MW_ERR_OUT_OF_BOUNDS, mw_put_to_register(ep, right, 3, big, sizeof big));
    EXPECT(MW_ERR_UNSUPPORTED, mw_put_to_register(ep, right, 9, msg, 4));
    OK(mw_barrier(ep));
    char got[64], want[32];
    read_local(S, OFF_REG, got, sizeof got);
    snprintf(want, sizeof want, "hello from rank %u", left);
    ASSERT(strcmp(got, want) == 0);
    OK(mw_clear_register(ep, 3));
    OK(mw_barrier(ep));
    EXPECT(MW_ERR_UNSUPPORTED, mw_put_to_register(ep, right, 3, msg, 4));
    OK(mw_barrier(ep));
}

static void test_arrival_log(void) {
    mw_region *A;
    OK(mw_region_alloc_symmetric(ep, 256, MW_ACCESS_ALL, &A));
    mw_key akey;
    OK(mw_region_key(A, &akey));
    OK(mw_region_enable_arrival_log(A, 4));
    OK(mw_barrier(ep));
    uint8_t data[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    uint64_t old;
    OK(mw_put(ep, right, akey, 16, data, sizeof data));
    OK(mw_fetch_add_u64(ep, right, akey, 0, 1, &old));
    OK(mw_barrier(ep));
    mw_arrival a;
    bool found = false;
    OK(mw_region_pop_arrival(A, &a, &found));
    ASSERT(found);
    ASSERT_U64(a.kind, MW_ARRIVAL_PUT);
    ASSERT_U64(a.source, left);
    ASSERT_U64(a.offset, 16);
    ASSERT_U64(a.len, 10);
    OK(mw_region_pop_arrival(A, &a, &found));
    ASSERT(found);
    ASSERT_U64(a.kind, MW_ARRIVAL_ATOMIC);
    ASSERT_U64(a.offset, 0);
    ASSERT_U64(a.len, 8);
    a.kind = 999;
    OK(mw_region_pop_arrival(A, &a, &found));
    ASSERT(!found);
    ASSERT_U64(a.kind, 999);
    uint64_t lost = 1;
    OK(mw_region_arrivals_lost(A, &lost));
    ASSERT_U64(lost, 0);
    OK(mw_barrier(ep));
    /* Six arrivals into a log of four: the newest four are kept. */
    for (uint64_t i = 0; i < 6; i++) OK(mw_put(ep, right, akey, 32 + i, data, 1));
    OK(mw_barrier(ep));
    for (uint64_t i = 2; i < 6; i++) {
        OK(mw_region_pop_arrival(A, &a, &found));
        ASSERT(found);
        ASSERT_U64(a.offset, 32 + i);
    }
    OK(mw_region_pop_arrival(A, &a, &found));
    ASSERT(!found);
    OK(mw_region_arrivals_lost(A, &lost));
    ASSERT_U64(lost, 2);
    EXPECT(MW_ERR_NULL_POINTER, mw_region_pop_arrival(A, NULL, &found));
    OK(mw_barrier(ep));
    OK(mw_region_free(&A));
}

static void test_handles(void) {
    uint8_t src[4][64];
    mw_handle *hs[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int i = 0; i < 4; i++) {
        fill(src[i], 64, me + (uint32_t)i);
        OK(mw_put_nb(ep, right, skey, OFF_NB + 64 * (uint64_t)i, src[i], 64, &hs[i == 3 ? 4 : i]));
    }
    OK(mw_wait_all(hs, 5)); /* hs[3] is NULL: skipped */
    for (int i = 0; i < 5; i++) ASSERT(hs[i] == NULL);
    OK(mw_wait_all(NULL, 0));
    EXPECT(MW_ERR_NULL_POINTER, mw_wait_all(NULL, 2));
    OK(mw_barrier(ep));
    uint8_t area[256];
    read_local(S, OFF_NB, area, sizeof area);
    for (int i = 0; i < 4; i++) check_pattern(area + 64 * i, 64, left + (uint32_t)i, "wait_all put");

    /* A failing operation in wait_all: the first error is reported, all are consumed. */
    OK(mw_put_nb(ep, right, skey, OFF_NB, src[0], 8, &hs[0]));
    OK(mw_put_nb(ep, right, skey, S_LEN - 2, src[0], 8, &hs[1]));
    OK(mw_get_nb(ep, right, skey ^ 1, 0, area, 8, &hs[2]));
    EXPECT(MW_ERR_OUT_OF_BOUNDS, mw_wait_all(hs, 3));
    ASSERT(hs[0] == NULL && hs[1] == NULL && hs[2] == NULL);

    /* Completion flag at the initiator (Cenju-4 notification address). */
    mw_region *flags;
    OK(mw_region_alloc(ep, 16, MW_ACCESS_NONE, &flags));
    mw_handle *h;
    OK(mw_put_nb(ep, right, skey, OFF_NB, src[0], 64, &h));
    OK(mw_handle_notify(h, flags, 0));
    OK(mw_wait(&h));
    OK(mw_wait_until(ep, flags, 0, MW_CMP_EQ, 1, NULL));
    /* Asked after completion: the flag is bumped at once. */
    OK(mw_put_nb(ep, right, skey, OFF_NB, src[0], 64, &h));
    bool done = false;
    while (!done) OK_UNCOUNTED(mw_test(h, &done));
    OK(mw_handle_notify(h, flags, 0));
    uint64_t flag;
    OK(mw_region_load_u64(flags, 0, &flag));
    ASSERT_U64(flag, 2);
    EXPECT(MW_ERR_MISALIGNED, mw_handle_notify(h, flags, 3));
    EXPECT(MW_ERR_OUT_OF_BOUNDS, mw_handle_notify(h, flags, 16));
    EXPECT(MW_ERR_NULL_POINTER, mw_handle_notify(h, NULL, 0));
    EXPECT(MW_ERR_NULL_POINTER, mw_handle_notify(NULL, flags, 0));

    /* The endpoint outlives its handles and regions. */
    EXPECT(MW_ERR_IN_USE, mw_finalize(&ep));
    ASSERT(ep != NULL);
    OK(mw_handle_free(&h));
    ASSERT(h == NULL);
    OK(mw_region_free(&flags));
    OK(mw_barrier(ep));
}

static void test_flush_and_stats(void) {
    uint8_t src[64], back[64];
    fill(src, sizeof src, me + 7);
    mw_handle *h;
    OK(mw_put_nb(ep, right, skey, OFF_FLUSH, src, sizeof src, &h));
    OK(mw_handle_free(&h)); /* released: the put still completes */
    OK(mw_flush(ep, right));
    OK(mw_get(ep, right, skey, OFF_FLUSH, back, sizeof back));
    check_pattern(back, sizeof back, me + 7, "put completed by flush");
    OK(mw_fence(ep));
    OK(mw_quiet(ep));
    OK(mw_barrier(ep));

    mw_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st; /* the struct's version (capi_parity_test.c checks older ones) */
    OK(mw_stats_get(ep, &st));
    /* Sent as messages (UDP or rings) or done directly in a same-host peer's memory. */
    ASSERT(st.ops_initiated + st.shm_direct_ops > 100);
    /* Our left neighbour sent us a bad key, an out-of-bounds and a no-permission op. */
    ASSERT(st.rejected_bad_key >= 1);
    ASSERT(st.rejected_out_of_bounds >= 1);
    ASSERT(st.rejected_no_permission >= 1);
    if (n > 1) {
        /* Every peer shares this host: shared memory unless UDP is forced. */
        const char *transport = getenv("MW_TRANSPORT");
        if (transport && strcmp(transport, "udp") == 0) {
            ASSERT(st.packets_sent > 0 && st.packets_received > 0);
            ASSERT(st.bytes_sent >= (1u << 20));
            ASSERT(st.messages_delivered > 0);
            ASSERT_U64(st.shm_ring_sent + st.shm_direct_ops, 0);
            ASSERT_U64(st.shm_assist_bytes + st.shm_staged_bytes, 0);
        } else {
            ASSERT(st.shm_ring_sent > 0 && st.shm_ring_received > 0);
            ASSERT(st.shm_direct_ops > 0);
        }
    }
    EXPECT(MW_ERR_NULL_POINTER, mw_stats_get(ep, NULL));
}

/* Tagged messages around the ring of ranks (with one rank, to itself). */
static void test_messages(void) {
    enum { SMALL = 100, BIG = (3 << 20) + 5 };
    uint8_t small[SMALL], got[SMALL + 8];
    mw_recv_status st;

    /* Blocking, small: eager, so every rank may send before it receives. */
    fill(small, SMALL, me + 40);
    OK(mw_send(ep, right, 11, small, SMALL));
    memset(got, 0xee, sizeof got);
    OK(mw_recv(ep, left, 11, got, sizeof got, &st));
    check_pattern(got, SMALL, left + 40, "recv");
    ASSERT(got[SMALL] == 0xee);
    ASSERT(st.source == left && st.tag == 11 && st.len == SMALL);

    /* Large (rendezvous; between processes, 2 MiB and more go through the
     * receiver's staging area): the receive is posted first, as a blocking
     * large send waits for its receiver. */
    uint8_t *big = malloc(BIG), *into = malloc(BIG + 3);
    if (!big || !into) FAIL("malloc");
    fill(big, BIG, me + 50);
    memset(into, 0xee, BIG + 3);
    mw_handle *rh = NULL, *sh = NULL;
    OK(mw_irecv(ep, left, 12, into, BIG + 3, &rh));
    OK(mw_send(ep, right, 12, big, BIG));
    OK(mw_wait_recv(&rh, &st));
    ASSERT(rh == NULL);
    ASSERT(st.source == left && st.tag == 12 && st.len == BIG);
    check_pattern(into, BIG, left + 50, "large recv");
    ASSERT(into[BIG] == 0xee && into[BIG + 2] == 0xee);

    /* Nonblocking both ways, completed together by mw_wait_all. */
    mw_handle *hs[2] = {NULL, NULL};
    memset(into, 0, BIG);
    OK(mw_irecv(ep, left, 13, into, BIG, &hs[0]));
    OK(mw_isend(ep, right, 13, big, BIG, &hs[1]));
    OK(mw_wait_all(hs, 2));
    ASSERT(hs[0] == NULL && hs[1] == NULL);
    check_pattern(into, BIG, left + 50, "irecv by wait_all");

    /* Probe, then receive from anyone with any tag. */
    OK(mw_isend(ep, right, 14, small, 40, &sh));
    OK(mw_probe(ep, MW_ANY_SOURCE, 14, &st));
    ASSERT(st.source == left && st.tag == 14 && st.len == 40);
    OK(mw_recv(ep, MW_ANY_SOURCE, MW_ANY_TAG, got, sizeof got, NULL));
    check_pattern(got, 40, left + 40, "recv from any source");
    OK(mw_wait(&sh));
    bool found = true;
    OK(mw_iprobe(ep, MW_ANY_SOURCE, 14, &found, NULL));
    ASSERT(!found);
    OK(mw_send(ep, right, 15, small, 8));
    found = false;
    while (!found) OK_UNCOUNTED(mw_iprobe(ep, left, 15, &found, &st));
    ASSERT(st.len == 8);
    OK(mw_irecv(ep, left, 15, got, sizeof got, &rh));
    OK(mw_wait(&rh)); /* mw_wait completes a receive too, without its envelope */
    check_pattern(got, 8, left + 40, "irecv by mw_wait");

    /* A message longer than the buffer is consumed and reported, the buffer untouched. */
    OK(mw_send(ep, right, 16, small, 16));
    memset(got, 0xee, sizeof got);
    EXPECT(MW_ERR_TRUNCATED, mw_recv(ep, left, 16, got, 8, NULL));
    ASSERT(got[0] == 0xee && got[7] == 0xee);

    /* A receive freed before its message arrived is cancelled: the message
     * goes to the next matching receive. */
    OK(mw_irecv(ep, left, 17, got, sizeof got, &rh));
    OK(mw_handle_free(&rh));
    ASSERT(rh == NULL);
    OK(mw_barrier(ep));
    OK(mw_send(ep, right, 17, small, 24));
    OK(mw_recv(ep, left, 17, got, sizeof got, &st));
    ASSERT(st.len == 24);

    /* Handles of the wrong kind are consumed and refused. */
    OK(mw_isend(ep, right, 18, small, 8, &sh));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_wait_recv(&sh, &st));
    ASSERT(sh == NULL);
    OK(mw_irecv(ep, left, 18, got, sizeof got, &rh));
    uint64_t value;
    mw_region *flags;
    OK(mw_region_alloc(ep, 8, MW_ACCESS_NONE, &flags));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_handle_notify(rh, flags, 0));
    OK(mw_region_free(&flags));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_wait_value(&rh, &value));
    ASSERT(rh == NULL);

    /* Bad arguments. */
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_send(ep, right, MW_ANY_TAG, small, 8));
    EXPECT(MW_ERR_BAD_RANK, mw_send(ep, n, 1, small, 8));
    EXPECT(MW_ERR_BAD_RANK, mw_recv(ep, n, 1, got, 8, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_send(ep, right, 1, NULL, 8));
    EXPECT(MW_ERR_NULL_POINTER, mw_recv(NULL, left, 1, got, 8, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_isend(ep, right, 1, small, 8, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_irecv(ep, left, 1, got, 8, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_probe(ep, left, 1, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_iprobe(ep, left, 1, NULL, NULL));
    rh = NULL;
    EXPECT(MW_ERR_NULL_POINTER, mw_wait_recv(&rh, NULL));
    free(big);
    free(into);
    OK(mw_barrier(ep));
}

/* Collectives over the whole job, checked against what each rank computes. */
static void test_collectives(void) {
    enum { LEN = 24, BIG = 100 * 1024 };
    uint8_t *buf = malloc(BIG), *all = malloc((size_t)n * BIG);
    if (!buf || !all) FAIL("malloc");
    /* Forced before the job's team exists (local): the team forms with it. */
    char algo[32];
    OK(mw_team_algorithm(ep, NULL, MW_COLLECTIVE_BCAST, algo, sizeof algo));
    ASSERT(strcmp(algo, "auto") == 0);
    OK(mw_team_set_algorithm(ep, NULL, MW_COLLECTIVE_BCAST, "binomial"));

    for (uint32_t root = 0; root < n; root += (n > 1 ? n - 1 : 1)) {
        size_t sizes[2] = {LEN, BIG};
        for (int k = 0; k < 2; k++) {
            if (me == root) fill(buf, sizes[k], root + 60);
            else memset(buf, 0, sizes[k]);
            OK(mw_bcast(ep, NULL, root, buf, sizes[k]));
            check_pattern(buf, sizes[k], root + 60, "bcast");
        }
    }
    OK(mw_team_algorithm(ep, NULL, MW_COLLECTIVE_BCAST, algo, sizeof algo));
    ASSERT(strcmp(algo, "binomial") == 0);
    OK(mw_team_set_algorithm(ep, NULL, MW_COLLECTIVE_BCAST, NULL));

    /* allgather, then in place (the send block inside the receive buffer). */
    fill(buf, LEN, me + 70);
    OK(mw_allgather(ep, NULL, buf, LEN, all));
    for (uint32_t r = 0; r < n; r++) check_pattern(all + (size_t)r * LEN, LEN, r + 70, "allgather");
    memset(all, 0, (size_t)n * LEN);
    fill(all + (size_t)me * LEN, LEN, me + 71);
    OK(mw_allgather(ep, NULL, all + (size_t)me * LEN, LEN, all));
    for (uint32_t r = 0; r < n; r++) check_pattern(all + (size_t)r * LEN, LEN, r + 71, "allgather in place");

    /* alltoall in place: block j for rank j is pattern me * 8 + j. */
    for (uint32_t j = 0; j < n; j++) fill(all + (size_t)j * LEN, LEN, me * 8 + j);
    OK(mw_alltoall(ep, NULL, all, all, LEN));
    for (uint32_t r = 0; r < n; r++) check_pattern(all + (size_t)r * LEN, LEN, r * 8 + me, "alltoall");

    /* allgatherv and alltoallv: rank r's allgatherv block is r + 1 bytes,
     * rank r sends rank j r + j + 1 bytes; blocks land in reverse rank order. */
    size_t *counts = malloc(4 * n * sizeof(size_t));
    if (!counts) FAIL("malloc");
    size_t *displs = counts + n, *rcounts = counts + 2 * n, *rdispls = counts + 3 * n;
    size_t end = 0;
    for (uint32_t j = n; j-- > 0;) {
        counts[j] = j + 1;
        displs[j] = end;
        end += counts[j];
    }
    fill(buf, me + 1, me + 100);
    memset(all, 0, end);
    OK(mw_allgatherv(ep, NULL, buf, me + 1, all, counts, displs));
    for (uint32_t r = 0; r < n; r++) check_pattern(all + displs[r], counts[r], r + 100, "allgatherv");
    size_t send_end = 0, recv_end = 0;
    for (uint32_t j = 0; j < n; j++) {
        counts[j] = me + j + 1; /* to rank j */
        displs[j] = send_end;
        fill(buf + send_end, counts[j], me * 8 + j + 3);
        send_end += counts[j];
    }
    for (uint32_t j = n; j-- > 0;) {
        rcounts[j] = j + me + 1; /* from rank j */
        rdispls[j] = recv_end;
        recv_end += rcounts[j];
    }
    for (int forced = 0; forced < 2; forced++) {
        OK(mw_team_set_algorithm(ep, NULL, MW_COLLECTIVE_VECTOR, forced ? "exchange" : NULL));
        OK(mw_team_algorithm(ep, NULL, MW_COLLECTIVE_VECTOR, algo, sizeof algo));
        ASSERT(strcmp(algo, forced ? "exchange" : "auto") == 0);
        memset(all, 0, recv_end);
        OK(mw_alltoallv(ep, NULL, buf, counts, displs, all, rcounts, rdispls));
        for (uint32_t r = 0; r < n; r++) check_pattern(all + rdispls[r], rcounts[r], r * 8 + me + 3, "alltoallv");
    }
    OK(mw_team_set_algorithm(ep, NULL, MW_COLLECTIVE_VECTOR, NULL));
    /* Receive counts one longer than what is sent: refused on every rank. */
    for (uint32_t j = 0; j < n; j++) rcounts[j] += 1;
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_alltoallv(ep, NULL, buf, counts, displs, all, rcounts, rdispls));
    EXPECT(MW_ERR_NULL_POINTER, mw_allgatherv(ep, NULL, buf, me + 1, all, NULL, displs));
    EXPECT(MW_ERR_NULL_POINTER, mw_alltoallv(ep, NULL, buf, counts, displs, NULL, rcounts, rdispls));
    free(counts);

    /* allreduce: sums, a max of doubles, an xor; the last in place. */
    int64_t mine64[3] = {me, -(int64_t)me, 1}, sum64[3];
    OK(mw_allreduce(ep, NULL, MW_DTYPE_I64, MW_OP_SUM, mine64, sum64, 3));
    int64_t ranks_sum = (int64_t)n * (n - 1) / 2;
    ASSERT(sum64[0] == ranks_sum && sum64[1] == -ranks_sum && sum64[2] == (int64_t)n);
    double d = 0.5 + me, dmax;
    OK(mw_allreduce(ep, NULL, MW_DTYPE_F64, MW_OP_MAX, &d, &dmax, 1));
    ASSERT(dmax == 0.5 + (n - 1));
    uint32_t x = 1u << (me % 32), want_x = 0;
    for (uint32_t r = 0; r < n; r++) want_x ^= 1u << (r % 32);
    OK(mw_allreduce(ep, NULL, MW_DTYPE_U32, MW_OP_BXOR, &x, &x, 1));
    ASSERT(x == want_x);

    /* reduce to the last rank (NULL receive buffer elsewhere). */
    int32_t v = 100 - (int32_t)me, vmin = 0;
    OK(mw_reduce(ep, NULL, n - 1, MW_DTYPE_I32, MW_OP_MIN, &v, me == n - 1 ? &vmin : NULL, 1));
    if (me == n - 1) ASSERT(vmin == 100 - (int32_t)(n - 1));

    /* gather to 0 and scatter from 0 (NULL buffers away from the root). */
    fill(buf, LEN, me + 80);
    OK(mw_gather(ep, NULL, 0, buf, LEN, me == 0 ? all : NULL));
    if (me == 0)
        for (uint32_t r = 0; r < n; r++) check_pattern(all + (size_t)r * LEN, LEN, r + 80, "gather");
    if (me == 0)
        for (uint32_t r = 0; r < n; r++) fill(all + (size_t)r * LEN, LEN, r + 90);
    memset(buf, 0, LEN);
    OK(mw_scatter(ep, NULL, 0, me == 0 ? all : NULL, buf, LEN));
    check_pattern(buf, LEN, me + 90, "scatter");

    /* Bad arguments, refused alike on every rank before any traffic. */
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_allreduce(ep, NULL, 99, MW_OP_SUM, &d, &dmax, 1));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_allreduce(ep, NULL, MW_DTYPE_F64, 99, &d, &dmax, 1));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_allreduce(ep, NULL, MW_DTYPE_F64, MW_OP_BAND, &d, &dmax, 1));
    EXPECT(MW_ERR_NULL_POINTER, mw_bcast(ep, NULL, 0, NULL, 8));
    EXPECT(MW_ERR_NULL_POINTER, mw_allgather(ep, NULL, buf, LEN, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_alltoall(NULL, NULL, all, all, LEN));
    free(buf);
    free(all);
    OK(mw_barrier(ep));
}

/* What the handlers saw, checked by the test after they ran (one thread:
 * the handlers run on the thread that makes progress, this one). */
static unsigned handled, oneway_count, bad_payloads;
static mw_status inside_call = MW_OK;

/* Handler 1: replies {args[0] + 1, nargs} and the payload with each byte
 * plus one; also sends a one-way message to handler 2 at its right. */
static void on_request(mw_am_context *ctx, const mw_am_message *msg, void *user) {
    uint32_t source = 0;
    bool wants = false;
    handled++;
    if (user != &handled) bad_payloads++;
    if (mw_am_source(ctx, &source, &wants) != MW_OK || source != msg->source || msg->handler != 1) bad_payloads++;
    uint32_t r;
    inside_call = mw_rank(ep, &r); /* must be refused: the endpoint is locked here */
    uint8_t *back = malloc(msg->len + 1);
    if (!back) return;
    const uint8_t *in = msg->payload;
    for (size_t i = 0; i < msg->len; i++) back[i] = (uint8_t)(in[i] + 1);
    uint64_t args[2] = {msg->nargs ? msg->args[0] + 1 : 0, msg->nargs};
    if (wants && mw_am_reply(ctx, args, 2, back, msg->len) != MW_OK) bad_payloads++;
    if (mw_am_reply(ctx, args, 2, NULL, 0) != (wants ? MW_ERR_INVALID_ARGUMENT : MW_OK)) bad_payloads++;
    free(back);
    uint64_t one = 1;
    if (mw_am_send(ctx, right, 2, &one, 1, NULL, 0) != MW_OK) bad_payloads++;
}

/* Handler 2: counts one-way messages. */
static void on_oneway(mw_am_context *ctx, const mw_am_message *msg, void *user) {
    (void)ctx;
    (void)user;
    if (msg->nargs == 1 && msg->args[0] == 1 && msg->len == 0) oneway_count++;
}

static void test_active_messages(void) {
    enum { BIG = 300 * 1024 };
    OK(mw_register_handler(ep, 1, on_request, &handled));
    OK(mw_register_handler(ep, 2, on_oneway, NULL));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_register_handler(ep, 1, on_request, NULL));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_register_handler(ep, 0xff00, on_request, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_register_handler(ep, 3, NULL, NULL));
    OK(mw_barrier(ep)); /* every rank's handlers are in */

    uint8_t small[64], back[64];
    fill(small, sizeof small, me + 100);
    uint64_t args[3] = {41, 5, 6};
    mw_am_reply_data reply;
    memset(&reply, 0, sizeof reply);
    reply.payload = back;
    reply.capacity = sizeof back;
    OK(mw_am_request(ep, right, 1, args, 3, small, sizeof small, &reply));
    ASSERT(reply.nargs == 2 && reply.args[0] == 42 && reply.args[1] == 3);
    ASSERT(reply.len == sizeof small);
    for (size_t i = 0; i < sizeof small; i++)
        if (back[i] != (uint8_t)(pat(me + 100, i) + 1)) FAIL("am reply byte %zu", i);

    /* A large payload each way (pulled by the target; the reply by us). */
    uint8_t *big = malloc(BIG), *bigback = malloc(BIG);
    if (!big || !bigback) FAIL("malloc");
    fill(big, BIG, me + 110);
    reply.payload = bigback;
    reply.capacity = BIG;
    OK(mw_am_request(ep, right, 1, args, 1, big, BIG, &reply));
    ASSERT(reply.len == BIG && reply.nargs == 2 && reply.args[1] == 1);
    for (size_t i = 0; i < BIG; i++)
        if (bigback[i] != (uint8_t)(pat(me + 110, i) + 1)) FAIL("large am reply byte %zu", i);

    /* A reply longer than the buffer (or with no buffer) is refused, its length told. */
    reply.payload = back;
    reply.capacity = 8;
    EXPECT(MW_ERR_TRUNCATED, mw_am_request(ep, right, 1, args, 1, small, 16, &reply));
    ASSERT(reply.len == 16);
    EXPECT(MW_ERR_TRUNCATED, mw_am_request(ep, right, 1, args, 1, small, 16, NULL));
    OK(mw_am_request(ep, right, 1, NULL, 0, NULL, 0, NULL)); /* empty reply: fine without a buffer */

    EXPECT(MW_ERR_NO_HANDLER, mw_am_request(ep, right, 7, NULL, 0, NULL, 0, NULL));
    EXPECT(MW_ERR_BAD_RANK, mw_am_request(ep, n, 1, NULL, 0, NULL, 0, NULL));
    uint64_t nine[9] = {0};
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_am_request(ep, right, 1, nine, 9, NULL, 0, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_am_reply(NULL, NULL, 0, NULL, 0));
    EXPECT(MW_ERR_NULL_POINTER, mw_am_send(NULL, 0, 2, NULL, 0, NULL, 0));
    EXPECT(MW_ERR_NULL_POINTER, mw_am_source(NULL, NULL, NULL));

    /* Every rank's handler 1 ran 5 times (one per request above that got
     * there) and sent one one-way message each time to its right. */
    OK(mw_barrier(ep));
    while (oneway_count < 5) OK_UNCOUNTED(mw_progress(ep));
    OK(mw_barrier(ep));
    ASSERT(handled == 5);
    ASSERT_U64(oneway_count, 5);
    ASSERT_U64(bad_payloads, 0);
    EXPECT(MW_ERR_IN_USE, inside_call);

    bool removed = false;
    OK(mw_unregister_handler(ep, 1, &removed));
    ASSERT(removed);
    OK(mw_unregister_handler(ep, 1, &removed));
    ASSERT(!removed);
    OK(mw_unregister_handler(ep, 2, NULL));
    OK(mw_barrier(ep));
    EXPECT(MW_ERR_NO_HANDLER, mw_am_request(ep, right, 1, NULL, 0, NULL, 0, NULL));
    free(big);
    free(bigback);
    OK(mw_barrier(ep));
}

static unsigned marks;
static mw_status mark_call = MW_OK;

static void on_watermark(size_t entries, void *user) {
    if (user == &marks && entries >= 3) marks++;
    mark_call = mw_barrier(ep); /* refused: the endpoint is locked here */
}

static void test_fifos(void) {
    enum { SLOT = 64, SLOTS = 4 };
    mw_fifo *fifo = NULL;
    OK(mw_fifo_create(ep, SLOT, SLOTS, &fifo));
    OK(mw_fifo_set_watermark(fifo, on_watermark, &marks));
    uint64_t key, *keys = malloc(sizeof(uint64_t) * n);
    if (!keys) FAIL("malloc");
    OK(mw_fifo_key(fifo, &key));
    OK(mw_allgather(ep, NULL, &key, sizeof key, keys));
    OK(mw_barrier(ep));

    /* Fill the right neighbour's FIFO: 4 entries fit, the 5th is pushed back. */
    uint8_t entry[SLOT + 1], got[SLOT];
    for (int i = 0; i < SLOTS; i++) {
        fill(entry, SLOT, me + 120 + (uint32_t)i);
        OK(mw_fifo_try_push(ep, right, keys[right], entry, (size_t)(SLOT - i)));
    }
    EXPECT(MW_ERR_WOULD_BLOCK, mw_fifo_try_push(ep, right, keys[right], entry, 8));
    OK(mw_barrier(ep));
    size_t len = 0, entries = 0;
    OK(mw_fifo_len(fifo, &entries));
    ASSERT(entries == SLOTS);
    EXPECT(MW_ERR_TRUNCATED, mw_fifo_pop(fifo, got, 8, &len)); /* stays queued */
    for (int i = 0; i < SLOTS; i++) {
        OK(mw_fifo_pop(fifo, got, sizeof got, &len));
        ASSERT(len == (size_t)(SLOT - i));
        check_pattern(got, len, left + 120 + (uint32_t)i, "fifo entry");
    }
    bool found = true;
    OK(mw_fifo_try_pop(fifo, got, sizeof got, &found, &len));
    ASSERT(!found && len == 0);
    OK(mw_barrier(ep));
    ASSERT(marks == 1);
    EXPECT(MW_ERR_IN_USE, mark_call);

    /* A blocking push waits for the owner's pops (rank 0 to rank 1). */
    if (n > 1 && me == 0) {
        for (uint32_t i = 0; i < 3 * SLOTS; i++) {
            fill(entry, SLOT, 130 + i);
            OK_UNCOUNTED(mw_fifo_push(ep, 1, keys[1], entry, SLOT));
        }
    } else if (n > 1 && me == 1) {
        for (uint32_t i = 0; i < 3 * SLOTS; i++) {
            OK_UNCOUNTED(mw_fifo_pop(fifo, got, sizeof got, &len));
            check_pattern(got, SLOT, 130 + i, "fifo entry after backpressure");
        }
    }
    OK(mw_barrier(ep));

    EXPECT(MW_ERR_TRUNCATED, mw_fifo_try_push(ep, right, keys[right], entry, SLOT + 1));
    EXPECT(MW_ERR_BAD_KEY, mw_fifo_try_push(ep, right, keys[right] ^ 1, entry, 8));
    EXPECT(MW_ERR_NULL_POINTER, mw_fifo_create(ep, SLOT, SLOTS, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_fifo_len(NULL, &entries));
    OK(mw_fifo_set_watermark(fifo, NULL, NULL));
    OK(mw_barrier(ep));
    OK(mw_fifo_free(&fifo));
    ASSERT(fifo == NULL);
    OK(mw_fifo_free(&fifo)); /* a second free through the same variable is a no-op */
    OK(mw_barrier(ep));
    EXPECT(MW_ERR_BAD_KEY, mw_fifo_try_push(ep, right, keys[right], entry, 8));
    free(keys);
    OK(mw_barrier(ep));
}

/* Teams: split by parity, a subset by rank list, collectives on them. */
static void test_teams(void) {
    mw_team *parity = NULL, *pair = NULL, *none = NULL;
    /* Odd ranks in reverse order (key), even ranks in rank order. */
    OK(mw_team_split(ep, NULL, me % 2, me % 2 ? n - me : me, &parity));
    ASSERT(parity != NULL);
    uint32_t trank = 99, tsize = 0, world = 99;
    OK(mw_team_rank(parity, &trank, &tsize));
    uint32_t same = (n + 1 - me % 2) / 2; /* ranks of my parity */
    ASSERT(tsize == same);
    uint32_t want_rank = me % 2 ? (same - 1 - me / 2) : me / 2;
    ASSERT(trank == want_rank);
    OK(mw_team_world_rank(parity, trank, &world));
    ASSERT(world == me);
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_team_world_rank(parity, tsize, &world));

    /* Sum of the members' job ranks, and a broadcast from the team's rank 0. */
    uint64_t mine = me, sum = 0, want = 0;
    for (uint32_t r = me % 2; r < n; r += 2) want += r;
    OK(mw_allreduce(ep, parity, MW_DTYPE_U64, MW_OP_SUM, &mine, &sum, 1));
    ASSERT_U64(sum, want);
    uint32_t first = 0;
    OK(mw_team_world_rank(parity, 0, &first));
    uint64_t word = me == first ? 0xfeed0000u + me : 0;
    OK(mw_bcast(ep, parity, 0, &word, sizeof word));
    ASSERT_U64(word, 0xfeed0000u + first);
    OK(mw_team_barrier(ep, parity));
    OK(mw_team_barrier(ep, NULL));

    /* A subset: the last rank and rank 0, in that order; the rest get NULL. */
    uint32_t list[2] = {n - 1, 0};
    OK(mw_team_from_ranks(ep, NULL, list, n > 1 ? 2 : 1, &pair));
    if (me == 0 || me == n - 1) {
        ASSERT(pair != NULL);
        OK(mw_team_rank(pair, &trank, NULL));
        ASSERT(trank == (me == n - 1 ? 0u : 1u));
        uint32_t both[2] = {0, 0}, mine32 = me;
        OK(mw_allgather(ep, pair, &mine32, sizeof mine32, both));
        if (n > 1) ASSERT(both[0] == n - 1 && both[1] == 0);
        OK(mw_team_free(&pair));
    } else {
        ASSERT(pair == NULL);
    }
    /* A split inside a team; MW_TEAM_NONE joins none. */
    OK(mw_team_rank(parity, &trank, NULL));
    OK(mw_team_split(ep, parity, trank == 0 ? 0 : MW_TEAM_NONE, 0, &none));
    if (trank == 0) {
        ASSERT(none != NULL);
        OK(mw_team_rank(none, NULL, &tsize));
        ASSERT(tsize == 1);
        OK(mw_team_free(&none));
    } else {
        ASSERT(none == NULL);
    }

    uint32_t twice[2] = {0, 0}, outside[1] = {n};
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_team_from_ranks(ep, NULL, twice, 2, &pair));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_team_from_ranks(ep, NULL, outside, 1, &pair));
    EXPECT(MW_ERR_NULL_POINTER, mw_team_split(ep, NULL, 0, 0, NULL));
    EXPECT(MW_ERR_NULL_POINTER, mw_team_rank(NULL, &trank, NULL));
    EXPECT(MW_ERR_IN_USE, mw_finalize(&ep)); /* a team is still alive */
    OK(mw_team_free(&parity));
    ASSERT(parity == NULL);
    OK(mw_team_free(&parity));
    OK(mw_barrier(ep));
}

/* Waits (polling, up to 10 s) for a raw datagram into buf; returns its length. */
static size_t wait_raw(uint8_t *buf, size_t capacity, uint32_t *source) {
    bool found = false;
    size_t len = 0;
    for (long i = 0; !found; i++) {
        mw_status s_ = mw_try_recv_raw(ep, buf, capacity, &found, source, &len);
        if (s_ != MW_OK) FAIL("mw_try_recv_raw -> %s (%s)", mw_strerror(s_), mw_last_error());
        if (i > 10 * 1000 * 1000) FAIL("no raw datagram arrived");
    }
    checks++;
    return len;
}

/* Raw datagrams (unreliable, but loopback and shared memory lose none
 * here) and quiesce. */
/* One call of each collective on `team` (tn members, this one tme),
 * checked byte by byte; `salt` varies the data from call to call. */
static void run_checked(mw_team *team, uint32_t tme, uint32_t tn, uint32_t salt) {
    enum { LEN = 40, COUNT = 37 };
    uint8_t *buf = malloc(LEN), *all = malloc((size_t)tn * LEN), *send = malloc((size_t)tn * LEN);
    if (!buf || !all || !send) FAIL("malloc");
    OK(mw_team_barrier(ep, team));
    uint32_t root = tn - 1;
    if (tme == root) fill(buf, LEN, salt);
    else memset(buf, 0, LEN);
    OK(mw_bcast(ep, team, root, buf, LEN));
    check_pattern(buf, LEN, salt, "forced bcast");
    fill(buf, LEN, salt + 1 + tme);
    OK(mw_allgather(ep, team, buf, LEN, all));
    for (uint32_t r = 0; r < tn; r++) check_pattern(all + (size_t)r * LEN, LEN, salt + 1 + r, "forced allgather");
    for (uint32_t j = 0; j < tn; j++) fill(send + (size_t)j * LEN, LEN, salt + 100 + tme * 16 + j);
    OK(mw_alltoall(ep, team, send, all, LEN));
    for (uint32_t r = 0; r < tn; r++)
        check_pattern(all + (size_t)r * LEN, LEN, salt + 100 + r * 16 + tme, "forced alltoall");
    int64_t v[COUNT], sum[COUNT];
    for (int k = 0; k < COUNT; k++) v[k] = (int64_t)(tme + 1) * k - salt;
    OK(mw_allreduce(ep, team, MW_DTYPE_I64, MW_OP_SUM, v, sum, COUNT));
    for (int k = 0; k < COUNT; k++)
        if (sum[k] != (int64_t)k * tn * (tn + 1) / 2 - (int64_t)tn * salt) FAIL("forced allreduce: element %d", k);
    checks++;
    uint32_t w[COUNT], wmax[COUNT];
    for (int k = 0; k < COUNT; k++) w[k] = tme * 3 + salt + (uint32_t)k;
    OK(mw_reduce(ep, team, 0, MW_DTYPE_U32, MW_OP_MAX, w, tme == 0 ? wmax : NULL, COUNT));
    if (tme == 0)
        for (int k = 0; k < COUNT; k++)
            if (wmax[k] != (tn - 1) * 3 + salt + (uint32_t)k) FAIL("forced reduce: element %d", k);
    checks++;
    free(buf);
    free(all);
    free(send);
}

/* Every algorithm of every collective, forced on the job's team and on a
 * team of each parity, then back to the library's choice. */
static void test_forced_algorithms(void) {
    static const char *const names[][6] = {
        {"a", "b", "c", "d", "e", "binomial"},
        {"binomial", "scatter_allgather", "direct", NULL},
        {"ring", "recursive_doubling", "bruck", "direct", NULL},
        {"pairwise", "bruck", "direct", "allgather", NULL},
        {"recursive_doubling", "reduce_scatter_allgather", "ring", NULL},
        {"binomial", "reduce_scatter_gather", NULL},
    };
    static const mw_collective which[] = {MW_COLLECTIVE_BARRIER,   MW_COLLECTIVE_BCAST,
                                          MW_COLLECTIVE_ALLGATHER, MW_COLLECTIVE_ALLTOALL,
                                          MW_COLLECTIVE_ALLREDUCE, MW_COLLECTIVE_REDUCE};
    mw_team *parity = NULL;
    OK(mw_team_split(ep, NULL, me % 2, me, &parity));
    uint32_t prank = 0, psize = 0;
    OK(mw_team_rank(parity, &prank, &psize));
    for (int round = 0; round < 6; round++) {
        for (int c = 0; c < 6; c++) {
            int count = 0;
            while (count < 6 && names[c][count]) count++;
            const char *name = names[c][round % count];
            OK(mw_team_set_algorithm(ep, NULL, which[c], name));
            OK(mw_team_set_algorithm(ep, parity, which[c], name));
            char got[32];
            OK(mw_team_algorithm(ep, parity, which[c], got, sizeof got));
            if (strcmp(got, name) != 0) FAIL("forced %s, reads %s", name, got);
            checks++;
        }
        run_checked(NULL, me, n, 7 * (uint32_t)round);
        run_checked(parity, prank, psize, 7 * (uint32_t)round + 3);
    }
    char got[32];
    for (int c = 0; c < 6; c++) {
        OK(mw_team_set_algorithm(ep, NULL, which[c], "auto"));
        OK(mw_team_set_algorithm(ep, parity, which[c], NULL));
        OK(mw_team_algorithm(ep, NULL, which[c], got, sizeof got));
        ASSERT(strcmp(got, "auto") == 0);
    }
    OK(mw_team_set_algorithm(ep, parity, MW_COLLECTIVE_MULTICAST, "tree"));
    OK(mw_team_algorithm(ep, parity, MW_COLLECTIVE_MULTICAST, got, sizeof got));
    ASSERT(strcmp(got, "tree") == 0);
    OK(mw_team_set_algorithm(ep, parity, MW_COLLECTIVE_MULTICAST, "auto"));
    run_checked(NULL, me, n, 99);

    /* Refused: a name of another collective, an unknown collective, a
     * buffer too small for the name, no buffer; nothing changes. */
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_team_set_algorithm(ep, NULL, MW_COLLECTIVE_BARRIER, "ring"));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_team_set_algorithm(ep, parity, 99, "auto"));
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_team_algorithm(ep, NULL, 0, got, sizeof got));
    EXPECT(MW_ERR_TRUNCATED, mw_team_algorithm(ep, NULL, MW_COLLECTIVE_ALLTOALL, got, 4));
    OK(mw_team_algorithm(ep, NULL, MW_COLLECTIVE_ALLTOALL, got, 5));
    ASSERT(strcmp(got, "auto") == 0);
    EXPECT(MW_ERR_NULL_POINTER, mw_team_algorithm(ep, NULL, MW_COLLECTIVE_ALLTOALL, NULL, 8));
    OK(mw_team_barrier(ep, parity));
    OK(mw_team_free(&parity));
}

static void test_raw_and_quiesce(void) {
    size_t max = 0;
    OK(mw_raw_max_len(ep, &max));
    ASSERT(max >= 1024);
    uint8_t out[64], in[64];
    fill(out, sizeof out, me + 140);
    OK(mw_send_raw(ep, right, out, 32));
    uint32_t source = 99;
    /* Too small a buffer: refused, the datagram stays queued. */
    bool found = false;
    mw_status small = MW_OK;
    for (long i = 0; !found && small == MW_OK; i++) {
        small = mw_try_recv_raw(ep, in, 8, &found, NULL, NULL);
        if (i > 10 * 1000 * 1000) FAIL("no raw datagram arrived");
    }
    EXPECT(MW_ERR_TRUNCATED, small);
    size_t len = wait_raw(in, sizeof in, &source);
    ASSERT(len == 32 && source == left);
    check_pattern(in, 32, left + 140, "raw datagram");
    OK(mw_try_recv_raw(ep, in, sizeof in, &found, NULL, NULL));
    ASSERT(!found);
    uint8_t *big = calloc(1, max + 1);
    if (!big) FAIL("calloc");
    EXPECT(MW_ERR_INVALID_ARGUMENT, mw_send_raw(ep, right, big, max + 1));
    free(big);
    EXPECT(MW_ERR_BAD_RANK, mw_send_raw(ep, n, out, 8));
    EXPECT(MW_ERR_NULL_POINTER, mw_try_recv_raw(ep, in, sizeof in, NULL, NULL, NULL));

    /* Quiesce with puts in flight: afterwards they are all in place. */
    mw_handle *h;
    OK(mw_put_nb(ep, right, skey, OFF_FLUSH, out, sizeof out, &h));
    OK(mw_handle_free(&h));
    OK(mw_quiesce(ep));
    uint8_t area[64];
    read_local(S, OFF_FLUSH, area, sizeof area);
    check_pattern(area, sizeof area, left + 140, "put before quiesce");
    EXPECT(MW_ERR_NULL_POINTER, mw_quiesce(NULL));
    OK(mw_barrier(ep));
}

/* Multicast: one member's bytes land at the same offset of every member's
 * region, on the whole job and on a team. */
static void test_multicast(void) {
    enum { LEN = 70000 };
    mw_region *dest;
    OK(mw_region_alloc(ep, LEN + 64, MW_ACCESS_READ_WRITE, &dest));
    mw_mcast_group *group = NULL;
    OK(mw_mcast_group_create(ep, NULL, dest, &group));
    size_t usable = 0;
    OK(mw_mcast_group_len(group, &usable));
    ASSERT(usable == LEN + 64);
    bool ip = true;
    OK(mw_team_uses_ip_multicast(ep, NULL, &ip)); /* either way is right; it must answer */
    uint8_t *data = malloc(LEN), *got = malloc(LEN);
    if (!data || !got) FAIL("malloc");
    uint32_t root = n - 1;
    if (me == root) {
        fill(data, LEN, 150);
        OK(mw_region_write(dest, 7, data, LEN));
    }
    OK(mw_multicast(ep, NULL, group, root, 7, LEN));
    OK(mw_region_read(dest, 7, got, LEN));
    check_pattern(got, LEN, 150, "multicast");
    EXPECT(MW_ERR_IN_USE, mw_region_free(&dest)); /* the group uses it */
    ASSERT(dest != NULL);

    /* On a team: each parity's first member multicasts 1000 bytes to its team. */
    mw_team *parity;
    mw_mcast_group *tgroup;
    OK(mw_team_split(ep, NULL, me % 2, me, &parity));
    OK(mw_mcast_group_create(ep, parity, dest, &tgroup));
    uint32_t trank;
    OK(mw_team_rank(parity, &trank, NULL));
    if (trank == 0) {
        fill(data, 1000, 160 + me % 2);
        OK(mw_region_write(dest, 0, data, 1000));
    }
    OK(mw_multicast(ep, parity, tgroup, 0, 0, 1000));
    OK(mw_region_read(dest, 0, got, 1000));
    check_pattern(got, 1000, 160 + me % 2, "team multicast");
    EXPECT(MW_ERR_NULL_POINTER, mw_multicast(ep, parity, NULL, 0, 0, 8));
    OK(mw_mcast_group_free(&tgroup));
    ASSERT(tgroup == NULL);
    OK(mw_team_free(&parity));

    OK(mw_mcast_group_free(&group));
    OK(mw_mcast_group_free(&group)); /* no-op */
    OK(mw_region_free(&dest));
    ASSERT(dest == NULL);
    free(data);
    free(got);
    OK(mw_barrier(ep));
}

/* mw_region_peer_ptr: a rank's own region always; a same-host peer's
 * mapped region over shared memory; nothing over UDP (MW_TRANSPORT=udp,
 * as `make ctest` runs it; mwrun puts every rank on this host otherwise). */
static void test_region_peer_ptr(void) {
    mw_region *P;
    OK(mw_region_alloc_symmetric(ep, 64, MW_ACCESS_ALL, &P));
    mw_key key;
    OK(mw_region_key(P, &key));
    void *own = NULL, *base = NULL;
    OK(mw_region_ptr(P, &base));
    OK(mw_region_peer_ptr(ep, me, key, &own));
    ASSERT(own == base);
    const char *transport = getenv("MW_TRANSPORT");
    int udp = transport != NULL && strcmp(transport, "udp") == 0;
    void *far = (void *)1;
    OK(mw_region_peer_ptr(ep, right, key, &far));
    if (right == me || !udp) {
        ASSERT(far != NULL);
        /* Each rank stores into its right neighbour's copy at its own slot. */
        __atomic_store_n((uint64_t *)far + (me % 8), 0xabc00ull + me, __ATOMIC_RELEASE);
    } else {
        ASSERT(far == NULL);
        OK(mw_put_value(ep, right, key, 8 * (me % 8), 0xabc00ull + me));
    }
    OK(mw_barrier(ep));
    uint64_t got = 0;
    OK(mw_region_load_u64(P, 8 * (left % 8), &got));
    ASSERT_U64(got, 0xabc00ull + left);
    EXPECT(MW_ERR_BAD_RANK, mw_region_peer_ptr(ep, n, key, &far));
    EXPECT(MW_ERR_NULL_POINTER, mw_region_peer_ptr(ep, me, key, NULL));
    OK(mw_region_peer_ptr(ep, me, key + 1, &far));
    ASSERT(far == NULL);
    OK(mw_barrier(ep));
    OK(mw_region_free(&P));
}

int main(void) {
    test_status_and_null_arguments();
    test_endpoint();
    test_regions_local();
    test_region_peer_ptr();
    test_put_get();
    test_registered_and_big();
    test_atomics();
    test_signal();
    test_strided_iov_masked();
    test_registers();
    test_arrival_log();
    test_handles();
    test_flush_and_stats();
    test_messages();
    test_collectives();
    test_teams();
    test_forced_algorithms();
    test_active_messages();
    test_fifos();
    test_raw_and_quiesce();
    test_multicast();

    mw_region *s_copy = S;
    (void)s_copy;
    OK(mw_region_free(&S));
    ASSERT(S == NULL);
    OK(mw_finalize(&ep));
    ASSERT(ep == NULL);
    EXPECT(MW_ERR_NULL_POINTER, mw_finalize(&ep));
    printf("capi_test: rank %u of %u: %u checks passed\n", me, n, checks);
    return 0;
}
