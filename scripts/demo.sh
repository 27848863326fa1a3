#!/usr/bin/env bash
# `make demo`: the main job. Four ranks do put/get/atomics under mwrun; the
# parallel ray tracer (MBCF's application) renders into rank 0's frame buffer
# over memwire and, for comparison, over plain UDP with its own reliability,
# on 2, 3 and 4 ranks; then the quick benchmark compares memwire with raw UDP
# and TCP, the shared-memory floor, memcpy and MPI, measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --workspace --examples
echo "== 4 ranks under mwrun: put, get, fetch_add =="
target/release/mwrun -n 4 target/release/examples/hello_rma
echo
echo "== parallel ray tracing, 576x450, pixels put N at a time into rank 0's frame buffer =="
for n in 2 3 4; do
    target/release/mwrun -n "$n" --no-prefix target/release/examples/raytrace \
        --size 576x450 --granularity 1,4,16,64 --transport both --verify --out target/raytrace.png
done
echo
echo "== mwbench --quick (JSON on stdout; table with ratios to the same-run baselines below) =="
target/release/mwbench --quick
