//! The tcp suite's harness, shared by every Rust competitor's binary (`tcp-peer`, and
//! `may-tcp` and `monoio-tcp`, which include this file with `#[path]`): the counts of each
//! case, the JSON lines, the resident-set reading and the blocking-style case driver.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Instant;

pub const MSG: usize = 64;
pub const CONC_UNITS: usize = 100;
pub const FD_RESERVE: u64 = 100;
pub const IDLE_STACK: usize = 64 * 1024;

pub struct Counts {
    pub bind: (usize, usize),
    pub bind_concurrent: (usize, usize),
    pub accept_connect: (usize, usize),
    pub pingpong: (usize, usize),
    pub idle_conns: usize,
}

pub struct Opts {
    pub competitor: &'static str,
    pub only: Option<String>,
    pub counts: Counts,
    pub fd_limit: u64,
}

impl Opts {
    pub fn want(&self, case: &str) -> bool {
        self.only.as_deref().is_none_or(|o| o == case)
    }
}

pub fn emit(o: &Opts, case: &str, metric: &str, value: f64, unit: &str) {
    println!(
        "{{\"suite\":\"tcp\",\"case\":\"{case}\",\"competitor\":\"{}\",\"metric\":\"{metric}\",\"value\":{value:.1},\"unit\":\"{unit}\"}}",
        o.competitor
    );
}

pub fn ns_per_op(t0: Instant, n: usize) -> f64 {
    t0.elapsed().as_nanos() as f64 / n as f64
}

pub fn rss_bytes() -> i64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: i64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as i64
}

pub fn raise_nofile() -> u64 {
    // SAFETY: `rl` is a valid rlimit that outlives both calls, which only read or write it.
    unsafe {
        let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl), 0);
        rl.rlim_cur = rl.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &rl), 0);
        rl.rlim_cur
    }
}

pub fn idle_count(o: &Opts) -> usize {
    let want = o.counts.idle_conns;
    if 2 * want as u64 + FD_RESERVE > o.fd_limit {
        let n = ((o.fd_limit - FD_RESERVE) / 2) as usize;
        eprintln!("idle_conns: RLIMIT_NOFILE is {}, using {n} connections instead of {want}", o.fd_limit);
        n
    } else {
        want
    }
}

pub fn loopback0() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

pub fn message() -> [u8; MSG] {
    let mut m = [0u8; MSG];
    for (i, b) in m.iter_mut().enumerate() {
        *b = b"0123456789abcdef"[i % 16];
    }
    m
}

// ---------------------------------------------------------------- blocking-style driver

/// The cases of a competitor written in blocking style (std threads, spindle fibers).
pub struct BlockingCases {
    pub bind_loop: fn(usize),
    pub bind_concurrent: fn(usize),
    pub accept_connect: fn(&Opts, (usize, usize)),
    pub pingpong: fn(&Opts, (usize, usize)),
    pub idle_conns: fn(&Opts),
}

/// Runs the selected cases in the suite's order, with their warm-ups.
pub fn run_blocking(o: &Opts, cases: &BlockingCases) {
    let c = &o.counts;
    if o.want("idle_conns") {
        (cases.idle_conns)(o);
    }
    if o.want("bind") {
        let (warm, n) = c.bind;
        (cases.bind_loop)(warm);
        let t0 = Instant::now();
        (cases.bind_loop)(n);
        emit(o, "bind", "ns_per_op", ns_per_op(t0, n), "ns");
    }
    if o.want("bind_concurrent") {
        let (warm, n) = c.bind_concurrent;
        let n = n / CONC_UNITS * CONC_UNITS;
        (cases.bind_concurrent)(warm);
        let t0 = Instant::now();
        (cases.bind_concurrent)(n);
        emit(o, "bind_concurrent", "ns_per_op", ns_per_op(t0, n), "ns");
    }
    if o.want("accept_connect") {
        (cases.accept_connect)(o, c.accept_connect);
    }
    if o.want("pingpong") {
        (cases.pingpong)(o, c.pingpong);
    }
}

/// The counts of every case: full, or `--quick`'s (see bench/peers/README.md).
pub fn counts(quick: bool) -> Counts {
    let q = |small: usize, full: usize| if quick { small } else { full };
    Counts {
        bind: (q(100, 1000), q(2000, 20000)),
        bind_concurrent: (q(1000, 2000), q(2000, 20000)),
        accept_connect: (q(50, 500), q(500, 5000)),
        pingpong: (q(100, 1000), q(2000, 20000)),
        idle_conns: q(1000, 10000),
    }
}

/// Options of the single-competitor binaries: `[--quick] [--case NAME]`.
pub fn opts_from_args(competitor: &'static str, usage: &str) -> &'static Opts {
    let mut quick = false;
    let mut only = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--case" => only = Some(args.next().expect("--case NAME")),
            _ => {
                eprintln!("usage: {usage}");
                std::process::exit(2);
            }
        }
    }
    let fd_limit = raise_nofile();
    Box::leak(Box::new(Opts { competitor, only, counts: counts(quick), fd_limit }))
}
