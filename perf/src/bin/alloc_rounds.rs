//! The fibers suite's `alloc` case as a stand-alone program, for counting what fresh stacks
//! cost: `N` fibers that yield twice and then park on a `WaitGroup` until all are in, released
//! and joined, in `ROUNDS` rounds (the first maps and faults in fresh stacks, the next ones
//! reuse them). Prints per round the time per fiber up to the peak and for the release, and the
//! resident-set growth per fiber. Run it under `perf stat -e page-faults`, `strace -c -f` or
//! `/usr/bin/time -f %R` (minor faults, the pre-faulted top pages included) to count.
//!
//! Usage: `alloc_rounds [N] [ROUNDS] [STACK_BYTES]` (defaults 10,000, 2 and the runtime's
//! default stack size).

use std::time::Instant;

use spindle::sync::WaitGroup;

/// Resident set size in bytes (`/proc/self/statm`, field 2, times 4 KiB pages).
fn rss_bytes() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: f64 = statm.split_whitespace().nth(1).and_then(|f| f.parse().ok()).expect("parse statm");
    pages * 4096.0
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(2);
    let mut builder = spindle::Builder::new();
    builder.worker_threads(1);
    if let Some(bytes) = args.next().and_then(|s| s.parse().ok()) {
        builder.stack_size(bytes);
    }
    let rt = builder.build().unwrap();
    for round in 0..rounds {
        let (peak, release, growth) = rt.block_on(move || {
            let parked = WaitGroup::new();
            parked.add(n);
            let gate = WaitGroup::new();
            gate.add(1);
            let mut handles = Vec::with_capacity(n);
            let rss0 = rss_bytes();
            let t0 = Instant::now();
            for _ in 0..n {
                let (parked, gate) = (parked.clone(), gate.clone());
                handles.push(spindle::spawn(move || {
                    spindle::yield_now();
                    spindle::yield_now();
                    parked.done();
                    gate.wait();
                }));
            }
            parked.wait();
            let peak = t0.elapsed();
            let growth = rss_bytes() - rss0;
            let t1 = Instant::now();
            gate.done();
            for h in handles {
                h.join().unwrap();
            }
            (peak, t1.elapsed(), growth)
        });
        let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / n as f64;
        println!(
            "round {round}: {:.3} us per fiber ({:.3} to the peak, {:.3} release and join), {:.0} bytes per fiber",
            per(peak) + per(release),
            per(peak),
            per(release),
            growth / n as f64
        );
    }
}
