/* The checking macros of memwire's C tests. The including file defines,
 * before including this, `static uint32_t me;` (the rank, printed with a
 * failure) and `static unsigned checks;` (counted by every check but
 * OK_UNCOUNTED). A failed check prints where and why and exits 1. */
#ifndef MW_TEST_CHECK_H
#define MW_TEST_CHECK_H

#include <memwire.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                                    \
    do {                                                             \
        fprintf(stderr, "rank %u: %s:%d: ", me, __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                \
        fprintf(stderr, "\n");                                       \
        exit(1);                                                     \
    } while (0)

#define OK(call)                                                                        \
    do {                                                                                \
        mw_status s_ = (call);                                                          \
        if (s_ != MW_OK)                                                                \
            FAIL("%s -> %d %s (%s)", #call, (int)s_, mw_strerror(s_), mw_last_error()); \
        checks++;                                                                       \
    } while (0)

/* Like OK, but not counted (for calls repeated a varying number of times). */
#define OK_UNCOUNTED(call)                                                              \
    do {                                                                                \
        mw_status s_ = (call);                                                          \
        if (s_ != MW_OK)                                                                \
            FAIL("%s -> %d %s (%s)", #call, (int)s_, mw_strerror(s_), mw_last_error()); \
    } while (0)

#define EXPECT(want, call)                                                                              \
    do {                                                                                                \
        mw_status s_ = (call);                                                                          \
        if (s_ != (want))                                                                               \
            FAIL("%s -> %d %s, want %s (%s)", #call, (int)s_, mw_strerror(s_), #want, mw_last_error()); \
        checks++;                                                                                       \
    } while (0)

#define ASSERT(cond)                           \
    do {                                       \
        if (!(cond)) FAIL("assert %s", #cond); \
        checks++;                              \
    } while (0)

#define ASSERT_U64(got, want)                                                               \
    do {                                                                                    \
        unsigned long long g_ = (unsigned long long)(got), w_ = (unsigned long long)(want); \
        if (g_ != w_) FAIL("%s == %llu, want %llu", #got, g_, w_);                          \
        checks++;                                                                           \
    } while (0)

/* The last error's text mentions `what`. */
#define LAST_ERROR_MENTIONS(what)                                                                 \
    do {                                                                                          \
        if (!strstr(mw_last_error(), (what))) FAIL("last error \"%s\" lacks %s", mw_last_error(), (what)); \
        checks++;                                                                                 \
    } while (0)

#endif
