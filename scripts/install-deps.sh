#!/usr/bin/env bash
# Installs what `make test` needs on a fresh Debian machine. Idempotent and quiet
# when everything is present; needs root only for apt packages that are missing.
set -euo pipefail

need_apt=()
for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: missing Debian packages ${need_apt[*]} and not root; install them" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# rustfmt and clippy are rustup components; add them when the toolchain lacks them.
if command -v rustup >/dev/null 2>&1; then
    for comp in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$comp" || rustup component add "$comp"
    done
fi

# Fuzzing (`make test` runs a short pass, `make fuzz` a long one) needs a
# nightly toolchain and cargo-fuzz; both are skipped when already present.
if command -v rustup >/dev/null 2>&1; then
    rustup toolchain list 2>/dev/null | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
    # `make miri` (in `make test`): the unsafe modules' tests under Miri.
    for comp in miri rust-src; do
        rustup +nightly component list --installed 2>/dev/null | grep -q "^$comp" || rustup +nightly component add "$comp"
    done
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
