//! http suite, competitor `monoio`: a hello-world HTTP/1.1 server on monoio 0.2's io_uring
//! driver, thread per core as monoio documents it: WORKERS threads, each with its own monoio
//! runtime (`RuntimeBuilder::<IoUringDriver>`, timer enabled, 1,024 ring entries) and its own
//! listener on 127.0.0.1:$PORT (monoio's default listener options: SO_REUSEPORT, backlog
//! 1,024), so the kernel spreads connections over the threads; one task per connection,
//! TCP_NODELAY.
//!
//! monoio has no HTTP server of its own; this is a minimal HTTP/1.1 responder written here
//! (`responder.rs`):
//! request heads parsed with `httparse` (at most 32 headers, 8 KiB per head, else `431` and
//! close), `Content-Length` request bodies skipped (at most 1 MiB, else `413` and close;
//! `Transfer-Encoding` → `501` and close; a malformed head → `400` and close), keep-alive per
//! HTTP/1.1 (`Connection: close` honoured, HTTP/1.0 closes unless `keep-alive`), pipelined
//! requests answered in order with one write per read, `HEAD` without a body. Every request
//! gets `200 OK`, `content-type: text/plain`, `content-length: 13`, `date` (formatted once per
//! second per thread, with `httpdate`) and `Hello, World!`, as tokio-hyper answers.
//!
//! Environment: PORT, WORKERS. SIGTERM's default action ends the process. When io_uring cannot
//! be set up the program says so on stderr and exits 1.

mod responder;

use std::net::SocketAddr;
use std::time::Duration;

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{TcpListener, TcpStream};
use monoio::{IoUringDriver, RuntimeBuilder};
use responder::{parse, push_error, push_hello, Parsed};

const READ_BUF: usize = 4096;

async fn serve(mut stream: TcpStream) {
    let mut pending: Vec<u8> = Vec::with_capacity(READ_BUF);
    let mut rbuf = vec![0u8; READ_BUF];
    let mut out: Vec<u8> = Vec::with_capacity(READ_BUF);
    loop {
        // Answer every whole request in the buffer (pipelining), in order.
        let mut used = 0;
        let mut close = false;
        while used < pending.len() {
            match parse(&pending[used..]) {
                Parsed::Request { len, head_only, close: c } => {
                    push_hello(&mut out, head_only, c);
                    used += len;
                    if c {
                        close = true;
                        break;
                    }
                }
                Parsed::Incomplete => break,
                Parsed::Reject(status) => {
                    push_error(&mut out, status);
                    close = true;
                    break;
                }
            }
        }
        pending.drain(..used);
        if !out.is_empty() {
            let (res, buf) = stream.write_all(out).await;
            out = buf;
            out.clear();
            if res.is_err() {
                return;
            }
        }
        if close {
            return;
        }
        let (res, buf) = stream.read(rbuf).await;
        rbuf = buf;
        match res {
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&rbuf[..n]),
        }
    }
}

async fn accept_loop(addr: SocketAddr) {
    let listener = TcpListener::bind(addr).expect("bind");
    eprintln!("monoio http: a thread listens on {addr} (io_uring)");
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                monoio::spawn(serve(stream));
            }
            Err(e) => {
                // E.g. EMFILE: back off instead of spinning.
                eprintln!("accept: {e}");
                monoio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn worker(addr: SocketAddr) {
    let mut rt = match RuntimeBuilder::<IoUringDriver>::new().enable_timer().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("monoio: io_uring is not available here ({e}); this peer runs on io_uring only");
            std::process::exit(1);
        }
    };
    rt.block_on(accept_loop(addr));
}

fn main() {
    let port = env_num("PORT", 8080) as u16;
    let workers = env_num("WORKERS", 1).max(1);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let threads: Vec<_> = (1..workers).map(|_| std::thread::spawn(move || worker(addr))).collect();
    worker(addr);
    for t in threads {
        let _ = t.join();
    }
}
