#!/usr/bin/env bash
# `make demo`: the main job. Until the full library lands this runs the
# protocol simulation showcase: goodput of the reliable protocol under loss.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --release -q -p mw-sim --bin mw-sim-demo
