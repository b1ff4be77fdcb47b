//! The http suite's `client_keepalive` case: HTTP clients making keep-alive `GET /` requests
//! in a loop against one local spindle-http hello server, the same server for every client.
//!
//! `http-peer --client spindle|tokio [--quick]`:
//!
//! 1. Starts this program again as the server (`--server spindle --no-header-timeout`,
//!    WORKERS=1) on a free loopback port, and waits until the port accepts.
//! 2. Runs `REQUESTERS` (64) concurrent requesters, each a loop of `GET /` reading the whole
//!    body (so the connection goes back to the pool) and checking status 200 and the hello
//!    body, the URL parsed once and its `Uri` cloned into each request by both clients:
//!    `spindle` = `spindle_http::Client::request` called from fibers on a spindle runtime with
//!    one worker; `tokio` = hyper-util's legacy pooled client (`HttpConnector`, keep-alive) from
//!    tasks on a tokio current_thread runtime.
//! 3. Counts completed requests from the end of a warm-up (1 s) to the end of the measurement
//!    (5 s, or 1 s with `--quick`), then stops the requesters and the server (the child is
//!    killed and reaped), and prints two JSON lines: `req_per_s`, and `cpu_us_per_req`, the
//!    CPU time this process (the client: all its threads, not the server child) spent in the
//!    same window (`CLOCK_PROCESS_CPUTIME_ID`) divided by the requests completed in it. The
//!    server is the same program for every client and shares the machine's two cores with it;
//!    measured here, each client's one requesting thread is what saturates (0.99 of a core,
//!    the server 0.81), so requests per second follow the client's CPU per request.
//!
//! A failed request ends the program with an error on stderr and a non-zero exit.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Concurrent requesters per client.
const REQUESTERS: usize = 64;
/// How long the server may take to accept.
const STARTUP_LIMIT: Duration = Duration::from_secs(30);

/// The server child, killed and reaped when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server() -> (Server, SocketAddr) {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let exe = std::env::current_exe().expect("this program's path");
    let child = Command::new(exe)
        .args(["--server", "spindle", "--no-header-timeout"])
        .env("PORT", port.to_string())
        .env("WORKERS", "1")
        .env_remove("PROTOCOL")
        .stdin(Stdio::null())
        .spawn()
        .expect("start the spindle-http hello server");
    let mut server = Server(child);
    let deadline = Instant::now() + STARTUP_LIMIT;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Ok(Some(status)) = server.0.try_wait() {
            panic!("the hello server exited before accepting: {status}");
        }
        assert!(Instant::now() < deadline, "the hello server did not accept on {addr} in time");
        std::thread::sleep(Duration::from_millis(20));
    }
    (server, addr)
}

/// Shared by the requesters and the timer.
struct Shared {
    done: AtomicU64,
    stop: AtomicBool,
}

/// CPU time consumed by this process so far, all threads (`CLOCK_PROCESS_CPUTIME_ID`), in µs.
fn process_cpu_us() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID): {}", std::io::Error::last_os_error());
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

/// What one measurement window saw.
struct Measured {
    req_per_s: f64,
    cpu_us_per_req: f64,
}

/// Waits out the warm-up and the measurement, then stops the requesters.
fn measure(shared: &Shared, warmup: Duration, duration: Duration) -> Measured {
    std::thread::sleep(warmup);
    let (start, cpu0, before) = (Instant::now(), process_cpu_us(), shared.done.load(Ordering::Relaxed));
    std::thread::sleep(duration);
    let (end, cpu1, after) = (Instant::now(), process_cpu_us(), shared.done.load(Ordering::Relaxed));
    shared.stop.store(true, Ordering::Relaxed);
    let requests = after - before;
    assert!(requests > 0, "no request completed in the measurement window");
    Measured {
        req_per_s: requests as f64 / (end - start).as_secs_f64(),
        cpu_us_per_req: (cpu1 - cpu0) / requests as f64,
    }
}

