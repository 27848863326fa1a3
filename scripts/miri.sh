#!/usr/bin/env bash
# `make miri`: runs the tests of memwire's unsafe islands that stay in
# memory under Miri, which checks them for undefined behaviour (use after
# free, out-of-bounds access, data races, invalid atomics). Miri executes
# no real system calls, so tests that use sockets, memory files of other
# processes or process_vm_* copies are not in the list; `Segment::create`
# maps anonymous memory under Miri so the rings and stages run. The list
# is data: one "package filter" per line, each an exact test path prefix.
set -euo pipefail
cd "$(dirname "$0")/.."

SUITES=(
    # mw-core: region views and their copies, the endpoint lock.
    "mw-core region::"
    "mw-core lock::"
    # mw-transport: shared-memory rings, stages and the full fence.
    "mw-transport shm::ring::"
    "mw-transport shm::stage::"
    "mw-transport shm::fence::"
)

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "miri: not installed; run: rustup +nightly component add miri rust-src" >&2
    exit 1
fi

for suite in "${SUITES[@]}"; do
    read -r package filter <<<"$suite"
    echo "== miri: $package $filter"
    cargo +nightly miri test -p "$package" --lib -- "$filter"
done
echo "miri: all suites passed"
