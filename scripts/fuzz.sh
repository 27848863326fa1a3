#!/usr/bin/env bash
# Runs cargo-fuzz targets for a while each: scripts/fuzz.sh SECONDS TARGET...
# (targets: decode, endpoint; see fuzz/). Needs the nightly toolchain and
# cargo-fuzz (scripts/install-deps.sh installs both). Each target starts from
# its checked-in seeds (fuzz/seeds/TARGET) plus whatever earlier runs found
# (fuzz/corpus/TARGET, not checked in). A crash stops the run with a non-zero
# status; the input that caused it is in fuzz/artifacts/TARGET/ and replays
# with `cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/<file>`.
set -euo pipefail

seconds=${1:?usage: scripts/fuzz.sh SECONDS TARGET...}
shift
[ $# -gt 0 ] || set -- decode endpoint
cd "$(dirname "$0")/../fuzz"
for target in "$@"; do
    mkdir -p "corpus/$target"
    echo "fuzz: $target for ${seconds}s"
    log="corpus/$target.log"
    # -timeout: an input that takes 10 s is a hang worth reporting.
    status=0
    cargo +nightly fuzz run "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$seconds" -timeout=10 >"$log" 2>&1 || status=$?
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$log" >&2
        echo "fuzz: $target FAILED (status $status); the crashing input is in fuzz/artifacts/$target/, full log $PWD/$log" >&2
        exit "$status"
    fi
    grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | sed "s/^/fuzz: $target /" || true
done
echo "fuzz: all targets ran clean"
