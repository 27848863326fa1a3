#!/usr/bin/env bash
# `make bench`: the standard benchmark set (under 15 minutes on the 2-core VM).
#
# 1. Installs the baselines it needs when run as root on Debian (MPICH, Open
#    MPI and their compilers, a TrueType font for the plots); otherwise it
#    says what is missing and goes on (missing MPIs are noted in the results).
# 2. Runs mwbench once per group, each run's points in bench/results/NAME.jsonl
#    (its table and notes in NAME.log), with the machine line before and after.
# 3. `mwbench report` writes bench/plots/*.png and docs/performance.md's generated
#    section from them.
#
# BENCH_ONLY="pt2pt coll" runs only the named groups (the report then uses
# whatever results are in bench/results).
set -uo pipefail
cd "$(dirname "$0")/.."

. scripts/bench-common.sh
bench_need_packages bench gcc mpich libmpich-dev openmpi-bin libopenmpi-dev fonts-dejavu-core

set -e
cargo build --release -q -p mwbench -p mwrun
set +e

MWBENCH=target/release/mwbench
MWRUN=target/release/mwrun
OUT=bench/results
mkdir -p "$OUT" bench/plots

# `alternate N A... @@ B...`: runs command A, then B, N times over, their
# output one stream. For the groups whose ranks are processes: memwire's job
# places its ranks once for all its points, and which CPUs and caches they
# land on moves its collectives' times by up to 1.5x from job to job (4
# ranks on 2 CPUs: 3.6-5.4 us for a barrier); each MPI point is a job of
# its own, with the same spread. One job each would compare two draws;
# `mwbench report` takes the median of the N jobs of every point instead
# (`merge_repeated_jobs`), for memwire and each MPI alike.
alternate() {
    local jobs=$1 status=0 first=() second=() in_second=0 arg j
    shift
    for arg in "$@"; do
        if [ "$arg" = "@@" ]; then
            in_second=1
        elif [ $in_second -eq 0 ]; then
            first+=("$arg")
        else
            second+=("$arg")
        fi
    done
    for ((j = 1; j <= jobs; j++)); do
        "${first[@]}" || status=$?
        "${second[@]}" || status=$?
    done
    return $status
}

# `repeat N CMD...` (scripts/bench-common.sh) runs CMD N times, for a group
# whose every run already measures memwire next to its baselines (raw UDP,
# memcpy, the shared-memory floors, MPI): the host's speed drifts over
# minutes (every library's 2-rank 64 KiB collectives 2-3x slower in some
# stretches; raw UDP's ping-pong 3.9 or 4.1 us), and one run would put each
# point in whichever stretch it fell. The report takes each point's median.
# memwire's collective points take 2000 calls (a 2-rank 8-byte point of 300
# lasted ~50 us, so one scheduling hiccup could move its median); the MPI
# runs keep 300, which oversubscribed MPICH (~8 ms a call) needs minutes for.
COLL_PROCS="--bench barrier,bcast,allgather,alltoall,allreduce --transport shm --method auto --step-timeout 120"

# name | command (mwbench's arguments; MWRUN= prefixes a run under mwrun)
runs=(
    "pt2pt|repeat 3 $MWBENCH --bench pingpong,bandwidth,bibw,rate,overhead --step-timeout 30"
    "auth|$MWBENCH --bench pingpong --transport udp --sizes 8 --op put_signal_auth"
    "procs-udp|repeat 3 $MWRUN -n 2 -q --timeout 600 $MWBENCH --bench pingpong,bandwidth --transport udp --sizes 8,1M"
    "procs-shm|repeat 3 $MWRUN -n 2 -q --timeout 600 $MWBENCH --bench pingpong,bandwidth --transport shm --sizes 8,1M,16M"
    "nton|$MWBENCH --bench nton --ranks 4"
    "coll|repeat 3 $MWBENCH --bench barrier,bcast,allgather,alltoall,allreduce --ranks 2,4 --method auto --iters 2000 --mpi-iters 300 --step-timeout 120"
    "coll-procs2|alternate 7 $MWRUN -n 2 -q --timeout 600 $MWBENCH $COLL_PROCS --ranks 2 --iters 2000 --no-mpi @@ $MWBENCH $COLL_PROCS --ranks 2 --iters 300 --op mpich,openmpi"
    "coll-procs4|alternate 3 $MWRUN -n 4 -q --timeout 600 $MWBENCH $COLL_PROCS --ranks 4 --iters 2000 --no-mpi @@ $MWBENCH $COLL_PROCS --ranks 4 --iters 300 --op mpich,openmpi"
    "coll-barrier|$MWBENCH --bench barrier --ranks 4 --method a,b,c,d,e --iters 2000 --no-mpi"
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

$MWBENCH report --results "$OUT" --readme docs/performance.md --plots bench/plots || failed+=("report")
if [ ${#failed[@]} -gt 0 ]; then
    printf 'bench: failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "bench: results in $OUT, plots in bench/plots, docs/performance.md regenerated"
