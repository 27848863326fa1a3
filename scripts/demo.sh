#!/usr/bin/env bash
# `make demo`: the main job. Four ranks do put/get/atomics under mwrun, then
# the quick benchmark compares memwire with raw UDP measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p memwire --examples
echo "== 4 ranks under mwrun: put, get, fetch_add =="
target/release/mwrun -n 4 target/release/examples/hello_rma
echo
echo "== mwbench --quick (JSON on stdout, table with ratios vs raw UDP below) =="
target/release/mwbench --quick
