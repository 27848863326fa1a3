#!/usr/bin/env bash
# `make soak-netns`: the soak (tools/soak, 4 ranks of random mixed operations,
# every result checked against a model, memory growth watched) across 4 hosts
# of a netns test cluster, with SOAK_LOSS% (default 5) of the UDP packets
# arriving at each host dropped by nftables: real loss on a real kernel path
# instead of the injected loss of `make soak`. Root only; the cluster is
# removed on exit, also after a failure or Ctrl-C.
#
#   scripts/soak-netns.sh SECONDS [mwsoak options...]
set -euo pipefail

seconds=${1:?usage: scripts/soak-netns.sh SECONDS [mwsoak options...]}
shift
loss=${SOAK_LOSS:-5}
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
[ "$(id -u)" -eq 0 ] || { echo "soak-netns: needs root (network namespaces)" >&2; exit 1; }

# A cluster of our own: name and /24 from our pid, so parallel runs coexist.
export NETNS_PREFIX=$(printf "sk%04d" $(( $$ % 10000 )))  # fixed width: never the start of another prefix
export NETNS_SUBNET="10.119.$(( $$ % 250 ))"
trap '"$here/netns-cluster" down' EXIT
"$here/netns-cluster" up 4
hosts=()
for i in 1 2 3 4; do
    "$here/netns-cluster" loss "$NETNS_PREFIX$i" "$loss"
    hosts+=("$NETNS_PREFIX$i")
done
echo "soak-netns: 4 hosts, ${loss}% UDP loss at each (nftables), ${seconds} s"
"$root/target/release/mwrun" -n 4 --hosts "$(IFS=,; echo "${hosts[*]}")" \
    --launcher-exec "$here/netns-exec" --bootstrap-addr "$NETNS_SUBNET.254" \
    --timeout $(( seconds + 300 )) \
    "$root/target/release/mwsoak" --seconds "$seconds" "$@"
dropped=0
for h in "${hosts[@]}"; do
    n=$(ip netns exec "$h" nft list table inet netns_cluster_loss | awk '/packets/ {for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1)}')
    dropped=$(( dropped + ${n:-0} ))
done
echo "soak-netns: nftables dropped $dropped UDP packets"
