//! fibers suite, competitor `may`: one may coroutine per unit (stackful coroutines, may 0.3),
//! on one may worker thread (`may::config().set_workers(1)`: the comparable of one spindle
//! worker, GOMAXPROCS=1 and tokio's current_thread), other settings default (32 KiB stacks,
//! a pool of 1,000 cached coroutines, workers pinned). The benchmark body runs in a coroutine
//! of its own on that worker, as spindle's `block_on` fiber; a switch is
//! `may::coroutine::yield_now()`. Same structure as the tokio and spindle competitors.
//!
//! Usage: `may-fibers [--quick]`

#[path = "../../fibers/src/harness.rs"]
mod harness;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use may::coroutine::{yield_now, JoinHandle};
use may::sync::SyncFlag;

use harness::{rss_bytes, Alloc, Competitor};

/// Spawns a coroutine on may's scheduler.
fn spawn<F: FnOnce() + Send + 'static>(f: F) -> JoinHandle<()> {
    // SAFETY: may's `spawn` is unsafe because a coroutine that reads thread-local storage may
    // see another thread's values after it migrates; these closures touch no thread-locals
    // (only Arcs, atomics and may's own primitives), and there is a single worker.
    unsafe { may::coroutine::spawn(f) }
}

/// Runs `f` in a coroutine and waits for it on this (non-coroutine) thread.
fn in_coroutine<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    // SAFETY: as in `spawn`: the body touches no thread-locals of its own.
    let h = unsafe { may::coroutine::spawn(f) };
    h.join().expect("benchmark coroutine panicked")
}

fn join_all(handles: Vec<JoinHandle<()>>) {
    for h in handles {
        h.join().expect("unit coroutine panicked");
    }
}

fn yielding(switches: usize) -> impl FnOnce() + Send + 'static {
    move || {
        for _ in 0..switches {
            yield_now();
        }
    }
}

struct May;

impl Competitor for May {
    const NAME: &'static str = "may";

    fn alloc(&mut self, units: usize, switches: usize) -> Alloc {
        in_coroutine(move || {
            let parked = Arc::new(AtomicUsize::new(0));
            let all_parked = Arc::new(SyncFlag::new());
            let release = Arc::new(SyncFlag::new());
            let mut handles = Vec::with_capacity(units);
            let rss0 = rss_bytes();
            let t0 = Instant::now();
            for _ in 0..units {
                let (parked, all_parked, release) = (parked.clone(), all_parked.clone(), release.clone());
                handles.push(spawn(move || {
                    for _ in 0..switches {
                        yield_now();
                    }
                    if parked.fetch_add(1, Ordering::AcqRel) + 1 == units {
                        all_parked.fire();
                    }
                    release.wait();
                }));
            }
            all_parked.wait();
            let to_peak = t0.elapsed();
            let rss1 = rss_bytes();
            let t1 = Instant::now();
            release.fire();
            join_all(handles);
            Alloc { elapsed: to_peak + t1.elapsed(), rss_growth: rss1 - rss0 }
        })
    }

    fn switch(&mut self, switches: usize) -> Duration {
        in_coroutine(move || {
            let t0 = Instant::now();
            let handles = (0..2).map(|_| spawn(yielding(switches))).collect();
            join_all(handles);
            t0.elapsed()
        })
    }

    fn rounds(&mut self, units: usize, switches: usize, repeats: usize) -> Vec<Duration> {
        in_coroutine(move || {
            let mut reps = Vec::with_capacity(repeats);
            for _ in 0..repeats {
                let t0 = Instant::now();
                let handles = (0..units).map(|_| spawn(yielding(switches))).collect();
                join_all(handles);
                reps.push(t0.elapsed());
            }
            reps
        })
    }
}

fn main() {
    let sizes = harness::sizes_from_args("may-fibers [--quick]");
    may::config().set_workers(1);
    harness::run(May, sizes);
}
