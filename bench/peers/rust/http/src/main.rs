//! http suite: a hello-world HTTP/1.1 server answering every request with `200 OK`,
//! `Content-Type: text/plain`, `Hello, World!`, with keep-alive.
//!
//! `--server tokio` (default; competitor `tokio-hyper`): hyper 1.x over hyper-util's
//! TokioIo, one tokio task per connection. `--single current|multi` picks the runtime for
//! WORKERS=1: a current_thread runtime (everything on the main thread) or a multi_thread
//! runtime with one worker.
//!
//! With `PROTOCOL=h2c` in the environment (the tournament's `h2c_*` cases), the tokio server
//! serves each connection with hyper-util's auto builder instead (HTTP/2 by prior knowledge,
//! and HTTP/1.1 for any other connection), its HTTP/2 streams spawned on tokio
//! (`TokioExecutor`), hyper's HTTP/2 defaults otherwise.
//!
//! `--server spindle` (competitor `spindle`): spindle-http (hyper 1.x driven by one spindle
//! task per connection, the handler a plain blocking function on a fiber per request), one
//! spindle runtime with
//! WORKERS worker threads (spindle-http's default Accept::RoundRobin; SPINDLE_HTTP_ACCEPT
//! picks another design). spindle-http answers HTTP/1.1 and h2c prior knowledge on the same
//! port whatever PROTOCOL says. `--no-header-timeout` turns off its header read
//! timeout (hyper then arms no timer per request, as in the tokio server, which sets none).
//!
//! `--client spindle|tokio [--quick]`: the `client_keepalive` case instead of a server: HTTP
//! clients against a spindle-http hello server this program starts (see `client.rs`); prints
//! its JSON line.
//!
//! Environment: PORT (listens on 127.0.0.1:$PORT), WORKERS (worker threads), PROTOCOL
//! (`http1`, the default, or `h2c`); for spindle, SPINDLE_METRICS_EVERY_MS=N prints the
//! runtime's per-worker counters to stderr every N ms (a measurement aid, off by default).
//! SPINDLE_HTTP_HANDLER=async answers from an async handler polled in the connection's task
//! instead of a blocking one on a fiber per request (a measurement aid for what that fiber
//! costs; the tournament runs the blocking handler).
//! SIGTERM's default action ends the process.

mod client;

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

static BODY: &[u8] = b"Hello, World!";

async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut res = Response::new(Full::new(Bytes::from_static(BODY)));
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(res)
}

async fn serve(addr: SocketAddr, h2c: bool) {
    let listener = TcpListener::bind(addr).await.expect("bind");
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("accept: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        if h2c {
            tokio::spawn(async move {
                let builder = auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(stream), service_fn(hello)).await;
            });
            continue;
        }
        tokio::spawn(async move {
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service_fn(hello)).await;
        });
    }
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn serve_spindle(addr: SocketAddr, workers: usize, header_timeout: bool) {
    use spindle_http::{Body, Server};
    let mut builder = Server::builder().workers(workers);
    // Measurement hook: SPINDLE_HTTP_ACCEPT=reuseport|roundrobin|runtimes (default: the
    // library's default).
    match std::env::var("SPINDLE_HTTP_ACCEPT").as_deref() {
        Ok("reuseport") => builder = builder.accept(spindle_http::Accept::ReusePort),
        Ok("roundrobin") => builder = builder.accept(spindle_http::Accept::RoundRobin),
        Ok("runtimes") => builder = builder.accept(spindle_http::Accept::Runtimes),
        _ => {}
    }
    if !header_timeout {
        builder = builder.header_read_timeout(None);
    }
    // Measurement hook: SPINDLE_HTTP_FAST_PATH=0 serves every HTTP/1 request through hyper
    // (the library's default is its own path for plain requests).
    if std::env::var("SPINDLE_HTTP_FAST_PATH").as_deref() == Ok("0") {
        builder = builder.http1_fast_path(false);
    }
    fn hello() -> Response<Body> {
        let mut res = Response::new(Body::from(Bytes::from_static(BODY)));
        res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        res
    }
    // Measurement hook: SPINDLE_HTTP_HANDLER=async serves the same answer from an async
    // handler, polled in the connection's task (no fiber per request); the tournament uses
    // the blocking handler, the API a spindle user reaches for.
    let server = match std::env::var("SPINDLE_HTTP_HANDLER").as_deref() {
        Ok("async") => builder.serve_async(addr, |_req: Request<Body>| async { hello() }),
        _ => builder.serve(addr, |_req: Request<Body>| hello()),
    }
    .expect("spindle-http server");
    // Measurement hook: SPINDLE_METRICS_EVERY_MS=N prints the workers' counters to stderr
    // every N ms (for looking at wake-ups and steals under load; off by default).
    if let Some(ms) = std::env::var("SPINDLE_METRICS_EVERY_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        loop {
            std::thread::sleep(std::time::Duration::from_millis(ms));
            eprintln!("{:?}", server.metrics());
        }
    }
    server.wait();
}

fn main() {
    let mut single = String::from("current");
    let mut server = String::from("tokio");
    let mut header_timeout = true;
    let mut client = None;
    let mut quick = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--single" => single = args.next().expect("--single current|multi"),
            "--server" => server = args.next().expect("--server tokio|spindle"),
            "--no-header-timeout" => header_timeout = false,
            "--client" => client = Some(args.next().expect("--client spindle|tokio")),
            "--quick" => quick = true,
            _ => {
                eprintln!(
                    "usage: http-peer [--server tokio|spindle] [--single current|multi] [--no-header-timeout]  (env PORT, WORKERS, PROTOCOL)\n       http-peer --client spindle|tokio [--quick]"
                );
                std::process::exit(2);
            }
        }
    }
    if let Some(client) = client {
        return client::main(&client, quick);
    }
    let port = env_num("PORT", 8080) as u16;
    let workers = env_num("WORKERS", 1).max(1);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let h2c = match std::env::var("PROTOCOL").as_deref() {
        Ok("h2c") => true,
        Ok("http1") | Err(_) => false,
        Ok(other) => {
            eprintln!("unknown PROTOCOL {other}: http1 or h2c");
            std::process::exit(2);
        }
    };
    match server.as_str() {
        "tokio" => {}
        "spindle" => return serve_spindle(addr, workers, header_timeout),
        other => {
            eprintln!("unknown --server {other}: tokio or spindle");
            std::process::exit(2);
        }
    }
    let rt = if workers == 1 && single == "current" {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build()
    }
    .expect("runtime");
    // The accept loop is a spawned task, so that it runs on a worker thread in both flavors.
    rt.block_on(async move { tokio::spawn(serve(addr, h2c)).await.unwrap() });
}
