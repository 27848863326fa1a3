# memwire — top-level entry points. `make demo` and `make test` are the quick start.
SHELL := /bin/bash
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never


.PHONY: all build demo test deps lint unit miri slurm-test ctest capi header install shmem shmem-test mpi mpi-test nas nas-bench fuzz fuzz-smoke soak soak-short soak-netns bench bench-hosts clean

all: build

## build: compile the library, tools and C API in release mode
build:
	$(CARGO) build --release --workspace

## demo: build and run the main job
demo: build
	@scripts/demo.sh

## deps: install what the tests need on a fresh Debian machine (idempotent)
# gcc/g++/pkg-config/binutils: the C API tests (ctest); mpich: the PMI-1/PMI-2
# launcher tests run real mpiexec.hydra, and with Open MPI the NAS kernels'
# MPI comparison builds and mwbench's MPI baselines; iproute2 and nftables:
# the netns test cluster (scripts/netns-cluster); fonts-dejavu-core: the
# font mwbench's plots (and their test) draw text with; python3-venv and
# python3-dev: shmem4py (from PyPI, in a venv under target/py-shmem) built
# against our oshcc in shmem-test, and mpi4py (target/py-mpi) against our
# mpicc in mpi-test; slurmctld, slurmd, slurm-client, munge:
# the real Slurm cluster of slurm-test (scripts/slurm-cluster); libpmix2 and
# libpmix-dev: the PMIx library the ranks load under srun --mpi=pmix and
# Open MPI's mpirun (Debian's Slurm and Open MPI use the same one).
DEB_PACKAGES := gcc g++ pkg-config binutils mpich libmpich-dev openmpi-bin libopenmpi-dev iproute2 nftables fonts-dejavu-core \
	python3-venv python3-dev slurmctld slurmd slurm-client munge libpmix2 libpmix-dev
deps:
	@scripts/install-deps.sh $(DEB_PACKAGES)
	@faces/shmem/tests/shmem4py.sh deps
	@faces/mpi/tests/mpi4py.sh deps

## test: install dependencies, then lint and run every test (with short fuzz and soak runs)
test: deps lint unit miri slurm-test ctest shmem-test mpi-test nas fuzz-smoke soak-short
	@echo "make test: all suites passed"

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps
	@# Again with the test-support features, so their docs are checked too.
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --features mw-core/fuzzing,mw-bootstrap/testing

unit:
	@# Binaries that tests start as separate programs (mw-lossy-relay, mwrun):
	@# `cargo test` only builds those of the package under test.
	$(CARGO) build --workspace --release --bins
	$(CARGO) test --workspace --release
	@# The compile_fail doctests' error codes (memwire's "Safety by construction")
	@# are only checked by a nightly rustdoc: this proves each fails for its reason.
	$(CARGO) +nightly test --doc -p memwire

## slurm-test: memwire jobs under a real Slurm on this machine (root; scripts/slurm-cluster starts
## munged, slurmctld, slurmd and stops them after): srun --mpi=pmi2 and --mpi=pmix with 1, 2, 4
## tasks, an sbatch job, a failing task, mwrun inside an allocation (crates/memwire/tests/slurm.rs)
slurm-test:
	$(CARGO) build --release -p mwrun -p memwire --examples
	scripts/slurm-cluster up
	$(CARGO) test --release -p memwire --test slurm -- --ignored --test-threads=1; \
	    status=$$?; scripts/slurm-cluster down; exit $$status

## miri: the unsafe modules' in-memory tests under Miri (nightly + miri component, which `make deps` adds)
miri:
	@scripts/miri.sh

# ---- C API: libmemwire.so / libmemwire.a, include/memwire.h, memwire.pc ----
PREFIX ?= /usr/local
DESTDIR ?=
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
# The shared library's SONAME is libmemwire.so.$(MAJOR) (crates/capi/build.rs).
MAJOR := $(firstword $(subst ., ,$(VERSION)))
RELEASE_DIR := $(CURDIR)/target/release
PC_DIR := $(RELEASE_DIR)/pkgconfig
C_OUT := target/c
MWRUN := target/release/mwrun
CWARN := -std=c11 -O2 -g -Wall -Wextra -Werror -pedantic
CXXWARN := -std=c++11 -Wall -Wextra -Werror -pedantic

