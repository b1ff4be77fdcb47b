#!/usr/bin/env bash
# Runs spindle's tests under AddressSanitizer and ThreadSanitizer with the nightly toolchain
# (-Zsanitizer needs a std built with it: -Zbuild-std, from the rust-src component).
# The context switch tells both sanitizers about every fiber switch when built with
# `--cfg spindle_asan` / `--cfg spindle_tsan` (crates/spindle/src/fiber/sanitizer.rs).
#
#   bash scripts/sanitizers.sh          # both
#   bash scripts/sanitizers.sh asan     # or tsan
#
# Tests skipped under a sanitizer, and why:
# - random_order_exits_*: asserts resident-memory bounds, which ASan's shadow memory and
#   quarantine (and TSan's shadow) make meaningless.
# - faults_outside_fiber_guards_reach_the_previous_handler: both sanitizers install their own
#   SIGSEGV handler and report the deliberate null read as an error, instead of the default
#   action the test expects from "the previous handler".
set -euo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
target=$(rustc -vV | sed -n 's/^host: //p')

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "sanitizers: no nightly toolchain (rustup toolchain install nightly)" >&2
    exit 1
fi
rustup component add rust-src --toolchain nightly >/dev/null

run() {
    local name=$1 cfg=$2
    shift 2
    printf '\n==> %s: cargo +nightly test -Zbuild-std -p spindle (-Zsanitizer=%s)\n' "$name" "$name"
    RUSTFLAGS="-Zsanitizer=$name --cfg $cfg" RUSTDOCFLAGS="-Zsanitizer=$name" \
        cargo +nightly test -Zbuild-std --target "$target" -p spindle --target-dir "target/$name" --tests --no-fail-fast \
        -- --skip random_order_exits --skip faults_outside_fiber_guards_reach_the_previous_handler "$@"
}

case $which in
    asan | all) run address spindle_asan ;;&
    tsan | all) TSAN_OPTIONS=${TSAN_OPTIONS:-"halt_on_error=1"} run thread spindle_tsan ;;
    asan | tsan | all) ;;
    *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;;
esac
