#!/usr/bin/env bash
# `make bench-hosts`: memwire against its baselines BETWEEN HOSTS, on netns
# test clusters (scripts/netns-cluster) of 2 and 4 hosts, at MTU 1500
# (memwire's datagram 1472, its default between hosts) and at MTU 9000
# (veth and bridge MTU 9000, MW_MTU=8972). Root only; every cluster is
# removed on exit, also after a failure or Ctrl-C.
#
# Every group is one mwbench command under mwrun, one rank per host, run
# BENCH_HOSTS_RUNS times (default 5) into one file; within each run memwire's
# points and the baselines alternate in plan order (udp_raw, udp_gso and
# tcp_raw between ranks 0 and 1 on their own hosts, MPICH and Open MPI
# launched across the same hosts), and `mwbench report` takes each point's
# median over the runs (`merge_repeated_jobs`). The groups:
#
#   MTU 1500 and 9000, 2 hosts:
#     pingpong  8 B, 64 KiB, 1 MiB
#     bandwidth 1 MiB, 16 MiB
#     bibw      1 MiB
#     rate      8 B
#     loss1, loss5: bandwidth 1 MiB with 1% and 5% of ALL IP packets arriving
#               at every host dropped (netns-cluster loss; rows say loss_pct)
#     coll      allreduce, alltoall, allgather, bcast at 64 KiB and 1 MiB
#   MTU 1500 and 9000, 4 hosts:
#     coll      the same collectives on 4 ranks
#
# Results: bench/results-hosts/NAME.jsonl (its table and notes in NAME.log),
# machine-start.json, machine-end.json and commands.txt, as scripts/bench.sh
# writes them; then docs/performance-hosts.md (the section between its
# markers) and bench/plots-hosts/*.png from `mwbench report`.
#
# Settings (environment):
#   BENCH_HOSTS_QUICK=1   a check of the whole path in about 6 minutes on the
#                         2-core VM: 1 run, fewer sizes and iterations, 5%
#                         loss only, into target/bench-hosts-quick/ (report
#                         and plots there too), never over the real results
#   BENCH_HOSTS_RUNS      runs per group (default 5; 1 with QUICK)
#   BENCH_HOSTS_MTUS      the MTUs (default "1500 9000")
#   BENCH_HOSTS_ONLY      only the named groups, e.g. "pingpong coll"
#   BENCH_HOSTS_PREFIX, BENCH_HOSTS_SUBNET
#                         the clusters' NETNS_PREFIX and NETNS_SUBNET
#                         (default mwbh and 10.79.0, apart from the default
#                         cluster mw / 10.77.0 and from the tests' clusters)
set -uo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench-hosts: needs root (network namespaces)" >&2; exit 1; }

QUICK=${BENCH_HOSTS_QUICK:-0}
if [ "$QUICK" = 1 ]; then
    RUNS=${BENCH_HOSTS_RUNS:-1}
    OUT=target/bench-hosts-quick
    DOC=$OUT/performance-hosts.md
    PLOTS=$OUT/plots
else
    RUNS=${BENCH_HOSTS_RUNS:-5}
    OUT=bench/results-hosts
    DOC=docs/performance-hosts.md
    PLOTS=bench/plots-hosts
fi
MTUS=${BENCH_HOSTS_MTUS:-1500 9000}
export NETNS_PREFIX=${BENCH_HOSTS_PREFIX:-mwbh}
export NETNS_SUBNET=${BENCH_HOSTS_SUBNET:-10.79.0}

. scripts/bench-common.sh
bench_need_packages bench-hosts gcc mpich libmpich-dev openmpi-bin libopenmpi-dev fonts-dejavu-core iproute2 nftables

set -e
cargo build --release -q -p mwbench -p mwrun
set +e

MWBENCH=target/release/mwbench
MWRUN=target/release/mwrun
CLUSTER=scripts/netns-cluster
mkdir -p "$OUT" "$PLOTS"
trap '"$CLUSTER" down >/dev/null 2>&1' EXIT
trap 'exit 130' INT TERM


selected() {
    [ -z "${BENCH_HOSTS_ONLY:-}" ] && return 0
    for only in $BENCH_HOSTS_ONLY; do [ "$only" = "$1" ] && return 0; done
    return 1
}

if [ "$QUICK" = 1 ]; then
    PINGPONG="--bench pingpong --sizes 8,1M --iters 100"
    BANDWIDTH="--bench bandwidth --sizes 1M --iters 128"
    BIBW="--bench bibw --sizes 1M --iters 128"
    RATE="--bench rate --sizes 8 --iters 20000"
    LOSS="--bench bandwidth --sizes 1M --iters 128"
    COLL="--bench allreduce,alltoall,allgather,bcast --method auto --sizes 64K,1M --iters 50 --mpi-iters 50"
    LOSSES="5"
