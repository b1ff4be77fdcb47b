//! The blocking suite's contract, shared by every Rust competitor (`blocking-peer` and
//! `blocking-spindle` include this file with `#[path]`): the cases, the measurement window,
//! the CPU clock, the JSON lines, and one child process per case.
//!
//! A case is a kind of work (`pg_select1`, `pg_sleep`, `redis`, `http`) and a number of
//! clients N (1, 64, 1,000; 1 with `--quick`). Each client has its own connection and loops
//! one operation until told to stop:
//!
//! - `pg_select1_N`: the prepared statement `SELECT 1` (one round trip), its answer checked;
//! - `pg_sleep_N`: the prepared statement `SELECT pg_sleep(0.01)`;
//! - `redis_N`: `SET bench:<client> <64-byte value>` then `GET bench:<client>`, the value
//!   checked (two operations);
//! - `http_N`: `GET /` on the suite's spindle-http hello server, the body read and checked.
//!
//! The servers are the suite's: `BLOCKING_PG_URL`, `BLOCKING_REDIS_URL`, `BLOCKING_HTTP_URL`
//! (a case whose server is not given is left out). The clients connect, then wait for every
//! other one (so that 1,000 connections are not opened while the first clients already load
//! the machine); the start opens them all at once, and the window opens after a warm-up; the operations completed in it and the process's CPU
//! time in it (`CLOCK_PROCESS_CPUTIME_ID`: all threads) give the case's two metrics.
//!
//! Without `--case`, the program runs each case in a child process of its own (itself with
//! `--case NAME`), so that a case that crashes costs only its own figures: its failure is
//! printed as an error line of the protocol (`{"suite","case","competitor","error"}`).

#![allow(dead_code)] // each program uses the parts its modes need

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The SET value of the redis cases.
pub const REDIS_VALUE: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// The hello server's body.
pub const HELLO: &str = "Hello, World!";
/// The statements of the PostgreSQL cases.
pub const SELECT1: &str = "SELECT 1";
pub const SLEEP: &str = "SELECT pg_sleep(0.01)";

/// How long every client may take to connect.
const CONNECT_LIMIT: Duration = Duration::from_secs(120);

/// What a case's clients do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    PgSelect1,
    PgSleep,
    Redis,
    Http,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::PgSelect1, Kind::PgSleep, Kind::Redis, Kind::Http];

    fn prefix(self) -> &'static str {
        match self {
            Kind::PgSelect1 => "pg_select1",
            Kind::PgSleep => "pg_sleep",
            Kind::Redis => "redis",
            Kind::Http => "http",
        }
    }

    /// The throughput metric, its unit, and the CPU metric.
    fn metrics(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Kind::PgSelect1 | Kind::PgSleep => ("queries_per_s", "queries/s", "cpu_us_per_query"),
            Kind::Redis => ("ops_per_s", "ops/s", "cpu_us_per_op"),
            Kind::Http => ("req_per_s", "req/s", "cpu_us_per_req"),
        }
    }

    fn server_var(self) -> &'static str {
        match self {
            Kind::PgSelect1 | Kind::PgSleep => "BLOCKING_PG_URL",
            Kind::Redis => "BLOCKING_REDIS_URL",
            Kind::Http => "BLOCKING_HTTP_URL",
        }
    }
}

/// One case.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub kind: Kind,
    pub clients: usize,
    /// The server's address (from the environment).
    pub url: String,
    pub warmup: Duration,
    pub duration: Duration,
}

/// The cases to run: every kind whose server is given, at each client count.
pub fn cases(quick: bool) -> Vec<Case> {
    let counts: &[usize] = if quick { &[1] } else { &[1, 64, 1000] };
    let (warmup, duration) = if quick {
        (Duration::from_millis(200), Duration::from_millis(500))
    } else {
        (Duration::from_millis(500), Duration::from_secs(2))
    };
    let mut out = Vec::new();
    for kind in Kind::ALL {
        let Ok(url) = std::env::var(kind.server_var()) else { continue };
        for &clients in counts {
            let name = format!("{}_{clients}", kind.prefix());
            out.push(Case { name, kind, clients, url: url.clone(), warmup, duration });
        }
    }
    out
}

