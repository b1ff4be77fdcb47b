//! What `std::fs::read` costs in fibers with spindle's `hook` feature, and whether it stalls
//! the other fibers of its worker (the figures are for `docs/perf/hook.md`):
//!
//! 1,000 fibers on 2 workers each read a 1 MiB file (100 files, each read by 10 fibers) while
//! a ticker fiber sleeps 1 ms in a loop and records how late each tick wakes. Kinds:
//!
//! - `std (hook)`: `std::fs::read`, hooked: the reads of cached pages happen on the worker
//!   without waiting (`RWF_NOWAIT`), the rest, and the `open`, on the blocking pool;
//! - `spindle::fs`: `spindle::fs::read`, every call on the blocking pool;
//! - `idle`: the ticker alone, for its lateness without readers.
//!
//! Each kind runs with the files in the page cache (`warm`) and, when this process may drop
//! the kernel's caches (root: `/proc/sys/vm/drop_caches`), after dropping them (`cold`).
//!
//! `cargo run --release -p spindle-perf --features hook --bin hook_files [runs] [file_threads]`
//! prints one line per case and kind: the batch's wall time and the ticker's worst lateness,
//! median and range over the runs (default 7), with the runtime's file pool at its default
//! size or at `file_threads`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FILES: usize = 100;
const READERS: usize = 1000;
const SIZE: usize = 1 << 20;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Hooked,
    Pool,
    Idle,
}

/// Writes the files once; returns their paths.
fn make_files(dir: &Path) -> Vec<PathBuf> {
    (0..FILES)
        .map(|i| {
            let path = dir.join(format!("f{i}"));
            let data: Vec<u8> = (0..SIZE).map(|b| (b % 251) as u8 ^ i as u8).collect();
            std::fs::write(&path, data).unwrap();
            path
        })
        .collect()
}

/// Drops the kernel's page cache, if this process may; false if not.
fn drop_caches() -> bool {
    // SAFETY: sync takes no arguments.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "1").is_ok()
}

/// One batch: the wall time of the 1,000 reads and the ticker's worst lateness.
fn batch(files: &[PathBuf], kind: Kind, file_threads: Option<usize>) -> (Duration, Duration) {
    let mut builder = spindle::Builder::new();
    builder.worker_threads(2);
    if let Some(n) = file_threads {
        builder.max_file_threads(n);
    }
    let rt = builder.build().unwrap();
    let files = files.to_vec();
    let out = rt.block_on(move || {
        let stop = Arc::new(AtomicBool::new(false));
        let ticking = stop.clone();
        let ticker = spindle::spawn(move || {
            let mut worst = Duration::ZERO;
            while !ticking.load(Ordering::Relaxed) {
                let start = Instant::now();
                spindle::time::sleep(Duration::from_millis(1));
                worst = worst.max(start.elapsed().saturating_sub(Duration::from_millis(1)));
            }
            worst
        });
        let start = Instant::now();
        if kind == Kind::Idle {
            spindle::time::sleep(Duration::from_millis(200));
        } else {
            let readers: Vec<_> = (0..READERS)
                .map(|i| {
                    let path = files[i % FILES].clone();
                    spindle::spawn(move || {
                        let data = match kind {
                            Kind::Hooked => std::fs::read(&path).unwrap(),
                            _ => spindle::fs::read(&path).unwrap(),
                        };
                        assert_eq!(data.len(), SIZE);
                    })
                })
                .collect();
            readers.into_iter().for_each(|r| r.join().unwrap());
        }
        let took = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        (took, ticker.join().unwrap())
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    out
}

fn report(case: &str, kind: &str, mut runs: Vec<(Duration, Duration)>) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    runs.sort_by_key(|r| r.0);
    let (lo, mid, hi) = (runs[0].0, runs[runs.len() / 2].0, runs[runs.len() - 1].0);
    let mut late: Vec<_> = runs.iter().map(|r| r.1).collect();
    late.sort();
    println!(
        "{case:5} {kind:12} time median {:7.1} ms ({:.1}..{:.1})  worst tick lateness median {:6.2} ms ({:.2}..{:.2})  ({} runs)",
        ms(mid),
        ms(lo),
        ms(hi),
        ms(late[late.len() / 2]),
        ms(late[0]),
        ms(late[late.len() - 1]),
        runs.len()
    );
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(7);
    let threads: Option<usize> = std::env::args().nth(2).and_then(|a| a.parse().ok());
    let dir = std::env::temp_dir().join(format!("spindle-hook-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = make_files(&dir);
    let cold = drop_caches();
    let kinds = [(Kind::Hooked, "std (hook)"), (Kind::Pool, "spindle::fs"), (Kind::Idle, "idle")];
    for (case, drop_first) in [("warm", false), ("cold", true)] {
        if drop_first && !cold {
            println!("cold  (skipped: /proc/sys/vm/drop_caches is not writable by this process)");
            continue;
        }
        // Warm-up, then the kinds interleaved run by run.
        batch(&files, Kind::Hooked, threads);
        batch(&files, Kind::Pool, threads);
        let mut runs: Vec<Vec<(Duration, Duration)>> = vec![Vec::new(); kinds.len()];
        for _ in 0..n {
            for (i, (kind, _)) in kinds.iter().enumerate() {
                if drop_first {
                    drop_caches();
                }
                runs[i].push(batch(&files, *kind, threads));
            }
        }
        for ((_, name), runs) in kinds.iter().zip(runs) {
            report(case, name, runs);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
