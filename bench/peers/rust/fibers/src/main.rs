//! The `fibers` suite for the Rust competitors: `rust-thread` (std::thread), `tokio`
//! (tasks on a current_thread runtime) and `spindle` (fibers on one worker, behind the
//! cargo feature `spindle`).
//!
//! Usage: `fibers-peer --competitor rust-thread|tokio|spindle [--quick]`
//!
//! Prints one JSON line per measurement (see bench/peers/README.md). The four cases are
//! the same for every language of the suite (shapes of seed 003):
//! - `alloc`: N units, each switching twice (yield) and then suspended on a release signal.
//!   Timed: creation until the last one has suspended, plus release until all are joined.
//!   Memory: resident set with all N suspended minus the resident set before creating them.
//! - `switch`: 2 units, each yielding `switches` times: every yield hands control to the
//!   other one (2 × `switches` switches in all).
//! - `warm`: `repeats` rounds of N units that yield once and finish, joined: the first
//!   round against the last one (per unit).
//! - `throughput`: `repeats` rounds of `units` units that each yield `switches` times,
//!   joined; the fastest round counts.

#[cfg(feature = "spindle")]
mod spindle_impl;
mod thread_impl;
mod tokio_impl;

use std::time::Duration;

pub const SUITE: &str = "fibers";

/// The sizes of every case; `--quick` shrinks them.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    pub alloc_units: usize,
    pub alloc_switches: usize,
    pub switches: usize,
    pub warm_units: usize,
    pub warm_switches: usize,
    pub warm_repeats: usize,
    pub tp_units: usize,
    pub tp_switches: usize,
    pub tp_repeats: usize,
}

impl Sizes {
    pub const FULL: Sizes = Sizes {
        alloc_units: 10_000,
        alloc_switches: 2,
        switches: 10_000,
        warm_units: 10_000,
        warm_switches: 1,
        warm_repeats: 10,
        tp_units: 1_000,
        tp_switches: 100,
        tp_repeats: 10,
    };
    pub const QUICK: Sizes = Sizes {
        alloc_units: 1_000,
        alloc_switches: 2,
        switches: 1_000,
        warm_units: 1_000,
        warm_switches: 1,
        warm_repeats: 3,
        tp_units: 100,
        tp_switches: 100,
        tp_repeats: 3,
    };
}

/// What the `alloc` case measured.
pub struct Alloc {
    /// Creation until the last unit has suspended, plus release until the last is joined
    /// (the resident-set reading in between is not timed).
    pub elapsed: Duration,
    /// Resident set with every unit suspended minus the resident set just before creating.
    pub rss_growth: i64,
}

/// One competitor: each function runs one case and returns its raw timings.
pub trait Competitor {
    const NAME: &'static str;
    /// `units` units, each yielding `switches` times and then suspended until released.
    fn alloc(&mut self, units: usize, switches: usize) -> Alloc;
    /// Elapsed time of the 2-unit ping-pong (2 × `switches` switches in all).
    fn switch(&mut self, switches: usize) -> Duration;
    /// Elapsed time of each of `repeats` rounds: create `units`, each yielding `switches`
    /// times and then finishing, and join them all.
    fn rounds(&mut self, units: usize, switches: usize, repeats: usize) -> Vec<Duration>;
}

/// Resident set size in bytes: `/proc/self/statm` field 2 × page size.
pub fn rss_bytes() -> i64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let resident: i64 =
        statm.split_whitespace().nth(1).and_then(|f| f.parse().ok()).expect("parse /proc/self/statm");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as i64;
    resident * page
}

fn emit(competitor: &str, case: &str, metric: &str, value: f64, unit: &str) {
    // Plain decimals rounded to 4 places (never NaN/inf: every divisor is a non-zero size).
    let value = (value * 1e4).round() / 1e4;
    println!(
        "{{\"suite\":\"{SUITE}\",\"case\":\"{case}\",\"competitor\":\"{competitor}\",\
         \"metric\":\"{metric}\",\"value\":{value},\"unit\":\"{unit}\"}}"
    );
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn run<C: Competitor>(mut c: C, sizes: Sizes) {
    let name = C::NAME;

    let a = c.alloc(sizes.alloc_units, sizes.alloc_switches);
    let n = sizes.alloc_units as f64;
    emit(name, "alloc", "us_per_unit", us(a.elapsed) / n, "us");
    emit(name, "alloc", "bytes_per_unit", a.rss_growth as f64 / n, "bytes");

    let elapsed = c.switch(sizes.switches);
    let total = 2.0 * sizes.switches as f64;
    emit(name, "switch", "us_per_switch", us(elapsed) / total, "us");
    emit(name, "switch", "switches_per_s", total / elapsed.as_secs_f64(), "switches/s");

    let reps = c.rounds(sizes.warm_units, sizes.warm_switches, sizes.warm_repeats);
    let n = sizes.warm_units as f64;
    emit(name, "warm", "first_alloc_us", us(reps[0]) / n, "us");
    emit(name, "warm", "last_alloc_us", us(*reps.last().unwrap()) / n, "us");

    let reps = c.rounds(sizes.tp_units, sizes.tp_switches, sizes.tp_repeats);
    let best = reps.iter().min().unwrap();
    emit(name, "throughput", "total_ms", best.as_secs_f64() * 1e3, "ms");
}

fn usage() -> ! {
    eprintln!("usage: fibers-peer --competitor rust-thread|tokio|spindle [--quick]");
    std::process::exit(2);
}

fn main() {
    let mut competitor = None;
    let mut sizes = Sizes::FULL;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--competitor" => competitor = Some(args.next().unwrap_or_else(|| usage())),
            "--quick" => sizes = Sizes::QUICK,
            _ => usage(),
        }
    }
    match competitor.as_deref() {
        Some("rust-thread") => run(thread_impl::Threads, sizes),
        Some("tokio") => run(tokio_impl::Tokio::new(), sizes),
        #[cfg(feature = "spindle")]
        Some("spindle") => run(spindle_impl::Spindle::new(), sizes),
        #[cfg(not(feature = "spindle"))]
        Some("spindle") => {
            eprintln!("fibers-peer was built without the `spindle` feature");
            std::process::exit(2);
        }
        _ => usage(),
    }
}
