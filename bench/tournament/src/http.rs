//! The http suite's driver: the harness, not the peer, produces the measurements.
//!
//! One run of one case of one competitor:
//!
//! 1. Pick a free port (bind `127.0.0.1:0`, read the port, close).
//! 2. Start the competitor's `run` with `PORT` and `WORKERS` in its environment (and `$PORT`,
//!    `$WORKERS` substituted in its arguments). For `hello_1w` the server runs under
//!    `taskset -c A` and wrk under `taskset -c B`, the first two CPUs this process may use
//!    ([`pinned_cpus`]: 0 and 1 on an unrestricted machine); `hello_2w` is unpinned. Every competitor is
//!    treated alike.
//! 3. Wait until the port accepts (the server exiting first is a failure), then send one
//!    `GET /` and require `200` and the body `Hello, World!`.
//! 4. Warm up with wrk, then sample the server tree's CPU time, measure with
//!    `wrk -t1 -c64 -d<secs>s --latency`, and sample again.
//! 5. Stop the server: SIGTERM to its process group, SIGKILL after a grace period.
//!
//! The metrics are `req_per_s`, `avg_us`, `p99_us` (from wrk) and `cpu_us_per_req` (server
//! CPU time during the measurement divided by the requests wrk completed). wrk takes whole
//! seconds for `-d`, so durations are whole seconds.
//!
//! The `h2c_*` cases are the same two shapes over HTTP/2 with prior knowledge (h2c), for the
//! competitors whose manifest says `h2c = true`: the server gets `PROTOCOL=h2c` in its
//! environment (it must still answer step 3's HTTP/1.1 check on the same port), and the load
//! comes from h2load instead of wrk: `h2load -t1 -c<connections> -m1 -D<secs>`, so 64
//! connections with one request in flight each, as wrk's. h2load prints no percentiles:
//! `avg_us` and `p99_us` come from its per-request `--log-file` ([`crate::h2load`]).
//!
//! The `client_keepalive` case is not driven here: the competitor's `client` command (manifest
//! `client = [...]`) starts its own server, measures its HTTP client and prints the JSON line
//! (`req_per_s`), as the other suites' peers do ([`mod@crate::run`]).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::manifest::Competitor;
use crate::proc::{self, Failure, Running};
use crate::record::Sample;
use crate::{h2load, procfs, sys, wrk};

/// How wrk drives each server.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// wrk warm-up before each measurement, in seconds (0 skips it).
    pub warmup_s: u64,
    /// The measured wrk run, in seconds.
    pub duration_s: u64,
    /// wrk `-c`.
    pub connections: u32,
    /// wrk `-t`.
    pub threads: u32,
}

impl HttpSettings {
    /// The defaults: 2 s warm-up and 5 s measurement, or 1 s and 1 s in quick mode.
    pub fn new(quick: bool) -> HttpSettings {
        HttpSettings {
            warmup_s: if quick { 1 } else { 2 },
            duration_s: if quick { 1 } else { 5 },
            connections: 64,
            threads: 1,
        }
    }
}

/// The external tools the suite needs, as found on PATH.
#[derive(Debug, Clone, Default)]
pub struct HttpTools {
    /// wrk, required for every case.
    pub wrk: Option<PathBuf>,
    /// taskset, required for the pinned case.
    pub taskset: Option<PathBuf>,
    /// h2load (Debian's nghttp2-client), required for the h2c cases.
    pub h2load: Option<PathBuf>,
}

/// The protocol of a case, and with it the load generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 with keep-alive, loaded by wrk.
    Http1,
    /// HTTP/2 with prior knowledge, loaded by h2load.
    H2c,
    /// No server is driven: the competitor's `client` command measures an HTTP client and
    /// prints its JSON line (`client_keepalive`).
    Client,
}

/// One case of the http suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpCase {
    /// The `case` name.
    pub name: &'static str,
    /// `$WORKERS`.
    pub workers: u32,
    /// Server and wrk pinned to one CPU each ([`pinned_cpus`]).
    pub pinned: bool,
    /// HTTP/1.1 under wrk or h2c under h2load.
    pub protocol: Protocol,
}

/// The cases, in schema order.
pub const CASES: [HttpCase; 5] = [
    HttpCase { name: "hello_1w", workers: 1, pinned: true, protocol: Protocol::Http1 },
    HttpCase { name: "hello_2w", workers: 2, pinned: false, protocol: Protocol::Http1 },
    HttpCase { name: "h2c_1w", workers: 1, pinned: true, protocol: Protocol::H2c },
    HttpCase { name: "h2c_2w", workers: 2, pinned: false, protocol: Protocol::H2c },
    HttpCase { name: "client_keepalive", workers: 1, pinned: false, protocol: Protocol::Client },
];

