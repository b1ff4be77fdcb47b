#!/usr/bin/env bash
# Instructions per fiber spawn + run + join, measured with callgrind as the difference between
# two runs, so that process start-up and runtime build cancel out.
#
#   scripts/spawn_instructions.sh [small_n] [large_n]
#       spawn + 2 yields + join from a fiber (perf/src/bin/spawn_join_count.rs)
#   scripts/spawn_instructions.sh --now [named] [small_n] [large_n]
#       spawn_now from an async task + await of the JoinHandle, the fiber not parking
#       (perf/src/bin/spawn_now_count.rs; `named` adds a per-spawn name and stack size, as spindle-http)
#   scripts/spawn_instructions.sh --task [small_n] [large_n]
#       spawn_async from an async task + await of the task's JoinHandle (perf/src/bin/task_spawn_count.rs)
set -euo pipefail
harness=spawn_join_count
mode=
if [ "${1:-}" = "--task" ]; then
    harness=task_spawn_count
    shift
elif [ "${1:-}" = "--now" ]; then
    harness=spawn_now_count
    shift
    if [ "${1:-}" = "named" ]; then
        mode=named
        shift
    fi
fi
small=${1:-1000}
large=${2:-21000}
cargo build -q --release -p spindle-perf --bin "$harness"
bin="${CARGO_TARGET_DIR:-target}/release/$harness"
count() {
    local out
    out=$(mktemp)
    # shellcheck disable=SC2086 # $mode is empty or one word
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" $mode 2>&1 | grep -o 'Collected : [0-9]*' | grep -o '[0-9]*'
    rm -f "$out"
}
a=$(count "$small")
b=$(count "$large")
echo "instructions per $harness${mode:+ ($mode)}: $(( (b - a) / (large - small) ))"
