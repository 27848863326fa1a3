#!/bin/bash
# Builds the OpenSHMEM face's tests and examples with oshcc/oshc++ (shared
# and static library) and runs them under oshrun: on 1, 2, 4 and 8 PEs over
# shared memory and over UDP (MW_TRANSPORT=udp); on 4 PEs over UDP with
# injected loss, duplication and reordering (MW_FAULT_*); on 4 PEs across
# the two hosts of a netns test cluster (scripts/netns-cluster), without
# and with real packet loss (nftables); plus the error path.
# The netns cases need root: without it they are skipped with a message,
# except under CI=true, where that is a failure.
# Usage: tests/run.sh OUT (target/shmem). Exits nonzero on any failure.
set -euo pipefail
out=$1
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$out/bin
build=$out/tests
mkdir -p "$build"
cflags=(-std=c11 -O2 -Wall -Wextra -Werror)
tests=(setup_heap_test rma_test amo_test sync_coll_test)
examples=(heat2d hashtable)

for t in "${tests[@]}" error_test; do
    "$bin/oshcc" "${cflags[@]}" "$here/tests/$t.c" -o "$build/$t"
done
for e in "${examples[@]}"; do
    "$bin/oshcc" "${cflags[@]}" "$here/examples/$e.c" -o "$build/$e"
done
"$bin/oshc++" -std=c++11 -Wall -Wextra -Werror "$here/tests/cxx_test.cpp" -o "$build/cxx_test"
# The static library: no libmwshmem.so dependency.
gcc "${cflags[@]}" -I"$here/include" "$here/tests/rma_test.c" "$out/lib/libmwshmem.a" \
    $(PKG_CONFIG_PATH=$here/../../target/release/pkgconfig pkg-config --libs memwire-static) -o "$build/rma_test-static"
if readelf -d "$build/rma_test-static" | grep -q 'libmwshmem\|libmemwire'; then
    echo "run.sh: rma_test-static depends on a shared library of ours" >&2
    exit 1
fi
# The wrappers' -showme.
"$bin/oshcc" -showme x.c | grep -q -- "-lmwshmem"
"$bin/oshcc" -showme:compile | grep -q -- "-I"

all=("${tests[@]}" "${examples[@]}" cxx_test)
run() { # label PEs program [oshrun options...], environment from the caller
    local label=$1 n=$2 prog=$3
    shift 3
    echo "== $prog on $n PEs over $label"
    "$bin/oshrun" -np "$n" --timeout 120 "$@" "$build/$prog"
}
for n in 1 2 4 8; do
    for t in "${all[@]}"; do
        run shm "$n" "$t"
        MW_TRANSPORT=udp run udp "$n" "$t"
    done
done

# Injected faults on every datagram sent: each test must still pass, and
# rank 0's counters must show that the faults happened.
log=$build/fault.log
for t in "${all[@]}"; do
    MW_TRANSPORT=udp MW_FAULT_DROP=0.05 MW_FAULT_DUP=0.02 MW_FAULT_REORDER=0.02 MW_STATS=1 \
        run "udp, 5% loss" 4 "$t" >"$log" 2>&1 || { cat "$log" >&2; echo "run.sh: $t failed under loss" >&2; exit 1; }
    grep -v "memwire rank" "$log"
    dropped=$(sed -n 's/.*memwire rank 0 faults .*: \([0-9]*\) dropped.*/\1/p' "$log")
    if [ "${dropped:-0}" -eq 0 ]; then
        cat "$log" >&2
        echo "run.sh: $t under MW_FAULT_DROP: rank 0 reports no dropped datagram" >&2
        exit 1
    fi
done

# Two hosts (network namespaces): 2 PEs on each, shared memory within a
# host and UDP between them; then with 5% of the packets arriving at each
# host dropped by the kernel (nftables), the rendezvous's TCP included.
netns=$here/../../scripts
if [ "$(id -u)" -ne 0 ]; then
    if [ "${CI:-}" = true ]; then
        echo "run.sh: the netns cases need root (network namespaces), and CI=true: failing" >&2
        exit 1
    fi
    echo "== skipped: the netns cases need root (network namespaces)"
else
    # A cluster of our own (name and /24 from our pid), removed on exit.
    export NETNS_PREFIX=$(printf "osh%03d" $(( $$ % 1000 )))
    export NETNS_SUBNET="10.121.$(( $$ % 250 ))"
    trap '"$netns/netns-cluster" down >/dev/null 2>&1 || true' EXIT
    "$netns/netns-cluster" up 2
    hosts=(--hosts "${NETNS_PREFIX}1:2,${NETNS_PREFIX}2:2" --launcher-exec "$netns/netns-exec"
        --bootstrap-addr "$NETNS_SUBNET.254" -x SHMEM_TEST_PES_PER_HOST=2)
    for t in "${all[@]}"; do
        run "2 netns hosts" 4 "$t" "${hosts[@]}"
    done
    for h in 1 2; do "$netns/netns-cluster" loss "$NETNS_PREFIX$h" 5; done
    for t in "${all[@]}"; do
        run "2 netns hosts, 5% loss" 4 "$t" "${hosts[@]}"
    done
    dropped=0
    for h in 1 2; do
        n=$(ip netns exec "$NETNS_PREFIX$h" nft list table inet netns_cluster_loss \
            | awk '/packets/ {for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1)}')
        dropped=$(( dropped + ${n:-0} ))
    done
    echo "== nftables dropped $dropped packets"
    [ "$dropped" -gt 0 ] || { echo "run.sh: the netns loss rules dropped nothing" >&2; exit 1; }
    "$netns/netns-cluster" down
    trap - EXIT
fi

run shm 2 rma_test-static

# A non-symmetric address: named routine and argument, and the job fails.
set +e
msg=$("$bin/oshrun" -np 2 --timeout 60 "$build/error_test" 2>&1)
status=$?
set -e
if [ $status -eq 0 ] || ! grep -q "shmem_long_put: PE [01]: argument dest .* is not symmetric" <<<"$msg" \
    || grep -q "returned" <<<"$msg"; then
    echo "run.sh: error_test: want a failure naming shmem_long_put and dest, got status $status:" >&2
    echo "$msg" >&2
    exit 1
fi
echo "shmem tests: all passed"
