//! Servers that misbehave, written with plain `std::net` sockets, and the harness that runs
//! spindle-http's client against them (`client_broken_server.rs`, `client_stale_connections.rs`):
//! a watchdog per case, a client from a fiber or a task, and what a request came to.
#![allow(dead_code, unused_imports)]

pub use std::io::{Read, Write};
pub use std::net::{SocketAddr, TcpListener, TcpStream};
pub use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
pub use std::sync::{mpsc, Arc};
pub use std::time::Duration;

pub use bytes::Bytes;
pub use spindle_http::{Body, BoxError, Client, ClientError, ClientErrorKind, Request, StatusCode};

#[path = "../../../spindle/tests/support/watchdog.rs"]
mod watchdog;
pub use watchdog::Watchdog;

#[path = "../../../spindle/tests/support/thread_server.rs"]
mod thread_server;
pub use thread_server::serve;

pub fn runtime() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(2).build().unwrap()
}

/// Reads one request head (up to its blank line); false if the connection ends first.
pub fn read_head(stream: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return false,
        }
    }
    true
}

/// Reads until the client closes the connection (or resets it): the server holds the
/// connection open, silent, meanwhile.
pub fn hold(mut stream: TcpStream) {
    let mut sink = [0u8; 4096];
    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
}

/// Answers each request on the connection with `ok` (keep-alive) until the client closes it.
pub fn answer_ok(mut stream: TcpStream) {
    while read_head(&mut stream) {
        if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").is_err() {
            return;
        }
    }
}

/// A client with a short request timeout (the silent cases end with it).
pub fn client() -> Client {
    Client::builder().request_timeout(Duration::from_millis(300)).build()
}

/// How an exchange ended.
#[derive(Debug)]
pub enum Outcome {
    /// The request failed before a response head.
    Head(ClientError),
    /// The head arrived (its status), reading the body failed.
    Body(StatusCode, BoxError),
    /// The head and the whole body arrived.
    Ok(StatusCode, Bytes),
}

impl Outcome {
    #[track_caller]
    pub fn head_error(self, kind: ClientErrorKind) -> ClientError {
        match self {
            Outcome::Head(e) => {
                assert_eq!(e.kind(), kind, "{e}");
                assert!(!e.to_string().is_empty());
                e
            }
            other => panic!("expected a {kind:?} error, got {other:?}"),
        }
    }

    #[track_caller]
    pub fn ok(self) -> (StatusCode, Bytes) {
        match self {
            Outcome::Ok(status, body) => (status, body),
            other => panic!("expected a response, got {other:?}"),
        }
    }
}

/// Blocking style from a fiber, or `Client::send` from an async task.
#[derive(Debug, Clone, Copy)]
pub enum Style {
    Fiber,
    Task,
}

pub const STYLES: [Style; 2] = [Style::Fiber, Style::Task];

/// `GET url` with `client` in `style`, its body read to the end.
pub fn fetch(rt: &spindle::Runtime, style: Style, client: &Client, url: &str) -> Outcome {
    let req = Request::get(url).body(Body::empty()).unwrap();
    send(rt, style, client, req)
}

pub fn send(rt: &spindle::Runtime, style: Style, client: &Client, req: Request<Body>) -> Outcome {
    let client = client.clone();
    match style {
        Style::Fiber => rt.block_on(move || match client.request(req) {
            Err(e) => Outcome::Head(e),
            Ok(res) => {
                let status = res.status();
                match res.into_body().bytes() {
                    Ok(body) => Outcome::Ok(status, body),
                    Err(e) => Outcome::Body(status, e),
                }
            }
        }),
        Style::Task => rt
            .spawn_async(async move {
                match client.send(req).await {
                    Err(e) => Outcome::Head(e),
                    Ok(res) => {
                        let status = res.status();
                        match http_body_util::BodyExt::collect(res.into_body()).await {
                            Ok(body) => Outcome::Ok(status, body.to_bytes()),
                            Err(e) => Outcome::Body(status, e),
                        }
                    }
                }
            })
            .join()
            .unwrap(),
    }
}

/// `read()`, polled every 5 ms until `want` holds of it or 10 s pass; the last reading.
pub fn wait_for<T>(read: impl Fn() -> T, want: impl Fn(&T) -> bool) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let value = read();
        if want(&value) || std::time::Instant::now() > deadline {
            return value;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
