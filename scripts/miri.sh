#!/usr/bin/env bash
# `make miri`: runs the tests of memwire's unsafe islands that stay in
# memory under Miri, which checks them for undefined behaviour (use after
# free, out-of-bounds access, data races, invalid atomics). Miri executes
# no real system calls, so tests that use sockets, memory files of other
# processes or process_vm_* copies are not in the list; `Segment::create`
# maps anonymous memory under Miri so the rings and stages run. The list
# is data: one "package filter [--skip name]" per line; the filter is a
# test path prefix, and a --skip names a test Miri would take too long on.
set -euo pipefail
cd "$(dirname "$0")/.."

SUITES=(
    # mw-core: region views and their copies, the endpoint lock.
    "mw-core region::"
    "mw-core lock::"
    # mw-transport: shared-memory rings, stages and the full fence.
    # (The skipped five repeat their checks thousands of times over, minutes each in Miri;
    # the ones kept cover the same code paths: wraps, jumps, parts, acks, two threads.)
    "mw-transport shm::ring:: --skip jumps_never_skip_or_reorder_records_whatever_the_interleaving --skip payloads_that_look_like_headers_are_never_taken_for_records --skip messages_arrive_in_order_across_wraps --skip request_reply_traffic_reuses_the_lap_start --skip a_reply_sent_while_executing_a_small_request_acks_it"
    # (Its two-thread test moves a 6.5 MB message byte by byte: hours in Miri.)
    "mw-transport shm::stage:: --skip chunks_pass_in_order_through_the_buffers_between_two_threads"
    "mw-transport shm::fence::"
)

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "miri: not installed; run: rustup +nightly component add miri rust-src" >&2
    exit 1
fi

# The ring tests bound their waits with the clock, which Miri's isolation hides.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}"

for suite in "${SUITES[@]}"; do
    read -r package args <<<"$suite"
    echo "== miri: $package $args"
    # shellcheck disable=SC2086 # the filter and skips are separate arguments
    cargo +nightly miri test -p "$package" --lib -- $args
done
echo "miri: all suites passed"
