/* Peer events from C: the last rank leaves the job without a word (as if
 * its machine were lost); the others, configured with MW_PEER_DEAD_MS = 500
 * through mw_config, must get MW_ERR_PEER_UNREACHABLE from their operations
 * toward it sooner than the default 2000 ms deadline allows (over UDP,
 * where silence is the only sign, after the configured 500 ms; over shared
 * memory the departed process is noticed sooner), one MW_PEER_DOWN event
 * for it from mw_poll_peer_event, and mw_is_peer_down true for it only. Run by `make ctest` under `mwrun -n 3`, over shared
 * memory and UDP. Exits 0 only if every check passed. */
#include <memwire.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint32_t me, n;
static unsigned checks;

#include "check.h"

static double now_s(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The configured deadline, and a bound on detection that the default
 * deadline (2000 ms) could not meet. */
enum { DEAD_MS = 500 };
static const double DETECTED_WITHIN_S = 1.9;

int main(void) {
    mw_config *cfg;
    mw_endpoint *ep;
    OK(mw_config_from_env(&cfg));
    OK(mw_config_set_peer_dead_ms(cfg, DEAD_MS));
    OK(mw_init_with(cfg, &ep));
    OK(mw_config_free(&cfg));
    OK(mw_rank(ep, &me));
    OK(mw_size(ep, &n));
    if (n < 2) FAIL("needs at least 2 ranks (run under mwrun -n 3)");
    const uint32_t victim = n - 1;

    mw_region *region;
    mw_key key;
    OK(mw_region_alloc_symmetric(ep, 64, MW_ACCESS_ALL, &region));
    OK(mw_region_key(region, &key));
    OK(mw_barrier(ep));
    if (me == victim) _Exit(0); /* gone: no finalize, no goodbye */

    double start = now_s();
    mw_status error;
    for (;;) {
        error = mw_put_value(ep, victim, key, 0, 1);
        if (error != MW_OK) break;
        if (now_s() - start > 30) FAIL("no error 30 s after rank %u left", victim);
        OK_UNCOUNTED(mw_progress(ep));
    }
    double elapsed = now_s() - start;
    if (error != MW_ERR_PEER_UNREACHABLE)
        FAIL("put to the departed rank: %s (%s), want MW_ERR_PEER_UNREACHABLE", mw_strerror(error), mw_last_error());
    checks++;
    printf("peer_event_test: rank %u: rank %u reported down after %.0f ms (MW_PEER_DEAD_MS=%d)\n", me, victim,
           elapsed * 1e3, DEAD_MS);
    if (elapsed > DETECTED_WITHIN_S) FAIL("detection took %.3f s: the configured deadline did not apply", elapsed);
    checks++;
    const char *transport = getenv("MW_TRANSPORT");
    if (transport && strcmp(transport, "udp") == 0 && elapsed < 0.9 * DEAD_MS / 1e3)
        FAIL("over UDP a peer was declared down after %.3f s of silence, before MW_PEER_DEAD_MS", elapsed);
    checks++;

    bool found = false, down = false;
    mw_peer_event event = {0, 0};
    OK(mw_poll_peer_event(ep, &found, &event));
    ASSERT(found && event.kind == MW_PEER_DOWN && event.rank == victim);
    OK(mw_poll_peer_event(ep, &found, &event));
    ASSERT(!found); /* reported once */
    OK(mw_is_peer_down(ep, victim, &down));
    ASSERT(down);
    for (uint32_t r = 0; r < victim; r++) {
        OK(mw_is_peer_down(ep, r, &down));
        ASSERT(!down);
    }
    /* Every later operation toward it fails at once. */
    uint64_t value;
    EXPECT(MW_ERR_PEER_UNREACHABLE, mw_get_value(ep, victim, key, 0, &value));
    EXPECT(MW_ERR_PEER_UNREACHABLE, mw_am_post(ep, victim, 1, NULL, 0, NULL, 0));
    /* The survivors still work with each other. */
    uint32_t other = (me + 1) % victim;
    OK(mw_put_value(ep, other, key, 8 + 8 * me, 77));
    OK(mw_get_value(ep, other, key, 8 + 8 * me, &value));
    ASSERT(value == 77);
    /* Each raises a flag at the other and waits for the other's, so that
     * neither leaves while the other still has operations toward it. */
    OK(mw_put_value(ep, other, key, 32 + 8 * me, 1));
    OK(mw_wait_until(ep, region, 32 + 8 * other, MW_CMP_EQ, 1, NULL));

    OK(mw_region_free(&region));
    /* Finalize's collective part cannot include the departed rank: it is
     * reported, and the endpoint is freed all the same. */
    mw_status last = mw_finalize(&ep);
    if (last != MW_OK && last != MW_ERR_PEER_UNREACHABLE) FAIL("mw_finalize: %s (%s)", mw_strerror(last), mw_last_error());
    ASSERT(ep == NULL);
    printf("peer_event_test: rank %u of %u: %u checks passed\n", me, n, checks);
    return 0;
}
