#!/usr/bin/env bash
# Instructions per spawn + 2 yields + join (example spawn_join_count), measured with callgrind
# as the difference between two runs, so that process start-up and runtime build cancel out.
# Usage: scripts/spawn_instructions.sh [small_n] [large_n]
set -euo pipefail
small=${1:-1000}
large=${2:-21000}
cargo build -q --release -p spindle --example spawn_join_count
bin="${CARGO_TARGET_DIR:-target}/release/examples/spawn_join_count"
count() {
    local out
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" 2>&1 | grep -o 'Collected : [0-9]*' | grep -o '[0-9]*'
    rm -f "$out"
}
a=$(count "$small")
b=$(count "$large")
echo "instructions per spawn+join: $(( (b - a) / (large - small) ))"
