//! What fiber-aware tracing costs on the switch path (feature `tracing`): two fibers handing
//! control to each other with `yield_now`, one iteration a hand-off, as `fiber`'s
//! `pingpong/yield_handoff`:
//!
//! - `no_subscriber`: the feature on, no subscriber ever set (one relaxed load per side);
//! - `subscriber_no_span`: a tracing-subscriber `Registry` set globally, no span entered (each
//!   switch asks it for the current span);
//! - `subscriber_span_entered`: both fibers inside a span of their own (each switch exits it
//!   and enters the other's).
//!
//! The groups run in this order in one process: the subscriber is set by the second (a global
//! default cannot be unset). Run with `cargo bench -p spindle --features tracing --bench tracing`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};

/// `iters` hand-offs between two fibers that each enter a span first when `spans` is set.
fn handoffs(rt: &spindle::Runtime, iters: u64, spans: bool) -> std::time::Duration {
    rt.block_on(move || {
        let rounds = iters.div_ceil(2);
        let done = Arc::new(AtomicBool::new(false));
        let other = {
            let done = done.clone();
            spindle::spawn(move || {
                let _span = spans.then(|| tracing::info_span!("partner").entered());
                while !done.load(Ordering::Relaxed) {
                    spindle::yield_now();
                }
            })
        };
        let _span = spans.then(|| tracing::info_span!("main").entered());
        spindle::yield_now();
        let start = Instant::now();
        for _ in 0..rounds {
            spindle::yield_now();
        }
        let elapsed = start.elapsed();
        done.store(true, Ordering::Relaxed);
        other.join().unwrap();
        elapsed.mul_f64(iters as f64 / (2 * rounds) as f64)
    })
}

fn no_subscriber(c: &mut Criterion) {
    let rt = spindle::Runtime::new().unwrap();
    c.bench_function("tracing/yield_handoff/no_subscriber", |b| {
        b.iter_custom(|iters| handoffs(&rt, iters, false))
    });
}

fn with_subscriber(c: &mut Criterion) {
    tracing::subscriber::set_global_default(tracing_subscriber::registry()).expect("one global subscriber");
    let rt = spindle::Runtime::new().unwrap();
    c.bench_function("tracing/yield_handoff/subscriber_no_span", |b| {
        b.iter_custom(|iters| handoffs(&rt, iters, false))
    });
    c.bench_function("tracing/yield_handoff/subscriber_span_entered", |b| {
        b.iter_custom(|iters| handoffs(&rt, iters, true))
    });
}

criterion_group!(benches, no_subscriber, with_subscriber);
criterion_main!(benches);
