//! Times the release of many fiber stacks: `n` fibers (default 1,000,000) park on one
//! WaitGroup-like gate, are released together, and then the runtime is dropped.
//! `cargo run --release -p spindle-perf --bin stack_release [n]`
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let t0 = Instant::now();
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(move || {
        let parked = Arc::new(AtomicUsize::new(0));
        let mut gates = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        for _ in 0..n {
            let (tx, rx) = spindle::sync::oneshot::<()>();
            gates.push(tx);
            let parked = parked.clone();
            handles.push(spindle::spawn(move || {
                parked.fetch_add(1, Ordering::Relaxed);
                let _ = rx.recv();
            }));
        }
        while parked.load(Ordering::Relaxed) < n {
            spindle::yield_now();
        }
        println!("spawned and parked {n} fibers in {:?}", t0.elapsed());
        let t1 = Instant::now();
        for tx in gates {
            tx.send(()).unwrap();
        }
        for h in handles {
            h.join().unwrap();
        }
        println!("woke, finished and released {n} stacks in {:?}", t1.elapsed());
    });
    let t2 = Instant::now();
    drop(rt);
    println!("dropped the runtime (unmapping the stacks) in {:?}", t2.elapsed());
}
