#!/usr/bin/env bash
# `make bench`: the standard benchmark set (under 15 minutes on the 2-core VM).
#
# 1. Installs the baselines it needs when run as root on Debian (MPICH, Open
#    MPI and their compilers, a TrueType font for the plots); otherwise it
#    says what is missing and goes on (missing MPIs are noted in the results).
# 2. Runs mwbench once per group, each run's points in bench/results/NAME.jsonl
#    (its table and notes in NAME.log), with the machine line before and after.
# 3. `mwbench report` writes bench/plots/*.png and the README's performance
#    section from them.
#
# BENCH_ONLY="pt2pt coll" runs only the named groups (the report then uses
# whatever results are in bench/results).
set -uo pipefail
cd "$(dirname "$0")/.."

packages=(gcc mpich libmpich-dev openmpi-bin libopenmpi-dev fonts-dejavu-core)
missing=()
for pkg in "${packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "bench: installing ${missing[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
            { echo "bench: apt-get install failed" >&2; exit 1; }
    else
        echo "bench: missing ${missing[*]} and not root on Debian: those baselines (or the plots' font) will be missing" >&2
    fi
fi

set -e
cargo build --release -q -p mwbench -p mwrun
set +e

MWBENCH=target/release/mwbench
MWRUN=target/release/mwrun
OUT=bench/results
mkdir -p "$OUT" bench/plots

# name | command (mwbench's arguments; MWRUN= prefixes a run under mwrun)
runs=(
    "pt2pt|$MWBENCH --bench pingpong,bandwidth,bibw,rate,overhead --step-timeout 30"
    "auth|$MWBENCH --bench pingpong --transport udp --sizes 8 --op put_signal_auth"
    "procs-udp|$MWRUN -n 2 -q --timeout 600 $MWBENCH --bench pingpong,bandwidth --transport udp --sizes 8,1M"
    "procs-shm|$MWRUN -n 2 -q --timeout 600 $MWBENCH --bench pingpong,bandwidth --transport shm --sizes 8,1M,16M"
    "nton|$MWBENCH --bench nton --ranks 4"
    "coll|$MWBENCH --bench barrier,bcast,allgather,alltoall,allreduce --ranks 2,4 --method auto --iters 300 --step-timeout 120"
    "coll-procs2|$MWRUN -n 2 -q --timeout 600 $MWBENCH --bench barrier,bcast,allgather,alltoall,allreduce --transport shm --ranks 2 --method auto --iters 300 --step-timeout 120"
    "coll-procs4|$MWRUN -n 4 -q --timeout 600 $MWBENCH --bench barrier,bcast,allgather,alltoall,allreduce --transport shm --ranks 4 --method auto --iters 300 --step-timeout 120"
    "coll-barrier|$MWBENCH --bench barrier --ranks 4 --method a,b,c,d,e --iters 300 --no-mpi"
    "loss|$MWBENCH --bench loss,overlap"
)

selected() {
    [ -z "${BENCH_ONLY:-}" ] && return 0
    for only in $BENCH_ONLY; do [ "$only" = "$1" ] && return 0; done
    return 1
}

if [ -z "${BENCH_ONLY:-}" ]; then
    rm -f "$OUT"/*.jsonl "$OUT"/*.log bench/plots/*.png
    : >"$OUT/commands.txt"
fi
$MWBENCH machine >"$OUT/machine-start.json"
failed=()
start=$SECONDS
for run in "${runs[@]}"; do
    name=${run%%|*}
    cmd=${run#*|}
    selected "$name" || continue
    echo "bench: $name: $cmd > $OUT/$name.jsonl"
    grep -v "> $OUT/$name.jsonl\$" "$OUT/commands.txt" >"$OUT/commands.tmp" 2>/dev/null
    echo "$cmd > $OUT/$name.jsonl" >>"$OUT/commands.tmp"
    mv "$OUT/commands.tmp" "$OUT/commands.txt"
    t0=$SECONDS
    $cmd >"$OUT/$name.jsonl" 2>"$OUT/$name.log"
    status=$?
    echo "bench: $name: $(wc -l <"$OUT/$name.jsonl") points in $((SECONDS - t0)) s (exit $status)"
    grep "^mwbench: " "$OUT/$name.log" | sed 's/^/    /'
    [ $status -eq 0 ] || failed+=("$name (exit $status, see $OUT/$name.log)")
done
$MWBENCH machine >"$OUT/machine-end.json"
echo "bench: all runs in $((SECONDS - start)) s"

$MWBENCH report --results "$OUT" --readme README.md --plots bench/plots || failed+=("report")
if [ ${#failed[@]} -gt 0 ]; then
    printf 'bench: failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "bench: results in $OUT, plots in bench/plots, README performance section regenerated"
