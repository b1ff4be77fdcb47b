//! `N` spawn + 2 yields + join from a warm pool, the loop of the `spawn` benchmark, for
//! instruction counts: run it under `valgrind --tool=callgrind` with two values of `N` and
//! divide the difference in instructions by the difference in `N`
//! (`scripts/spawn_instructions.sh` does that).

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let rt = spindle::Runtime::new().unwrap();
    rt.block_on(move || {
        for _ in 0..n {
            let h = spindle::spawn(|| {
                spindle::yield_now();
                spindle::yield_now();
            });
            h.join().unwrap();
        }
    });
}
