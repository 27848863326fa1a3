#!/usr/bin/env bash
# Runs the NAS-style kernels (apps/nas) over memwire and over every installed
# MPI, checks that every run verifies, and prints a Mop/s table (median of
# --reps runs) by kernel, class and number of ranks. Exits 1 if any run
# failed verification or did not finish.
#
#   scripts/nas-compare.sh [--kernels cg,ft,is] [--classes S,W] [--ranks 1,2,4]
#                          [--mpi-ranks LIST] [--comms memwire,mpich,openmpi]
#                          [--reps N] [--timeout SECONDS]
#
# Binaries come from $NAS_BIN (default target/nas, built by `make -C apps/nas`);
# mwrun from $MWRUN (default target/release/mwrun). Per-run logs go to
# $NAS_BIN/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."

kernels=cg,ft,is
classes=S,W
ranks=1,2,4
mpi_ranks=
comms=
reps=3
timeout_s=300
while [ $# -gt 0 ]; do
    case "$1" in
    --kernels) kernels=$2; shift 2 ;;
    --classes) classes=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --mpi-ranks) mpi_ranks=$2; shift 2 ;;
    --comms) comms=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "nas-compare: unknown argument $1" >&2; exit 2 ;;
    esac
done
mpi_ranks=${mpi_ranks:-$ranks}
bin=${NAS_BIN:-target/nas}
mwrun=${MWRUN:-target/release/mwrun}
logs=$bin/logs
mkdir -p "$logs"

if [ -z "$comms" ]; then
    comms=memwire
    for c in mpich openmpi; do
        [ -x "$bin/cg.$c" ] && comms=$comms,$c
    done
fi
IFS=, read -r -a K <<< "$kernels"
IFS=, read -r -a C <<< "$classes"
IFS=, read -r -a R <<< "$ranks"
IFS=, read -r -a MR <<< "$mpi_ranks"
IFS=, read -r -a M <<< "$comms"

launch() { # comm ranks program class
    local comm=$1 n=$2 prog=$3 cls=$4
    case "$comm" in
    memwire) "$mwrun" -n "$n" --timeout "$timeout_s" --no-prefix "$prog" "$cls" ;;
    mpich) timeout "$timeout_s" mpiexec.mpich -n "$n" "$prog" "$cls" ;;
    openmpi)
        # Root needs --allow-run-as-root; more ranks than cores needs --oversubscribe.
        OMPI_MCA_btl_vader_single_copy_mechanism=none timeout "$timeout_s" \
            mpiexec.openmpi --allow-run-as-root --oversubscribe -n "$n" "$prog" "$cls" ;;
    esac
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print v[(NR+1)/2]; else printf "%.2f\n", (v[NR/2]+v[NR/2+1])/2}'; }

declare -A result
failures=0
all_ranks=$(printf '%s\n' "${R[@]}" "${MR[@]}" | sort -n -u)
for k in "${K[@]}"; do
    for cls in "${C[@]}"; do
        for comm in "${M[@]}"; do
            if [ "$comm" = memwire ]; then list=("${R[@]}"); else list=("${MR[@]}"); fi
            prog=$bin/$k.$comm
            if [ ! -x "$prog" ]; then
                echo "nas-compare: $prog not built, skipping $comm" >&2
                continue
            fi
            for n in "${list[@]}"; do
                vals=()
                for ((i = 1; i <= reps; i++)); do
                    log=$logs/$k.$cls.$comm.$n.$i.log
                    rc=0
                    launch "$comm" "$n" "$prog" "$cls" > "$log" 2>&1 || rc=$?
                    line=$(grep -o 'NAS-RESULT .*' "$log" | tail -n 1 || true)
                    if [ "$rc" -ne 0 ] || [[ "$line" != *verified=yes* ]]; then
                        echo "nas-compare: FAILED $k class $cls on $n ranks over $comm (exit $rc); log $log:" >&2
                        tail -n 20 "$log" >&2
                        failures=$((failures + 1))
                        continue
                    fi
                    vals+=("$(sed 's/.* mops=\([^ ]*\).*/\1/' <<< "$line")")
                done
                result[$k.$cls.$comm.$n]=$(printf '%s\n' "${vals[@]}" | grep . | median)
                echo "nas-compare: $k class $cls, $n ranks, $comm: ${result[$k.$cls.$comm.$n]} Mop/s (${vals[*]})" >&2
            done
        done
    done
done

printf '\nNAS kernels, Mop/s (total over ranks; median of %s run(s); every run verified)\n' "$reps"
printf '%-6s %-5s %5s' kernel class ranks
for comm in "${M[@]}"; do printf ' %10s' "$comm"; done
printf '\n'
for k in "${K[@]}"; do
    for cls in "${C[@]}"; do
        for n in $all_ranks; do
            printf '%-6s %-5s %5s' "${k^^}" "$cls" "$n"
            for comm in "${M[@]}"; do printf ' %10s' "${result[$k.$cls.$comm.$n]:--}"; done
            printf '\n'
        done
    done
done
if [ "$failures" -ne 0 ]; then
    echo "nas-compare: $failures run(s) failed" >&2
    exit 1
fi
