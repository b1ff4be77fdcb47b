//! The fibers suite's `warm` case as a stand-alone program, for cache simulation: `ROUNDS`
//! rounds of `N` fibers that yield once and finish, all spawned before any runs, then joined
//! (so all `N` stacks are in use at once). Run it under `valgrind --tool=cachegrind
//! --cache-sim=yes` to see the data-cache misses of a round; prints the time of the last
//! round per fiber.
//!
//! Usage: `warm_rounds [N] [ROUNDS]` (defaults 10,000 and 10).

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let last = rt.block_on(move || {
        let mut last = 0.0;
        for _ in 0..rounds {
            let t0 = Instant::now();
            let handles: Vec<_> = (0..n).map(|_| spindle::spawn(spindle::yield_now)).collect();
            for h in handles {
                h.join().unwrap();
            }
            last = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
        }
        last
    });
    println!("last round: {last:.3} us per fiber");
}