else
    PINGPONG="--bench pingpong --sizes 8,64K,1M"
    BANDWIDTH="--bench bandwidth --sizes 1M,16M"
    BIBW="--bench bibw --sizes 1M"
    RATE="--bench rate --sizes 8"
    LOSS="--bench bandwidth --sizes 1M"
    COLL="--bench allreduce,alltoall,allgather,bcast --method auto --sizes 64K,1M --iters 1000 --mpi-iters 300"
    LOSSES="1 5"
fi
COMMON="--transport udp --step-timeout 120"

if [ -z "${BENCH_HOSTS_ONLY:-}" ]; then
    rm -f "$OUT"/*.jsonl "$OUT"/*.log "$PLOTS"/*.png
    : >"$OUT/commands.txt"
fi
$MWBENCH machine >"$OUT/machine-start.json"
failed=()
start=$SECONDS

# `group NAME GROUP MWBENCH-ARGS...`: one group's runs into $OUT/NAME.jsonl.
group() {
    local name=$1 kind=$2 cmd status t0
    shift 2
    selected "$kind" || return 0
    cmd="repeat $RUNS env MW_MTU=$DATAGRAM $MWRUN -n $N -q --timeout 1800 --hosts $HOSTS --launcher-exec scripts/netns-exec --bootstrap-addr $NETNS_SUBNET.254 $MWBENCH $COMMON $*"
    echo "bench-hosts: $name: $cmd > $OUT/$name.jsonl"
    grep -v "/$name.jsonl\$" "$OUT/commands.txt" >"$OUT/commands.tmp" 2>/dev/null
    echo "$cmd > $OUT/$name.jsonl" >>"$OUT/commands.tmp"
    mv "$OUT/commands.tmp" "$OUT/commands.txt"
    t0=$SECONDS
    $cmd >"$OUT/$name.jsonl" 2>"$OUT/$name.log"
    status=$?
    echo "bench-hosts: $name: $(wc -l <"$OUT/$name.jsonl") points in $((SECONDS - t0)) s (exit $status)"
    grep "^mwbench: " "$OUT/$name.log" | sed 's/^/    /'
    [ $status -eq 0 ] || failed+=("$name (exit $status, see $OUT/$name.log)")
}

# `set_loss P`: P% of all IP packets arriving at every host dropped (0: none).
set_loss() {
    local i
    for ((i = 1; i <= N; i++)); do
        "$CLUSTER" loss "$NETNS_PREFIX$i" "$1" || failed+=("netns-cluster loss $NETNS_PREFIX$i $1")
    done
    echo "# $CLUSTER loss on every host: $1%" >>"$OUT/commands.txt"
}

for MTU in $MTUS; do
    DATAGRAM=$((MTU - 28))
    for N in 2 4; do
        HOSTS=$(seq -s, -f "$NETNS_PREFIX%g" 1 "$N")
        if ! NETNS_MTU=$MTU "$CLUSTER" up "$N"; then
            failed+=("netns-cluster up $N at MTU $MTU")
            continue
        fi
        echo "# NETNS_PREFIX=$NETNS_PREFIX NETNS_SUBNET=$NETNS_SUBNET NETNS_MTU=$MTU $CLUSTER up $N" >>"$OUT/commands.txt"
        tag="m$MTU-h$N"
        if [ "$N" -eq 2 ]; then
            group "$tag-pingpong" pingpong $PINGPONG
            group "$tag-bandwidth" bandwidth $BANDWIDTH
            group "$tag-bibw" bibw $BIBW
            group "$tag-rate" rate $RATE
            for P in $LOSSES; do
                if selected loss; then
                    set_loss "$P"
                    group "$tag-loss$P" loss $LOSS --network-loss "$P"
                    set_loss 0
                fi
            done
        fi
        group "$tag-coll" coll $COLL
        "$CLUSTER" down
    done
done
$MWBENCH machine >"$OUT/machine-end.json"
echo "bench-hosts: all runs in $((SECONDS - start)) s"

if [ ! -f "$DOC" ]; then
    mkdir -p "$(dirname "$DOC")"
    printf '# memwire between hosts\n\n<!-- bench:begin -->\n<!-- bench:end -->\n' >"$DOC"
fi
$MWBENCH report --results "$OUT" --readme "$DOC" --plots "$PLOTS" --command "make bench-hosts" || failed+=("report")
if [ ${#failed[@]} -gt 0 ]; then
    printf 'bench-hosts: failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "bench-hosts: results in $OUT, plots in $PLOTS, $DOC regenerated"
