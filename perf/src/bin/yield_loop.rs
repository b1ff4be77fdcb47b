//! A fixed workload for instruction counting (`valgrind --tool=callgrind`):
//! `yield_loop pingpong N` (two fibers yielding to each other N times each) or
//! `yield_loop spawn N` (N spawns of a fiber that yields twice, each joined).
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("pingpong").to_owned();
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let rt = spindle::Runtime::new().unwrap();
    rt.block_on(move || match mode.as_str() {
        "pingpong" => {
            let other = spindle::spawn(move || (0..n).for_each(|_| spindle::yield_now()));
            (0..n).for_each(|_| spindle::yield_now());
            other.join().unwrap();
        }
        "spawn" => {
            for _ in 0..n {
                spindle::spawn(|| {
                    spindle::yield_now();
                    spindle::yield_now();
                })
                .join()
                .unwrap();
            }
        }
        other => panic!("unknown mode {other}"),
    });
}
