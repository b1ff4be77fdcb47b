//! HTTP/1.1 backpressure: a client that sends requests (or asks for a large streamed body)
//! and never reads the responses cannot make the server buffer without bound (with
//! hyper's `pipeline_flush` the server buffered every response, ~1 GiB in 10 s). The server must stop producing responses once the socket and its bounded buffers
//! are full. These tests run alone in their binary: they read the process's RSS.

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Frame;
use spindle_http::{Body, BoxError, Request, Response, Server};

const CHUNK: usize = 64 * 1024;

/// Resident set size of this process, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// A client socket with a small receive buffer (so the server's writes stall soon), in
/// non-blocking mode.
fn small_client(addr: std::net::SocketAddr) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    socket.connect(&addr.into()).unwrap();
    let stream: TcpStream = socket.into();
    stream.set_nonblocking(true).unwrap();
    stream
}

#[test]
fn pipelining_client_that_never_reads_stalls_the_server() {
    // Each response carries a freshly allocated 64 KiB body; the handler counts its calls.
    let calls = Arc::new(AtomicU64::new(0));
    let seen = calls.clone();
    let server = Server::builder()
        .serve("127.0.0.1:0", move |_req: Request<Body>| {
            seen.fetch_add(1, Ordering::Relaxed);
            Response::new(vec![b'x'; CHUNK])
        })
        .unwrap();
    let before = rss();
    let mut client = small_client(server.local_addr());
    let batch = "GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(64);
    // Bounded: stop when the client's writes have been blocked for 1 s (the server stopped
    // reading), when the server has answered far more than its buffers could hold, or after
    // 20 s.
    const TOO_MANY: u64 = 2_000; // 2,000 × 64 KiB = 125 MiB buffered
    let start = Instant::now();
    let mut last_write = Instant::now();
    let mut pending = 0usize; // bytes of `batch` already written
    while last_write.elapsed() < Duration::from_secs(1)
        && calls.load(Ordering::Relaxed) < TOO_MANY
        && start.elapsed() < Duration::from_secs(20)
    {
        match client.write(&batch.as_bytes()[pending..]) {
            Ok(n) => {
                pending = (pending + n) % batch.len();
                last_write = Instant::now();
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("write: {e}"),
        }
    }
    let answered = calls.load(Ordering::Relaxed);
    let grown = rss().saturating_sub(before);
    assert!(
        answered < 500,
        "the server kept answering a client that does not read: {answered} responses of 64 KiB"
    );
    assert!(grown < 64 << 20, "RSS grew by {} MiB", grown >> 20);
    drop(client);
    server.shutdown_timeout(Duration::from_secs(5));
}

/// A response body of `left` bytes in fresh 64 KiB chunks, counting what it produced.
struct Chunks {
    left: usize,
    produced: Arc<AtomicU64>,
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.left == 0 {
            return Poll::Ready(None);
        }
        let n = this.left.min(CHUNK);
        this.left -= n;
        this.produced.fetch_add(n as u64, Ordering::Relaxed);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b'y'; n])))))
    }
}

#[test]
fn streamed_body_to_a_client_that_never_reads_is_produced_only_as_sent() {
    const TOTAL: usize = 64 << 20;
    let produced = Arc::new(AtomicU64::new(0));
    let counter = produced.clone();
    let server = Server::builder()
        .serve("127.0.0.1:0", move |_req: Request<Body>| {
            Response::new(Body::wrap(Chunks { left: TOTAL, produced: counter.clone() }))
        })
        .unwrap();
    let before = rss();
    let mut clients: Vec<TcpStream> = (0..4).map(|_| small_client(server.local_addr())).collect();
    for c in &mut clients {
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    }
    // Wait until production stops growing for 1 s (or 20 s pass).
    let start = Instant::now();
    let (mut last, mut last_change) = (0, Instant::now());
    while last_change.elapsed() < Duration::from_secs(1) && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
        let now = produced.load(Ordering::Relaxed);
        if now != last {
            (last, last_change) = (now, Instant::now());
        }
    }
    let made = produced.load(Ordering::Relaxed);
    let grown = rss().saturating_sub(before);
    assert!(made < 64 << 20, "the server produced {} MiB of body for 4 clients that do not read", made >> 20);
    assert!(grown < 64 << 20, "RSS grew by {} MiB", grown >> 20);
    drop(clients);
    server.shutdown_timeout(Duration::from_secs(5));
}
