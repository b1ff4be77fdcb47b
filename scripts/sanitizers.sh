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
#   quarantine (and TSan's shadow) make meaningless. (an_idle_worker_gives_back_its_free_stacks_pages
#   runs, so that the idle trim's `madvise` is checked, but skips its resident-memory count
#   under `cfg(spindle_asan)`/`cfg(spindle_tsan)` for the same reason.)
# - faults_outside_fiber_guards_reach_the_previous_handler: both sanitizers install their own
#   SIGSEGV handler and report the deliberate null read as an error, instead of the default
#   action the test expects from "the previous handler".
# - Under TSan only, the tests that send themselves a signal (signal_wait.rs, all but the one
#   that sends none): TSan runs an asynchronous signal's handler only when the thread the kernel
#   picked next enters a call TSan intercepts. A thread parked in std's futex wait (a raw
#   `syscall`, not intercepted) never does, so the handler, and with it the delivery, waits
#   forever: the run hung in CI at a_task_awaits_sigusr1_and_every_listener_sees_it (a backtrace
#   showed every thread asleep and the dispatcher never woken). ASan runs them.
# - Under TSan only, a_held_worker_hands_its_unstarted_fibers_to_the_others...: the safety
#   net's take-over of a held worker's run queue is ordered by membarrier(2), which TSan does
#   not model (it would report a race), so the take-over is off in TSan builds
#   (sched/worker/handoff.rs) and the test, which needs it, would wait forever. ASan runs it.
#
# TSan runs with scripts/tsan.supp: races that a dependency accepts by design (crossbeam-deque's
# steal), each entry with its reason.
#
# Each run is bounded (SANITIZER_TIMEOUT seconds, default 2400): a hang fails the step with a
# message instead of eating CI's time. The signal is KILL, as a test binary that listens for
# SIGTERM (signal_wait.rs) does not end on TERM.
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
    local limit=${SANITIZER_TIMEOUT:-2400} rc=0
    RUSTFLAGS="-Zsanitizer=$name --cfg $cfg" RUSTDOCFLAGS="-Zsanitizer=$name" \
        timeout -s KILL "$limit" cargo +nightly test -Zbuild-std --target "$target" -p spindle --target-dir "target/$name" --tests --no-fail-fast \
        -- --skip random_order_exits --skip faults_outside_fiber_guards_reach_the_previous_handler "$@" \
        || rc=$?
    if [ "$rc" = 137 ]; then
        echo "sanitizers: the $name run did not finish within ${limit}s (a hang?): killed" >&2
    fi
    return "$rc"
}

case $which in
    asan | all) run address spindle_asan ;;&
    tsan | all) TSAN_OPTIONS=${TSAN_OPTIONS:-"halt_on_error=1 suppressions=$PWD/scripts/tsan.supp"} \
        run thread spindle_tsan \
        --skip sighup --skip sigusr1 --skip sigint --skip sigterm --skip a_signal_triggers \
        --skip a_held_worker_hands_its_unstarted_fibers ;;
    asan | tsan | all) ;;
    *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;;
esac
