//! Message ping-pong through wakers: how long one round trip takes when every message wakes
//! the partner that waits for it.
//!
//! - `task/...`: P pairs of `Send` async tasks (`spawn_async`); each pair exchanges M messages
//!   back and forth through two one-value mailboxes (a value slot and a waker, in
//!   `tests/support/mailbox.rs`, shared with the tests). One iteration is
//!   one round trip (ping and pong) of one pair.
//! - `fiber/...`: the same with fibers and spindle's blocking channel (`sync::channel(1)` per
//!   direction): `send` unparks the partner, `recv` parks until the answer comes.
//! - `load16`: 16 more tasks (or fibers) stay runnable all along, each yielding in a loop, so
//!   that a woken partner queued at the back waits behind all of them.
//! - `w1` / `w2`: `worker_threads(1)` / `worker_threads(2)`.
//!
//! Run with `cargo bench -p spindle --bench pingpong`. Timings come from criterion's
//! statistics; nothing here asserts on them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

/// Background yielders per runtime in the `load16` variants.
const LOAD: usize = 16;

#[path = "../tests/support/mailbox.rs"]
mod mailbox;
use mailbox::Mailbox;

fn runtime(workers: usize) -> spindle::Runtime {
    spindle::Builder::new().worker_threads(workers).long_running_budget(None).build().unwrap()
}

/// Runs in a fiber: `pairs` task pairs, `rounds` round trips each, with `load` yielding tasks
/// alongside. Returns the time per round trip times `iters`.
fn task_pingpong(iters: u64, pairs: usize, load: usize) -> Duration {
    let stop = Arc::new(AtomicBool::new(false));
    let background: Vec<_> = (0..load)
        .map(|_| {
            let stop = stop.clone();
            spindle::task::spawn_async(async move {
                while !stop.load(Ordering::Relaxed) {
                    spindle::task::yield_now().await;
                }
            })
        })
        .collect();
    let rounds = iters.div_ceil(pairs as u64);
    let start = Instant::now();
    let mut handles = Vec::with_capacity(2 * pairs);
    for _ in 0..pairs {
        let (to_pong, to_ping) = (Mailbox::default(), Mailbox::default());
        let (a, b) = (to_pong.clone(), to_ping.clone());
        handles.push(spindle::task::spawn_async(async move {
            for i in 0..rounds {
                a.send(i);
                let back = b.recv().await;
                debug_assert_eq!(back, i + 1);
            }
        }));
        handles.push(spindle::task::spawn_async(async move {
            for _ in 0..rounds {
                let v = to_pong.recv().await;
                to_ping.send(v + 1);
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for h in background {
        h.join().unwrap();
    }
    elapsed.mul_f64(iters as f64 / (rounds * pairs as u64) as f64)
}

/// The fiber version of [`task_pingpong`]: blocking channels, `yield_now` loops as load.
fn fiber_pingpong(iters: u64, pairs: usize, load: usize) -> Duration {
    let stop = Arc::new(AtomicBool::new(false));
    let background: Vec<_> = (0..load)
        .map(|_| {
            let stop = stop.clone();
            spindle::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    spindle::yield_now();
                }
            })
        })
        .collect();
    let rounds = iters.div_ceil(pairs as u64);
    let start = Instant::now();
    let mut handles = Vec::with_capacity(2 * pairs);
    for _ in 0..pairs {
        let (ping_tx, ping_rx) = spindle::sync::channel::<u64>(1);
        let (pong_tx, pong_rx) = spindle::sync::channel::<u64>(1);
        handles.push(spindle::spawn(move || {
            for i in 0..rounds {
                ping_tx.send(i).unwrap();
                let back = pong_rx.recv().unwrap();
                debug_assert_eq!(back, i + 1);
            }
        }));
        handles.push(spindle::spawn(move || {
            for _ in 0..rounds {
                let v = ping_rx.recv().unwrap();
                pong_tx.send(v + 1).unwrap();
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for h in background {
        h.join().unwrap();
    }
    elapsed.mul_f64(iters as f64 / (rounds * pairs as u64) as f64)
}

fn pingpong(c: &mut Criterion) {
    for workers in [1, 2] {
        let rt = runtime(workers);
        let mut group = c.benchmark_group(format!("pingpong_w{workers}"));
        for (pairs, load) in [(1, 0), (4, 0), (1, LOAD), (4, LOAD)] {
            let shape = format!("p{pairs}_load{load}");
            group.bench_function(format!("task/{shape}"), |b| {
                b.iter_custom(|iters| rt.block_on(move || task_pingpong(iters, pairs, load)))
            });
            group.bench_function(format!("fiber/{shape}"), |b| {
                b.iter_custom(|iters| rt.block_on(move || fiber_pingpong(iters, pairs, load)))
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = pingpong
}
criterion_main!(benches);