/// The cases of `cases` that `comp` takes part in: the h2c ones only if it answers h2c.
pub fn cases_for<'a>(cases: &'a [HttpCase], comp: &'a Competitor) -> impl Iterator<Item = &'a HttpCase> + 'a {
    cases.iter().filter(move |c| match c.protocol {
        Protocol::Http1 => true,
        Protocol::H2c => comp.h2c,
        Protocol::Client => comp.client.is_some(),
    })
}

/// How long a server may take to start accepting.
const STARTUP_LIMIT: Duration = Duration::from_secs(60);
/// How long a server has to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// wrk gets this much longer than its duration before it is killed.
const WRK_SLACK: Duration = Duration::from_secs(30);

/// The body the contract requires.
const HELLO: &str = "Hello, World!";

/// Finds a free loopback port by binding port 0.
pub fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// Substitutes `$PORT`/`${PORT}` and `$WORKERS`/`${WORKERS}` in one argument.
pub fn substitute(arg: &str, port: u16, workers: u32) -> String {
    arg.replace("${PORT}", &port.to_string())
        .replace("$PORT", &port.to_string())
        .replace("${WORKERS}", &workers.to_string())
        .replace("$WORKERS", &workers.to_string())
}

/// The CPUs of the pinned case: the server gets the first CPU this process may use and wrk
/// the second (the same one on a one-CPU machine). CPUs 0 and 1 on an unrestricted machine.
pub fn pinned_cpus() -> (usize, usize) {
    let cpus = sys::allowed_cpus();
    match cpus.as_slice() {
        [] => (0, usize::from(thread::available_parallelism().map_or(1, |n| n.get()) > 1)),
        [only] => (*only, *only),
        [server, wrk, ..] => (*server, *wrk),
    }
}

/// Everything one http run needs besides the competitor.
pub struct HttpRun<'a> {
    /// The manifest's directory.
    pub dir: &'a Path,
    /// wrk settings.
    pub settings: &'a HttpSettings,
    /// wrk and taskset.
    pub tools: &'a HttpTools,
    /// Append the competitor's `quick` arguments.
    pub quick: bool,
    /// Environment added to the manifest's (offline settings under `--no-install`).
    pub env: &'a [(String, String)],
}

impl HttpRun<'_> {
    /// Runs one case of `comp` once (steps 1–5 of the module doc).
    pub fn run_case(&self, comp: &Competitor, case: HttpCase) -> Result<Vec<Sample>, Failure> {
        let fail = |what: String| Failure::new(what, String::new());
        let wrk = match case.protocol {
            Protocol::Http1 => {
                self.tools.wrk.as_deref().ok_or_else(|| fail("wrk is not installed".into()))?
            }
            Protocol::H2c => {
                self.tools.h2load.as_deref().ok_or_else(|| fail("h2load is not installed".into()))?
            }
            Protocol::Client => return Err(fail("the client case is run by its peer, not driven".into())),
        };
        let taskset = match (case.pinned, self.tools.taskset.as_deref()) {
            (true, None) => return Err(fail("taskset is not installed (needed to pin)".into())),
            (true, Some(t)) => Some(t),
            (false, _) => None,
        };
        let port = free_port().map_err(|e| fail(format!("no free port: {e}")))?;
        let mut step = comp.run.clone();
        if self.quick {
            step.extend(comp.quick.iter().cloned());
        }
        let step: Vec<String> = step.iter().map(|a| substitute(a, port, case.workers)).collect();
        let program = proc::resolve_program(&step[0], self.dir);
        let mut cmd = match taskset {
            Some(taskset) => {
                let mut cmd = Command::new(taskset);
                cmd.args(["-c", &pinned_cpus().0.to_string()]).arg(program);
                cmd
            }
            None => Command::new(program),
        };
        cmd.args(&step[1..])
            .current_dir(self.dir)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(&comp.env)
            .env("PORT", port.to_string())
            .env("WORKERS", case.workers.to_string());
        if case.protocol == Protocol::H2c {
            cmd.env("PROTOCOL", "h2c");
        }
        let mut server =
            Running::spawn(&mut cmd).map_err(|e| fail(format!("cannot start {}: {e}", proc::show(&step))))?;
        let deadline = Instant::now() + comp.timeout;
        let measured = self.drive(&mut server, wrk, taskset, port, case, deadline);
        let finished = server.stop(STOP_GRACE);
        measured.map_err(|what| Failure::new(what, finished.stderr))
    }

    fn drive(
        &self,
        server: &mut Running,
        wrk: &Path,
        taskset: Option<&Path>,
        port: u16,
        case: HttpCase,
        deadline: Instant,
    ) -> Result<Vec<Sample>, String> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        wait_for_port(server, addr, deadline.min(Instant::now() + STARTUP_LIMIT))?;
        check_hello(addr)?;
        if case.protocol == Protocol::H2c {
            return self.drive_h2load(server, wrk, taskset, port, case, deadline);
        }
        let url = format!("http://127.0.0.1:{port}/");
        let wrk_cmd = |secs: u64, latency: bool| {
            let mut cmd = match taskset {
                Some(taskset) => {
                    let mut cmd = Command::new(taskset);
                    cmd.args(["-c", &pinned_cpus().1.to_string()]).arg(wrk);
                    cmd
                }
                None => Command::new(wrk),
            };
            cmd.arg(format!("-t{}", self.settings.threads))
                .arg(format!("-c{}", self.settings.connections))
                .arg(format!("-d{secs}s"));
            if latency {
                cmd.arg("--latency");
            }
            cmd.arg(&url);
            cmd
        };
        if self.settings.warmup_s > 0 {
            run_wrk(&mut wrk_cmd(self.settings.warmup_s, false), self.settings.warmup_s)
                .map_err(|e| format!("wrk warm-up: {e}"))?;
        }
        let cpu_before = procfs::tree_cpu_us(server.pid());
        let output = run_wrk(&mut wrk_cmd(self.settings.duration_s, true), self.settings.duration_s);
        let cpu_after = procfs::tree_cpu_us(server.pid());
        let output = output?;
        if let Some(exit) = server.try_exit() {
            return Err(format!("server {} during the measurement", exit.describe()));
        }
        if Instant::now() > deadline {
            return Err("the run took longer than timeout_s".into());
        }
        let report = wrk::parse(&output).map_err(|e| format!("cannot read wrk's report: {e}"))?;
        if report.requests == 0 {
            return Err("wrk completed no requests".into());
        }
        if report.non_2xx > 0 {
            return Err(format!("{} of {} responses were not 2xx/3xx", report.non_2xx, report.requests));
        }
        if report.socket_errors * 100 > report.requests {
            return Err(format!("{} socket errors for {} requests", report.socket_errors, report.requests));
        }
        let cpu_us_per_req = (cpu_after - cpu_before).max(0.0) / report.requests as f64;
        Ok(samples(case, report.req_per_s, report.avg_us, report.p99_us, cpu_us_per_req))
    }
}

