# Sourced by scripts/bench.sh and scripts/bench-hosts.sh: what both need
# before and while they measure. Defines functions only.

# `bench_need_packages LABEL PKG...`: installs the Debian packages of the
# baselines that are missing when it can (root with apt-get); otherwise says
# which are missing and goes on (those baselines are then absent from the
# results). Exits on a failed install.
bench_need_packages() {
    local label=$1 pkg
    shift
    local missing=()
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "$label: installing ${missing[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
            { echo "$label: apt-get install failed" >&2; exit 1; }
    else
        echo "$label: missing ${missing[*]} and not root on Debian: those baselines (or the plots' font) will be missing" >&2
    fi
}

# `repeat N CMD...`: CMD N times, its output one stream; the status of the
# last failing run (0 when all passed).
repeat() {
    local jobs=$1 status=0 j
    shift
    for ((j = 1; j <= jobs; j++)); do
        "$@" || status=$?
    done
    return $status
}
