# memwire — top-level entry points. `make demo` and `make test` are the quick start.
SHELL := /bin/bash
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build demo test deps lint unit ctest fuzz bench clean

all: build

## build: compile the library, tools and C API in release mode
build:
	$(CARGO) build --release --workspace

## demo: build and run the main job
demo: build
	@scripts/demo.sh

## deps: install what the tests need on a fresh Debian machine (idempotent)
# mpich: the PMI-1/PMI-2 launcher tests run real mpiexec.hydra; iproute2 and
# nftables: the netns test cluster (scripts/netns-cluster).
DEB_PACKAGES := mpich iproute2 nftables
deps:
	@scripts/install-deps.sh $(DEB_PACKAGES)

## test: install dependencies, then lint and run every test
test: deps lint unit
	@echo "make test: all suites passed"

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit:
	$(CARGO) test --workspace --release

## fuzz: long fuzzing run of the packet decoder (needs nightly; see README)
fuzz:
	cd fuzz && $(CARGO) +nightly fuzz run decode -- -max_total_time=$${FUZZ_SECONDS:-600}

clean:
	$(CARGO) clean