fn check(status: u16, body: &[u8]) {
    assert!(
        status == 200 && body == crate::BODY,
        "GET / answered {status} with a body of {} bytes",
        body.len()
    );
}

fn run_spindle(url: String, shared: Arc<Shared>) {
    let rt = spindle::Builder::new().worker_threads(1).build().expect("a spindle runtime");
    let client = spindle_http::Client::builder().max_connections_per_host(REQUESTERS).build();
    // Parsed once, as the tokio requesters' `Uri` is; each request clones it.
    let uri: spindle_http::Uri = url.parse().expect("a URI");
    rt.block_on(move || {
        let fibers: Vec<_> = (0..REQUESTERS)
            .map(|_| {
                let (client, uri, shared) = (client.clone(), uri.clone(), shared.clone());
                spindle::spawn(move || {
                    while !shared.stop.load(Ordering::Relaxed) {
                        let req = spindle_http::Request::get(uri.clone())
                            .body(spindle_http::Body::empty())
                            .expect("a GET request");
                        let res = client.request(req).unwrap_or_else(|e| panic!("GET {uri}: {e}"));
                        let status = res.status().as_u16();
                        let body =
                            res.into_body().bytes().unwrap_or_else(|e| panic!("reading the body: {e}"));
                        check(status, &body);
                        shared.done.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for fiber in fibers {
            fiber.join().expect("a requester fiber panicked");
        }
    });
}

fn run_tokio(url: String, shared: Arc<Shared>) {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    rt.block_on(async move {
        let client: Client<_, Empty<bytes::Bytes>> =
            Client::builder(TokioExecutor::new()).pool_max_idle_per_host(REQUESTERS).build_http();
        let uri: hyper::Uri = url.parse().expect("a URI");
        let tasks: Vec<_> = (0..REQUESTERS)
            .map(|_| {
                let (client, uri, shared) = (client.clone(), uri.clone(), shared.clone());
                tokio::spawn(async move {
                    while !shared.stop.load(Ordering::Relaxed) {
                        let res = client.get(uri.clone()).await.unwrap_or_else(|e| panic!("GET {uri}: {e}"));
                        let status = res.status().as_u16();
                        let body = res.into_body().collect().await.expect("reading the body").to_bytes();
                        check(status, &body);
                        shared.done.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("a requester task panicked");
        }
    });
}

/// Runs the case for `client` (`spindle` or `tokio`) and prints its JSON line.
pub fn main(client: &str, quick: bool) {
    let (competitor, run): (&str, fn(String, Arc<Shared>)) = match client {
        "spindle" => ("spindle", run_spindle),
        "tokio" => ("tokio-hyper", run_tokio),
        other => {
            eprintln!("unknown --client {other}: spindle or tokio");
            std::process::exit(2);
        }
    };
    let (server, addr) = start_server();
    let url = format!("http://{addr}/");
    let shared = Arc::new(Shared { done: AtomicU64::new(0), stop: AtomicBool::new(false) });
    let requesters = {
        let shared = shared.clone();
        std::thread::spawn(move || run(url, shared))
    };
    let duration = Duration::from_secs(if quick { 1 } else { 5 });
    let m = measure(&shared, Duration::from_secs(1), duration);
    if requesters.join().is_err() {
        eprintln!("the {client} client failed (see above)");
        std::process::exit(1);
    }
    drop(server);
    println!(
        "{{\"suite\":\"http\",\"case\":\"client_keepalive\",\"competitor\":\"{competitor}\",\"metric\":\"req_per_s\",\"value\":{:.1},\"unit\":\"req/s\"}}",
        m.req_per_s
    );
    println!(
        "{{\"suite\":\"http\",\"case\":\"client_keepalive\",\"competitor\":\"{competitor}\",\"metric\":\"cpu_us_per_req\",\"value\":{:.3},\"unit\":\"us\"}}",
        m.cpu_us_per_req
    );
}