/// What the clients of a case share with the measurement.
pub struct Shared {
    /// Set when every client has connected: the loops start.
    pub started: AtomicBool,
    /// A pipe whose read end becomes readable at the start (or at a failure): the sync
    /// clients wait for it with `poll`, which parks a fiber under spindle's hook and blocks a
    /// thread in the kernel, neither spinning.
    gate: [libc::c_int; 2],
    /// Operations completed.
    pub done: AtomicU64,
    /// Clients connected so far.
    pub connected: AtomicUsize,
    /// Set when the clients must stop.
    pub stop: AtomicBool,
    /// The first client failure, which ends the case.
    pub failure: Mutex<Option<String>>,
}

impl Shared {
    pub fn new() -> Shared {
        let mut gate = [-1; 2];
        // SAFETY: `gate` has room for the two descriptors pipe2(2) writes.
        let rc = unsafe { libc::pipe2(gate.as_mut_ptr(), libc::O_CLOEXEC) };
        assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
        Shared {
            started: AtomicBool::new(false),
            gate,
            done: AtomicU64::new(0),
            connected: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
        }
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Records a client's failure (the first is kept) and stops the case.
    pub fn fail(&self, what: String) {
        self.failure.lock().unwrap().get_or_insert(what);
        self.stop.store(true, Ordering::Relaxed);
        self.open_gate();
    }

    /// Starts the clients' loops.
    fn open_gate(&self) {
        self.started.store(true, Ordering::Release);
        let byte = 1u8;
        // SAFETY: write(2) of one byte from a live local to the pipe's write end, open for the
        // life of `self`; a second write (the gate opened twice) only adds a byte.
        unsafe { libc::write(self.gate[1], (&raw const byte).cast(), 1) };
    }

    /// Waits (without spinning) until every client has connected, or the case failed.
    pub fn wait_start(&self) {
        while !self.started.load(Ordering::Acquire) {
            let mut pfd = libc::pollfd { fd: self.gate[0], events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd on the pipe's read end, open for the life of `self`.
            unsafe { libc::poll(&mut pfd, 1, -1) };
        }
    }

    pub fn connected(&self) {
        self.connected.fetch_add(1, Ordering::Relaxed);
    }

    pub fn add(&self, ops: u64) {
        self.done.fetch_add(ops, Ordering::Relaxed);
    }
}

impl Default for Shared {
    fn default() -> Shared {
        Shared::new()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        for fd in self.gate {
            // SAFETY: the pipe's descriptors, owned by `self` and closed once, here.
            unsafe { libc::close(fd) };
        }
    }
}

/// CPU time of this process so far, all threads, in microseconds.
pub fn process_cpu_us() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

/// Raises the soft limit of open descriptors to the hard one (1,000 clients hold several
/// descriptors each).
pub fn raise_nofile() {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `rl` is a valid rlimit that outlives both calls, which only read or write it.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
}

/// The window's figures.
struct Measured {
    per_s: f64,
    cpu_us_per_op: f64,
}

/// Waits for every client to connect, the warm-up, then the measured window; stops the
/// clients.
fn measure(case: &Case, shared: &Shared) -> Result<Measured, String> {
    let failed = || shared.failure.lock().unwrap().clone();
    let deadline = Instant::now() + CONNECT_LIMIT;
    while shared.connected.load(Ordering::Relaxed) < case.clients {
        if let Some(f) = failed() {
            return Err(f);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {} clients connected",
                shared.connected.load(Ordering::Relaxed),
                case.clients
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    shared.open_gate();
    std::thread::sleep(case.warmup);
    let (start, cpu0, before) = (Instant::now(), process_cpu_us(), shared.done.load(Ordering::Relaxed));
    std::thread::sleep(case.duration);
    let (end, cpu1, after) = (Instant::now(), process_cpu_us(), shared.done.load(Ordering::Relaxed));
    shared.stop.store(true, Ordering::Relaxed);
    if let Some(f) = failed() {
        return Err(f);
    }
    let ops = after - before;
    if ops == 0 {
        return Err("no operation completed in the measurement window".into());
    }
    Ok(Measured {
        per_s: ops as f64 / (end - start).as_secs_f64(),
        cpu_us_per_op: (cpu1 - cpu0) / ops as f64,
    })
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Prints the protocol's error line for `case`.
pub fn print_error(competitor: &str, case: &str, error: &str) {
    println!(
        "{{\"suite\":\"blocking\",\"case\":\"{case}\",\"competitor\":\"{competitor}\",\"error\":{}}}",
        json_str(error)
    );
}

/// Runs one case in this process: `clients` (on a thread of its own) starts the case's
/// clients and returns once they all stopped; prints the two measurements, or exits 1.
pub fn run_case(competitor: &str, case: &Case, clients: impl FnOnce(&Case, Arc<Shared>) + Send + 'static) {
    raise_nofile();
    let shared = Arc::new(Shared::default());
    let runner = {
        let (case, shared) = (case.clone(), shared.clone());
        std::thread::spawn(move || clients(&case, shared))
    };
    let measured = measure(case, &shared);
    shared.stop.store(true, Ordering::Relaxed);
    shared.open_gate();
    let joined = runner.join();
    let measured = match (measured, joined) {
        (Ok(m), Ok(())) => m,
        (Err(e), _) => fail(case, &e),
        (Ok(_), Err(_)) => fail(case, "the clients panicked"),
    };
    let (rate, unit, cpu) = case.kind.metrics();
    let line = |metric: &str, value: f64, unit: &str| {
        println!(
            "{{\"suite\":\"blocking\",\"case\":\"{}\",\"competitor\":\"{competitor}\",\"metric\":\"{metric}\",\"value\":{value:.3},\"unit\":\"{unit}\"}}",
            case.name
        );
    };
    line(rate, measured.per_s, unit);
    line(cpu, measured.cpu_us_per_op, "us");
}

fn fail(case: &Case, what: &str) -> ! {
    eprintln!("{}: {what}", case.name);
    std::process::exit(1);
}

/// The command line: `--case NAME` runs one case here; otherwise every case runs in a child
/// process of its own, its lines passed on, a failed one reported with an error line.
pub struct Args {
    pub quick: bool,
    pub case: Option<String>,
    /// Every argument, to pass on to the children.
    pub all: Vec<String>,
}

pub fn args() -> Args {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let quick = all.iter().any(|a| a == "--quick");
    let case = all.iter().position(|a| a == "--case").and_then(|i| all.get(i + 1).cloned());
    Args { quick, case, all }
}

/// Runs `--case NAME` here with `run`, or every case in a child process.
pub fn main(competitor: &str, args: &Args, run: impl FnOnce(&Case)) {
    let cases = cases(args.quick);
    if cases.is_empty() {
        eprintln!("no server given: set BLOCKING_PG_URL, BLOCKING_REDIS_URL or BLOCKING_HTTP_URL");
        std::process::exit(2);
    }
    if let Some(name) = &args.case {
        let Some(case) = cases.iter().find(|c| &c.name == name) else {
            eprintln!("no case {name} (or its server is not given)");
            std::process::exit(2);
        };
        return run(case);
    }
    let exe = std::env::current_exe().expect("this program's path");
    for case in &cases {
        let out = Command::new(&exe)
            .args(&args.all)
            .args(["--case", &case.name])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .output()
            .expect("run a case");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            eprint!("{stderr}");
            // The last line is the case's own account of its failure (`fail`), when it could give one.
            let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("(no message)");
            print_error(competitor, &case.name, &format!("{last} ({})", out.status));
        }
    }
}