impl HttpRun<'_> {
    /// Step 4 for an h2c case: h2load instead of wrk (`tool` is h2load's path).
    fn drive_h2load(
        &self,
        server: &mut Running,
        tool: &Path,
        taskset: Option<&Path>,
        port: u16,
        case: HttpCase,
        deadline: Instant,
    ) -> Result<Vec<Sample>, String> {
        let url = format!("http://127.0.0.1:{port}/");
        let log = std::env::temp_dir().join(format!("tournament-h2load-{}-{port}.tsv", std::process::id()));
        let h2load_cmd = |secs: u64, log: Option<&Path>| {
            let mut cmd = match taskset {
                Some(taskset) => {
                    let mut cmd = Command::new(taskset);
                    cmd.args(["-c", &pinned_cpus().1.to_string()]).arg(tool);
                    cmd
                }
                None => Command::new(tool),
            };
            cmd.arg(format!("-t{}", self.settings.threads))
                .arg(format!("-c{}", self.settings.connections))
                .arg("-m1")
                .arg(format!("-D{secs}"));
            if let Some(log) = log {
                cmd.arg(format!("--log-file={}", log.display()));
            }
            cmd.arg(&url);
            cmd
        };
        if self.settings.warmup_s > 0 {
            run_tool("h2load", &mut h2load_cmd(self.settings.warmup_s, None), self.settings.warmup_s)
                .map_err(|e| format!("h2load warm-up: {e}"))?;
        }
        let cpu_before = procfs::tree_cpu_us(server.pid());
        let output = run_tool(
            "h2load",
            &mut h2load_cmd(self.settings.duration_s, Some(&log)),
            self.settings.duration_s,
        );
        let cpu_after = procfs::tree_cpu_us(server.pid());
        let log_text = std::fs::read_to_string(&log);
        let _ = std::fs::remove_file(&log);
        let output = output?;
        if let Some(exit) = server.try_exit() {
            return Err(format!("server {} during the measurement", exit.describe()));
        }
        if Instant::now() > deadline {
            return Err("the run took longer than timeout_s".into());
        }
        let report = h2load::parse(&output).map_err(|e| format!("cannot read h2load's report: {e}"))?;
        if !output.contains("Application protocol: h2c") {
            return Err("h2load did not speak h2c with the server".into());
        }
        if report.requests == 0 {
            return Err("h2load completed no requests".into());
        }
        if report.non_2xx > 0 {
            return Err(format!("{} of {} responses were 4xx/5xx", report.non_2xx, report.requests));
        }
        if report.failed * 100 > report.requests {
            return Err(format!("{} failed requests for {} done", report.failed, report.requests));
        }
        let log_text = log_text.map_err(|e| format!("cannot read h2load's request log: {e}"))?;
        let (avg_us, p99_us) =
            h2load::log_stats_us(&log_text).ok_or("h2load's request log has no requests")?;
        let cpu_us_per_req = (cpu_after - cpu_before).max(0.0) / report.requests as f64;
        Ok(samples(case, report.req_per_s, avg_us, p99_us, cpu_us_per_req))
    }
}

