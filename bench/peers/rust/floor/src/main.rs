//! fibers suite, floor row `floor-raw-switch`: the cost of a bare stackful context switch, the
//! limit under any fiber runtime's `switch` case, not a competitor (the report marks it and
//! the summary leaves it out of the ranking).
//!
//! One corosensei coroutine (its default stack) whose body suspends in a loop; the main thread
//! resumes it `switches` times. Each resume is one switch onto the coroutine's stack and each
//! suspend one switch back, so a run makes 2 × `switches` switches, as the two yielding units
//! of the `switch` case do. No scheduler, run queue, timer or I/O check: registers saved and
//! restored, stack pointer swapped. Only the `switch` case is printed.
//!
//! Usage: `switch-floor [--quick]`

#[path = "../../fibers/src/harness.rs"]
mod harness;

use std::hint::black_box;
use std::time::{Duration, Instant};

use corosensei::{Coroutine, CoroutineResult};

const NAME: &str = "floor-raw-switch";

/// Elapsed time of `switches` resume/suspend round trips (2 × `switches` switches).
fn switch(switches: usize) -> Duration {
    let mut co: Coroutine<usize, usize, ()> = Coroutine::new(|yielder, mut v: usize| loop {
        v = yielder.suspend(black_box(v) + 1);
    });
    let t0 = Instant::now();
    let mut v = 0;
    for _ in 0..switches {
        match co.resume(v) {
            CoroutineResult::Yield(next) => v = next,
            CoroutineResult::Return(()) => unreachable!("the coroutine never returns"),
        }
    }
    let elapsed = t0.elapsed();
    assert_eq!(v, switches, "every resume ran the coroutine once");
    // The coroutine is suspended forever: corosensei unwinds its stack on drop.
    drop(co);
    elapsed
}

fn main() {
    let sizes = harness::sizes_from_args("switch-floor [--quick]");
    // Warm-up (stack pages faulted in, branch predictors trained), then the measured run,
    // the same count as every competitor's switch case.
    switch(sizes.switches);
    let elapsed = switch(sizes.switches);
    let total = 2.0 * sizes.switches as f64;
    harness::emit(NAME, "switch", "us_per_switch", harness::us(elapsed) / total, "us");
    harness::emit(NAME, "switch", "switches_per_s", total / elapsed.as_secs_f64(), "switches/s");
}