# $(call gen-pc,template,output,prefix,libdir,includedir)
define gen-pc
	@mkdir -p $(dir $(2))
	sed -e 's|@PREFIX@|$(3)|' -e 's|@LIBDIR@|$(4)|' -e 's|@INCLUDEDIR@|$(5)|' \
	    -e 's|@VERSION@|$(VERSION)|' $(1) > $(2)
endef

## capi: build libmemwire.so/.a and mwrun; write pkg-config files for the build tree
capi:
	$(CARGO) build --release -p mw-capi -p mwrun
	@# Programs linked against it ask the loader for its SONAME.
	ln -sf libmemwire.so $(RELEASE_DIR)/libmemwire.so.$(MAJOR)
	$(call gen-pc,crates/capi/memwire.pc.in,$(PC_DIR)/memwire.pc,$(CURDIR),$(RELEASE_DIR),$(CURDIR)/include)
	$(call gen-pc,crates/capi/memwire-static.pc.in,$(PC_DIR)/memwire-static.pc,$(CURDIR),$(RELEASE_DIR),$(CURDIR)/include)

## header: regenerate include/memwire.h from crates/capi with cbindgen
header:
	MW_UPDATE_HEADER=1 $(CARGO) test -p mw-capi --test header

## install: install the C library, header, pkg-config files and mwrun under $(DESTDIR)$(PREFIX),
## the OpenSHMEM face (libmwshmem, shmem.h, oshcc/oshc++/oshrun, mwshmem.pc) and the MPI face
## (libmpi_abi.so.1/.a, mpi.h, mpicc/mpicxx/mpiexec/mpirun, mwmpi.pc) beside them
install: capi shmem mpi
	$(MAKE) --no-print-directory -C faces/shmem install PREFIX=$(PREFIX) DESTDIR=$(DESTDIR)
	$(MAKE) --no-print-directory -C faces/mpi install PREFIX=$(PREFIX) DESTDIR=$(DESTDIR)
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/memwire.h $(DESTDIR)$(PREFIX)/include/memwire.h
	@# The versioned file, the SONAME programs load, and the name they link with.
	install -m 755 target/release/libmemwire.so $(DESTDIR)$(PREFIX)/lib/libmemwire.so.$(VERSION)
	ln -sf libmemwire.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libmemwire.so.$(MAJOR)
	ln -sf libmemwire.so.$(MAJOR) $(DESTDIR)$(PREFIX)/lib/libmemwire.so
	install -m 644 target/release/libmemwire.a $(DESTDIR)$(PREFIX)/lib/libmemwire.a
	install -m 755 $(MWRUN) $(DESTDIR)$(PREFIX)/bin/mwrun
	$(call gen-pc,crates/capi/memwire.pc.in,$(DESTDIR)$(PREFIX)/lib/pkgconfig/memwire.pc,$(PREFIX),$(PREFIX)/lib,$(PREFIX)/include)
	$(call gen-pc,crates/capi/memwire-static.pc.in,$(DESTDIR)$(PREFIX)/lib/pkgconfig/memwire-static.pc,$(PREFIX),$(PREFIX)/lib,$(PREFIX)/include)

