#!/bin/bash
# Builds the MPI face's tests with mpicc/mpicxx (shared library, and one
# against the static library) and runs them under mpiexec: on 1, 2, 3 and
# 4 ranks over shared memory and over UDP (MW_TRANSPORT=udp); on 4 ranks
# over UDP with injected loss, duplication and reordering (MW_FAULT_*),
# where rank 0's counters must show the faults happened; plus the error
# paths (ERRORS_ARE_FATAL, MPI_Abort's exit code), the wrappers' -show
# options, the library's SONAME and exports (every function of the ABI,
# MPI_ and PMPI_), and that docs/mpi.md lists exactly the functions this
# build reports unsupported.
# Usage: tests/run.sh OUT (target/mpi). Exits nonzero on any failure.
set -euo pipefail
out=$1
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
bin=$out/bin
build=$out/tests
mkdir -p "$build"
cflags=(-std=c11 -O2 -Wall -Wextra -Werror)
tests=(env_test comm_test p2p_test dtype_test coll_test nbc_test misc_test)
fail() { echo "run.sh: $*" >&2; exit 1; }

for t in "${tests[@]}" error_test; do
    "$bin/mpicc" "${cflags[@]}" "$here/tests/$t.c" -o "$build/$t"
done
"$bin/mpicxx" -std=c++11 -Wall -Wextra -Werror "$here/tests/cxx_test.cpp" -o "$build/cxx_test"
# The static library: no libmpi_abi.so or libmemwire.so dependency.
gcc "${cflags[@]}" -I"$here/include" "$here/tests/p2p_test.c" "$out/lib/libmpi_abi.a" \
    $(PKG_CONFIG_PATH=$root/target/release/pkgconfig pkg-config --libs memwire-static) -o "$build/p2p_test-static"
if readelf -d "$build/p2p_test-static" | grep -q 'libmpi_abi\|libmemwire'; then
    fail "p2p_test-static depends on a shared library of ours"
fi

# The library carries the standard ABI's SONAME, programs ask for it, and
# it exports every function of the ABI and its PMPI_ twin.
readelf -d "$out/lib/libmpi_abi.so" | grep -q 'SONAME.*\[libmpi_abi\.so\.1\]' || fail "SONAME is not libmpi_abi.so.1"
readelf -d "$build/p2p_test" | grep -q 'NEEDED.*\[libmpi_abi\.so\.1\]' || fail "p2p_test does not need libmpi_abi.so.1"
exported=$(nm -D --defined-only "$out/lib/libmpi_abi.so" | awk '{print $3}' | sort)
want=$(sed -n 's/^[^#].*\b\(MPI_[A-Za-z0-9_]*\)(.*/\1/p' "$here/abi/functions.txt" | sed 'p;s/^/P/' | sort)
missing=$(comm -13 <(echo "$exported") <(echo "$want"))
[ -z "$missing" ] || fail "not exported: $missing"
[ "$(echo "$want" | wc -l)" -eq 1328 ] || fail "abi/functions.txt does not hold the ABI's 664 functions"
# docs/mpi.md lists exactly the unsupported functions of this build.
python3 - "$out/gen/unsupported.md" "$root/docs/mpi.md" <<'PY' || fail "docs/mpi.md's unsupported list differs from $out/gen/unsupported.md (copy it in)"
import sys
gen, doc = open(sys.argv[1]).read(), open(sys.argv[2]).read()
sys.exit(0 if gen in doc else 1)
PY

# The wrappers.
"$bin/mpicc" -show x.c | grep -q -- "-lmpi_abi" || fail "mpicc -show"
test -f "$("$bin/mpicc" -show-incdir)/mpi.h" || fail "mpicc -show-incdir"
test -f "$("$bin/mpicc" -show-libdir)/libmpi_abi.so" || fail "mpicc -show-libdir"
"$bin/mpicxx" -show x.cpp | grep -q -- "^g++ " || fail "mpicxx -show"
MPI_CC=clang "$bin/mpicc" -show x.c | grep -q -- "^clang " || fail "MPI_CC"
"$bin/mpicc" -cc=cc -show -c x.c | grep -q -- "^cc .*-c x.c$" || fail "mpicc -cc= -c"

run() { # label ranks program [args...], environment from the caller
    local label=$1 n=$2 prog=$3
    shift 3
    echo "== $prog on $n ranks over $label"
    "$bin/mpiexec" -n "$n" --timeout 180 "$build/$prog" "$@"
}
all=("${tests[@]}" cxx_test)
for n in 1 2 3 4; do
    for t in "${all[@]}"; do
        run shm "$n" "$t"
        MW_TRANSPORT=udp run udp "$n" "$t"
    done
done
"$bin/mpirun" -np 2 --timeout 180 "$build/p2p_test-static"

# Injected faults on every datagram sent: each test must still pass, and
# rank 0's counters must show that the faults happened.
log=$build/fault.log
for t in "${all[@]}"; do
    MW_TRANSPORT=udp MW_FAULT_DROP=0.05 MW_FAULT_DUP=0.02 MW_FAULT_REORDER=0.02 MW_STATS=1 \
        run "udp, 5% loss" 4 "$t" >"$log" 2>&1 || { cat "$log" >&2; fail "$t failed under loss"; }
    grep -v "memwire rank" "$log"
    dropped=$(sed -n 's/.*memwire rank 0 faults .*: \([0-9]*\) dropped.*/\1/p' "$log")
    if [ "${dropped:-0}" -eq 0 ]; then
        cat "$log" >&2
        fail "$t under MW_FAULT_DROP: rank 0 reports no dropped datagram"
    fi
done

# ERRORS_ARE_FATAL: the routine and the error class are named, the job
# fails, nothing returns. MPI_Abort: the job ends with its code.
set +e
msg=$("$bin/mpiexec" -n 2 --timeout 60 "$build/error_test" fatal 2>&1)
status=$?
"$bin/mpiexec" -n 2 --timeout 60 "$build/error_test" abort >/dev/null 2>&1
abort_status=$?
set -e
if [ $status -eq 0 ] || ! grep -q "MPI_Send: rank [01]: MPI_ERR_RANK" <<<"$msg" || grep -q "returned" <<<"$msg"; then
    echo "$msg" >&2
    fail "error_test fatal: want a failure naming MPI_Send and MPI_ERR_RANK, got status $status"
fi
[ $abort_status -eq 7 ] || fail "error_test abort: MPI_Abort(..., 7) ended the job with status $abort_status"
echo "mpi tests: all passed"
