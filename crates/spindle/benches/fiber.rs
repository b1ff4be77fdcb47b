//! Fiber micro-benchmarks, each beside `std::thread` doing the same work:
//!
//! - `switch/raw`: one context-switch round trip (resume a context that suspends straight
//!   back), outside the scheduler; the thread version is a round trip between two threads
//!   (unpark the other, park until it unparks us).
//! - `spawn`: spawn a unit that switches twice (yields twice), then join it; the thread version
//!   spawns and joins a thread that yields twice.
//! - `pingpong`: two units hand control to each other through the scheduler; one iteration is
//!   one hand-off (`yield_now` between two fibers; park/unpark between two threads).
//!
//! Run with `cargo bench -p spindle --bench fiber`. Timings come from criterion's statistics;
//! nothing here asserts on them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

fn raw_switch(c: &mut Criterion) {
    let mut group = c.benchmark_group("switch");
    group.bench_function("raw/spindle", |b| {
        b.iter_custom(|iters| spindle::__private::raw_switch_round_trips(iters).unwrap())
    });
    group.bench_function("raw/std_thread", |b| b.iter_custom(thread_round_trips));
    group.finish();
}

/// `iters` round trips between this thread and a partner: each side unparks the other and
/// parks until its turn comes back (a shared counter says whose turn it is).
fn thread_round_trips(iters: u64) -> Duration {
    let turn = Arc::new(AtomicU64::new(0));
    let main = thread::current();
    let partner_turn = turn.clone();
    let partner = thread::spawn(move || {
        for i in 0..iters {
            while partner_turn.load(Ordering::Acquire) != 2 * i + 1 {
                thread::park();
            }
            partner_turn.store(2 * i + 2, Ordering::Release);
            main.unpark();
        }
    });
    let start = Instant::now();
    for i in 0..iters {
        turn.store(2 * i + 1, Ordering::Release);
        partner.thread().unpark();
        while turn.load(Ordering::Acquire) != 2 * i + 2 {
            thread::park();
        }
    }
    let elapsed = start.elapsed();
    partner.join().unwrap();
    elapsed
}

fn spawn(c: &mut Criterion) {
    let mut group = c.benchmark_group("spawn");
    let rt = spindle::Runtime::new().unwrap();
    group.bench_function("spawn_2_switches_join/spindle", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let start = Instant::now();
                for _ in 0..iters {
                    let h = spindle::spawn(|| {
                        spindle::yield_now();
                        spindle::yield_now();
                    });
                    h.join().unwrap();
                }
                start.elapsed()
            })
        })
    });
    group.bench_function("spawn_2_switches_join/std_thread", |b| {
        b.iter(|| {
            thread::spawn(|| {
                thread::yield_now();
                thread::yield_now();
            })
            .join()
            .unwrap()
        })
    });
    group.finish();
}

fn pingpong(c: &mut Criterion) {
    let mut group = c.benchmark_group("pingpong");
    let rt = spindle::Runtime::new().unwrap();
    group.bench_function("yield_handoff/spindle", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                // Two fibers alternate: every yield hands control to the other one.
                let rounds = iters.div_ceil(2);
                let done = Arc::new(AtomicBool::new(false));
                let other = {
                    let done = done.clone();
                    spindle::spawn(move || {
                        while !done.load(Ordering::Relaxed) {
                            spindle::yield_now();
                        }
                    })
                };
                spindle::yield_now(); // let the partner start
                let start = Instant::now();
                for _ in 0..rounds {
                    spindle::yield_now();
                }
                let elapsed = start.elapsed();
                done.store(true, Ordering::Relaxed);
                other.join().unwrap();
                // `rounds` yields of ours and as many of the partner's: 2 hand-offs each.
                elapsed.mul_f64(iters as f64 / (2 * rounds) as f64)
            })
        })
    });
    group.bench_function("handoff/std_thread", |b| {
        // A hand-off is half a round trip.
        b.iter_custom(|iters| {
            thread_round_trips(iters.div_ceil(2)).mul_f64(iters as f64 / iters.div_ceil(2) as f64 / 2.0)
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = raw_switch, spawn, pingpong
}
criterion_main!(benches);