## ctest: build the C example and C API test against the header, shared and static, and run them under mwrun; build the staging probe
ctest: capi
	@mkdir -p $(C_OUT)
	$(CC) -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c include/memwire.h
	$(CXX) $(CXXWARN) -fsyntax-only -x c++ include/memwire.h
	export PKG_CONFIG_PATH=$(PC_DIR); set -e; \
	for prog in examples/c/hello_rma.c examples/c/ring_messages.c tests/c/capi_test.c tests/c/capi_parity_test.c \
	        tests/c/peer_event_test.c; do \
	    name=$$(basename $$prog .c); \
	    $(CC) $(CWARN) $$prog $$(pkg-config --cflags --libs memwire) -o $(C_OUT)/$$name; \
	    $(CC) $(CWARN) $$prog $$(pkg-config --cflags --libs memwire-static) -o $(C_OUT)/$$name-static; \
	    if readelf -d $(C_OUT)/$$name-static | grep -q libmemwire; then \
	        echo "ctest: $(C_OUT)/$$name-static depends on libmemwire.so" >&2; exit 1; fi; \
	done
	$(MWRUN) -n 4 --timeout 120 $(C_OUT)/hello_rma
	$(MWRUN) -n 4 --timeout 120 $(C_OUT)/hello_rma-static
	$(MWRUN) -n 3 --timeout 120 $(C_OUT)/ring_messages
	MW_TRANSPORT=udp $(MWRUN) -n 3 --timeout 120 $(C_OUT)/ring_messages-static
	$(MWRUN) -n 4 --timeout 300 $(C_OUT)/capi_test
	MW_TRANSPORT=udp $(MWRUN) -n 4 --timeout 300 $(C_OUT)/capi_test
	$(MWRUN) -n 2 --timeout 300 $(C_OUT)/capi_test-static
	$(MWRUN) -n 1 --timeout 300 $(C_OUT)/capi_test
	$(MWRUN) -n 3 --timeout 120 $(C_OUT)/capi_parity_test
	MW_TRANSPORT=udp $(MWRUN) -n 3 --timeout 120 $(C_OUT)/capi_parity_test
	$(MWRUN) -n 1 --timeout 120 $(C_OUT)/capi_parity_test-static
	$(MWRUN) -n 3 --timeout 120 $(C_OUT)/peer_event_test
	MW_TRANSPORT=udp $(MWRUN) -n 3 --timeout 120 $(C_OUT)/peer_event_test-static
	@# The shared library carries its versioned SONAME, and programs ask for it.
	readelf -d $(RELEASE_DIR)/libmemwire.so | grep -q 'SONAME.*\[libmemwire\.so\.$(MAJOR)\]'
	readelf -d $(C_OUT)/capi_test | grep -q 'NEEDED.*\[libmemwire\.so\.$(MAJOR)\]'
	@# The staging probe behind MW_SHM_STAGE_STORES (README, Messaging): builds, and runs a round.
	$(CC) $(CWARN) tools/probes/stage_probe.c -o $(C_OUT)/stage_probe
	$(C_OUT)/stage_probe 1 > /dev/null
	@# The install target and its pkg-config file work from another prefix.
	$(MAKE) --no-print-directory install PREFIX=$(CURDIR)/$(C_OUT)/prefix > /dev/null
	PKG_CONFIG_PATH=$(CURDIR)/$(C_OUT)/prefix/lib/pkgconfig; export PKG_CONFIG_PATH; \
	    $(CC) $(CWARN) examples/c/hello_rma.c $$(pkg-config --cflags --libs memwire) -o $(C_OUT)/hello_rma-installed
	$(C_OUT)/prefix/bin/mwrun -n 2 --timeout 120 $(C_OUT)/hello_rma-installed
	test "$$(readlink $(C_OUT)/prefix/lib/libmemwire.so)" = libmemwire.so.$(MAJOR)
	test "$$(readlink $(C_OUT)/prefix/lib/libmemwire.so.$(MAJOR))" = libmemwire.so.$(VERSION)
	test -f $(C_OUT)/prefix/lib/libmemwire.so.$(VERSION) && ! test -L $(C_OUT)/prefix/lib/libmemwire.so.$(VERSION)
	@echo "ctest: C API example and tests passed (shared, static, installed)"

## shmem: the OpenSHMEM face (faces/shmem, docs/openshmem.md): libmwshmem.so/.a, oshcc, oshc++, oshrun in target/shmem
shmem: capi
	$(MAKE) --no-print-directory -C faces/shmem lib

