//! The fibers suite's harness, shared by every Rust competitor's binary (`fibers-peer`, and
//! `may-fibers` and `switch-floor`, which include this file with `#[path]`): the sizes of
//! each case, the [`Competitor`] trait, and the JSON lines.

#![allow(dead_code)]

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

pub fn emit(competitor: &str, case: &str, metric: &str, value: f64, unit: &str) {
    // Plain decimals rounded to 4 places (never NaN/inf: every divisor is a non-zero size).
    let value = (value * 1e4).round() / 1e4;
    println!(
        "{{\"suite\":\"{SUITE}\",\"case\":\"{case}\",\"competitor\":\"{competitor}\",\
         \"metric\":\"{metric}\",\"value\":{value},\"unit\":\"{unit}\"}}"
    );
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn run<C: Competitor>(mut c: C, sizes: Sizes) {
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

/// Parses `--quick` (the only argument of the single-competitor binaries).
pub fn sizes_from_args(usage: &str) -> Sizes {
    let mut sizes = Sizes::FULL;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--quick" => sizes = Sizes::QUICK,
            _ => {
                eprintln!("usage: {usage}");
                std::process::exit(2);
            }
        }
    }
    sizes
}
