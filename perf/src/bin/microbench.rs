//! Quick per-operation figures for the fiber fast paths, in thread CPU time (so that other
//! load on the machine inflates them less than wall-clock time). The criterion bench
//! (`cargo bench -p spindle --bench fiber`) is the reference; this is for quick iteration:
//! `cargo run --release -p spindle-perf --bin microbench`.

use std::time::Duration;

fn thread_cpu() -> Duration {
    let mut ts = libc_timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec to a valid pointer.
    unsafe {
        clock_gettime(3 /* CLOCK_THREAD_CPUTIME_ID */, &mut ts)
    };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[repr(C)]
struct libc_timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut libc_timespec) -> i32;
}

fn per_op(label: &str, ops: u64, f: impl FnOnce() -> Duration) {
    let d = f();
    println!("{label:<40} {:>8.1} ns/op", d.as_nanos() as f64 / ops as f64);
}

fn main() {
    const N: u64 = 2_000_000;
    for _ in 0..3 {
        per_op("raw switch round trip (wall)", N, || spindle::__private::raw_switch_round_trips(N).unwrap());
        let rt = spindle::Runtime::new().unwrap();
        per_op("yield hand-off between two fibers", 2 * N, || {
            rt.block_on(|| {
                let other = spindle::spawn(|| {
                    for _ in 0..N {
                        spindle::yield_now();
                    }
                });
                spindle::yield_now();
                let t0 = thread_cpu();
                for _ in 0..N - 1 {
                    spindle::yield_now();
                }
                let d = thread_cpu() - t0;
                other.join().unwrap();
                d
            })
        });
        per_op("spawn + 2 yields + join", N / 4, || {
            rt.block_on(|| {
                let t0 = thread_cpu();
                for _ in 0..N / 4 {
                    spindle::spawn(|| {
                        spindle::yield_now();
                        spindle::yield_now();
                    })
                    .join()
                    .unwrap();
                }
                thread_cpu() - t0
            })
        });
    }
}