## shmem-test: the OpenSHMEM tests and examples under oshrun (1-8 PEs; shared memory, UDP, injected loss,
## 2 netns hosts as root), then shmem4py's demos and unittest suite
shmem-test: shmem
	$(MAKE) --no-print-directory -C faces/shmem check

## mpi: the MPI face on the MPI-5.0 standard ABI (faces/mpi, docs/mpi.md): libmpi_abi.so.1/.a, mpicc,
## mpicxx, mpiexec, mpirun in target/mpi
mpi: capi
	$(MAKE) --no-print-directory -C faces/mpi lib

## mpi-test: the MPI tests under mpiexec (1-4 ranks; shared memory, UDP, injected loss), the wrappers,
## the static library, the ABI's layout and the unsupported list in docs/mpi.md; then mpi4py from PyPI:
## its benchmarks on 2-4 ranks and its test suite on 2 ranks (docs/mpi.md)
mpi-test: mpi
	$(MAKE) --no-print-directory -C faces/mpi check

## nas: NAS-style CG, FT, IS (apps/nas) over memwire, class S on 1, 2, 4 ranks, verified; MPI variants too when installed
nas: capi
	$(MAKE) --no-print-directory -C apps/nas check

## nas-bench: NAS kernels, classes S and W on 1, 2, 4 ranks, memwire vs MPICH vs Open MPI, Mop/s table
nas-bench: capi
	$(MAKE) --no-print-directory -C apps/nas bench

## fuzz: long fuzzing run of every target, FUZZ_SECONDS each (default 600; needs nightly, see README)
fuzz: deps
	@scripts/fuzz.sh $${FUZZ_SECONDS:-600} $${FUZZ_TARGETS:-decode endpoint}

# The short pass `make test` runs: 30 seconds in all.
fuzz-smoke:
	@scripts/fuzz.sh 20 endpoint
	@scripts/fuzz.sh 10 decode

## soak: 4 ranks (real processes under mwrun) for SOAK_SECONDS (default 600) of random mixed
## operations under SOAK_DROP (default 5%) injected loss, every result checked against a model;
## fails on a wrong byte, a lost or doubled atomic, or resident memory growing after warm-up
soak:
	$(CARGO) build --release -p mwrun -p mwsoak
	MW_FAULT_DROP=$${SOAK_DROP:-0.05} target/release/mwrun -n 4 --timeout $$(( $${SOAK_SECONDS:-600} + 300 )) \
		target/release/mwsoak --seconds $${SOAK_SECONDS:-600} $${SOAK_ARGS:-}

# The short soak `make test` runs (20 s).
soak-short:
	@$(MAKE) --no-print-directory soak SOAK_SECONDS=20 SOAK_ARGS="--warmup 8"

## soak-netns: the same soak across 4 netns hosts (root) with SOAK_LOSS (default 5) % real
## packet loss at each host (nftables) instead of injected loss
soak-netns:
	$(CARGO) build --release -p mwrun -p mwsoak
	scripts/soak-netns.sh $${SOAK_SECONDS:-600} $${SOAK_ARGS:-}

## bench: the standard benchmark set (under 15 minutes): installs the baselines when root on Debian
## (MPICH, Open MPI, a font), writes bench/results/*.jsonl, bench/plots/*.png and regenerates the
## README's performance section (BENCH_ONLY="pt2pt coll ..." reruns some groups)
bench:
	@scripts/bench.sh

## bench-hosts: memwire against udp_raw, udp_gso, tcp_raw, MPICH and Open MPI between hosts (root):
## netns clusters of 2 and 4 hosts at MTU 1500 and 9000, 5 runs a group, bench/results-hosts/*.jsonl,
## bench/plots-hosts/*.png and docs/performance-hosts.md (BENCH_HOSTS_QUICK=1: a few minutes' check)
bench-hosts:
	@scripts/bench-hosts.sh

clean:
	$(CARGO) clean