/// The four metrics of one run of `case`.
fn samples(case: HttpCase, req_per_s: f64, avg_us: f64, p99_us: f64, cpu_us_per_req: f64) -> Vec<Sample> {
    let sample = |metric: &str, value: f64, unit: &str| Sample {
        case: case.name.to_string(),
        metric: metric.to_string(),
        value,
        unit: unit.to_string(),
    };
    vec![
        sample("req_per_s", req_per_s, "req/s"),
        sample("avg_us", avg_us, "us"),
        sample("p99_us", p99_us, "us"),
        sample("cpu_us_per_req", cpu_us_per_req, "us"),
    ]
}

/// Runs wrk and returns its stdout, or why it failed.
fn run_wrk(cmd: &mut Command, secs: u64) -> Result<String, String> {
    run_tool("wrk", cmd, secs)
}

/// Runs a load generator (`name` for messages) and returns its stdout, or why it failed.
fn run_tool(name: &str, cmd: &mut Command, secs: u64) -> Result<String, String> {
    let done = proc::run(cmd, Duration::from_secs(secs) + WRK_SLACK)
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    if !done.exit.success() {
        let out = proc::tail(&format!("{}\n{}", done.stdout, done.stderr), 5);
        return Err(format!("{name} {}: {out}", done.exit.describe()));
    }
    Ok(done.stdout)
}

/// Waits until `addr` accepts a connection, the server exits, or `deadline` passes.
fn wait_for_port(server: &mut Running, addr: SocketAddr, deadline: Instant) -> Result<(), String> {
    loop {
        if let Some(exit) = server.try_exit() {
            return Err(format!("server {} before accepting connections", exit.describe()));
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("server did not accept on {addr} in time"));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Sends one `GET /` and checks the status and body the contract requires.
pub fn check_hello(addr: SocketAddr) -> Result<(), String> {
    let io = |e: std::io::Error| format!("GET / failed: {e}");
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(io)?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).map_err(io)?;
    stream.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").map_err(io)?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    // Read until the body shows up, the server closes, or 64 KiB: a server may keep the
    // connection open despite `Connection: close`.
    while reply.len() < 65_536 {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            Err(_) if !reply.is_empty() => break,
            Err(e) => return Err(io(e)),
        }
        if contains(&reply, HELLO.as_bytes()) {
            break;
        }
    }
    check_reply(&String::from_utf8_lossy(&reply))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Checks a raw HTTP reply for status 200 and the hello body.
pub fn check_reply(reply: &str) -> Result<(), String> {
    let status = reply.lines().next().unwrap_or("").trim();
    let mut words = status.split_whitespace();
    let ok = matches!(
        (words.next(), words.next()),
        (Some(v), Some("200")) if v.starts_with("HTTP/")
    );
    if !ok {
        return Err(format!("GET / answered `{status}` instead of 200"));
    }
    if !reply.contains(HELLO) {
        return Err(format!("GET / did not answer the body `{HELLO}`"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_port_and_workers() {
        assert_eq!(substitute("--port=$PORT", 8080, 2), "--port=8080");
        assert_eq!(substitute("${WORKERS}x", 8080, 2), "2x");
        assert_eq!(substitute("plain", 8080, 2), "plain");
    }

    #[test]
    fn checks_status_and_body() {
        let good = "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!";
        assert_eq!(check_reply(good), Ok(()));
        let not_found = "HTTP/1.1 404 Not Found\r\n\r\nnope";
        assert!(check_reply(not_found).unwrap_err().contains("404"));
        let wrong_body = "HTTP/1.0 200 OK\r\n\r\n<html>";
        assert!(check_reply(wrong_body).unwrap_err().contains("body"));
        assert!(check_reply("").is_err());
    }

    #[test]
    fn free_ports_are_nonzero_and_bindable() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }

    #[test]
    fn check_hello_against_a_loopback_server() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let server = thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf).unwrap();
            conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!",
            )
            .unwrap();
            // Keep the connection open: the check must not wait for a close.
            thread::sleep(Duration::from_millis(200));
        });
        assert_eq!(check_hello(addr), Ok(()));
        server.join().unwrap();
    }
}
