#!/bin/bash
# Builds the OpenSHMEM face's tests and examples with oshcc/oshc++ (shared
# and static library) and runs them under oshrun on 1, 2 and 4 PEs over
# shared memory and over UDP (MW_TRANSPORT=udp), plus the error path.
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

run() { # transport PEs program
    local transport=$1 n=$2 prog=$3
    echo "== $prog on $n PEs over $transport"
    if [ "$transport" = udp ]; then
        MW_TRANSPORT=udp "$bin/oshrun" -np "$n" --timeout 300 "$build/$prog"
    else
        "$bin/oshrun" -np "$n" --timeout 300 "$build/$prog"
    fi
}
for transport in shm udp; do
    for n in 1 2 4; do
        for t in "${tests[@]}" "${examples[@]}" cxx_test; do
            run "$transport" "$n" "$t"
        done
    done
done
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
