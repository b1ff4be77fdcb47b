//! Spawning 100,000 fibers from one worker, each doing a little work (about 5 µs of
//! computation), on 1 worker and on N workers: with M:N the total time should approach the
//! single-worker time divided by the number of workers.
//! `cargo run --release -p spindle-perf --bin spawn_scaling [workers]`

use std::time::{Duration, Instant};

fn work() -> u64 {
    let t = Instant::now();
    let mut x = 0u64;
    while t.elapsed() < Duration::from_micros(5) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    x
}

fn run(workers: usize) -> Duration {
    let rt = spindle::Builder::new().worker_threads(workers).build().unwrap();
    rt.block_on(|| {
        let t = Instant::now();
        let handles: Vec<_> = (0..100_000).map(|_| spindle::spawn(work)).collect();
        let sum = handles.into_iter().map(|h| h.join().unwrap()).fold(0u64, u64::wrapping_add);
        std::hint::black_box(sum);
        t.elapsed()
    })
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2);
    for _ in 0..3 {
        let one = run(1);
        let many = run(n);
        let ideal = one / n as u32;
        println!(
            "1 worker {:>8.1} ms   {n} workers {:>8.1} ms   ideal {:>8.1} ms   ratio to ideal {:.2}",
            one.as_secs_f64() * 1e3,
            many.as_secs_f64() * 1e3,
            ideal.as_secs_f64() * 1e3,
            many.as_secs_f64() / ideal.as_secs_f64()
        );
    }
}
