#!/usr/bin/env bash
# Instructions per unary call through spindle-grpc's channels over loopback TCP, server and
# client on one worker (perf/src/bin/grpc_balanced.rs), measured with callgrind as the
# difference between two runs, so that start-up, connection and warm-up cancel out.
#
#   scripts/grpc-balanced-instructions.sh [small_n] [large_n]
#       prints the figure for `remote`, `balanced` and `balanced-retry`
set -euo pipefail
small=${1:-500}
large=${2:-2500}
cargo build -q --release -p spindle-perf --features grpc --bin grpc_balanced
bin="${CARGO_TARGET_DIR:-target}/release/grpc_balanced"
count() {
    local out
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" "$2" 2>&1 | grep -o 'Collected : [0-9]*' | grep -o '[0-9]*'
    rm -f "$out"
}
for mode in remote balanced balanced-retry; do
    a=$(count "$mode" "$small")
    b=$(count "$mode" "$large")
    echo "instructions per call ($mode): $(( (b - a) / (large - small) ))"
done
