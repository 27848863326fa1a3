# memwire — top-level entry points. `make demo` and `make test` are the quick start.
SHELL := /bin/bash
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build demo test deps lint unit ctest fuzz fuzz-smoke soak soak-short bench clean

all: build

## build: compile the library, tools and C API in release mode
build:
	$(CARGO) build --release --workspace

## demo: build and run the main job
demo: build
	@scripts/demo.sh

## deps: install what the tests need on a fresh Debian machine (idempotent)
deps:
	@scripts/install-deps.sh

## test: install dependencies, then lint and run every test (with short fuzz and soak runs)
test: deps lint unit fuzz-smoke soak-short
	@echo "make test: all suites passed"

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit:
	$(CARGO) test --workspace --release

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

clean:
	$(CARGO) clean
