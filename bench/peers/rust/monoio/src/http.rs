//! http suite, competitor `monoio`: a hello-world HTTP/1.1 server on monoio 0.2's io_uring
//! driver, thread per core as monoio documents it: WORKERS threads, each with its own monoio
//! runtime (`RuntimeBuilder::<IoUringDriver>`, timer enabled, 1,024 ring entries) and its own
//! listener on 127.0.0.1:$PORT (monoio's default listener options: SO_REUSEPORT, backlog
//! 1,024), so the kernel spreads connections over the threads; one task per connection,
//! TCP_NODELAY.
//!
//! monoio has no HTTP server of its own; this is a minimal HTTP/1.1 responder written here:
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

use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{TcpListener, TcpStream};
use monoio::{IoUringDriver, RuntimeBuilder};

const BODY: &[u8] = b"Hello, World!";
const MAX_HEADERS: usize = 32;
const MAX_HEAD: usize = 8 * 1024;
const MAX_BODY: usize = 1024 * 1024;
const READ_BUF: usize = 4096;

thread_local! {
    /// The `date` header value and the second it was formatted for.
    static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

fn push_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs {
            *d = (secs, httpdate::fmt_http_date(now));
        }
        out.extend_from_slice(d.1.as_bytes());
    });
}

fn push_hello(out: &mut Vec<u8>, head_only: bool, close: bool) {
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 13\r\n");
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"date: ");
    push_date(out);
    out.extend_from_slice(b"\r\n\r\n");
    if !head_only {
        out.extend_from_slice(BODY);
    }
}

fn push_error(out: &mut Vec<u8>, status: &str) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(b"\r\ncontent-length: 0\r\nconnection: close\r\ndate: ");
    push_date(out);
    out.extend_from_slice(b"\r\n\r\n");
}

/// Whether a comma-separated header value holds `token` (case-insensitive).
fn has_token(value: &[u8], token: &str) -> bool {
    value.split(|b| *b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// What parsing the buffered bytes gave.
enum Parsed {
    /// A whole request (head and body) of this many bytes; answer it, then close if asked.
    Request { len: usize, head_only: bool, close: bool },
    /// More bytes are needed.
    Incomplete,
    /// Answer with this status and close.
    Reject(&'static str),
}

fn parse(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return Parsed::Reject("431 Request Header Fields Too Large")
        }
        Ok(httparse::Status::Partial) => return Parsed::Incomplete,
        Err(httparse::Error::TooManyHeaders) => return Parsed::Reject("431 Request Header Fields Too Large"),
        Err(_) => return Parsed::Reject("400 Bad Request"),
    };
    if head > MAX_HEAD {
        return Parsed::Reject("431 Request Header Fields Too Large");
    }
    let mut close = req.version != Some(1);
    let mut body = 0usize;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            match std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<usize>().ok()) {
                Some(n) if n <= MAX_BODY => body = n,
                Some(_) => return Parsed::Reject("413 Payload Too Large"),
                None => return Parsed::Reject("400 Bad Request"),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Parsed::Reject("501 Not Implemented");
        } else if h.name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, "close") {
                close = true;
            } else if has_token(h.value, "keep-alive") {
                close = false;
            }
        }
    }
    if buf.len() < head + body {
        return Parsed::Incomplete;
    }
    Parsed::Request { len: head + body, head_only: req.method == Some("HEAD"), close }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(raw: &[u8]) -> (usize, bool, bool) {
        match parse(raw) {
            Parsed::Request { len, head_only, close } => (len, head_only, close),
            Parsed::Incomplete => panic!("incomplete"),
            Parsed::Reject(s) => panic!("rejected: {s}"),
        }
    }

    #[test]
    fn keep_alive_by_version_and_connection_header() {
        let get = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(request(get), (get.len(), false, false));
        assert!(request(b"GET / HTTP/1.1\r\nConnection: Close\r\n\r\n").2);
        assert!(request(b"GET / HTTP/1.0\r\n\r\n").2);
        assert!(!request(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").2);
        assert!(request(b"HEAD / HTTP/1.1\r\n\r\n").1);
    }

    #[test]
    fn bodies_are_waited_for_and_bounded() {
        let post = b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nab";
        assert!(matches!(parse(post), Parsed::Incomplete));
        let whole = b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET";
        assert_eq!(request(whole).0, whole.len() - 3);
        let big = format!("POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", MAX_BODY + 1);
        assert!(matches!(parse(big.as_bytes()), Parsed::Reject(s) if s.starts_with("413")));
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(parse(chunked), Parsed::Reject(s) if s.starts_with("501")));
    }

    #[test]
    fn bad_and_oversized_heads_are_rejected() {
        assert!(matches!(parse(b"\x01\x02 nonsense\r\n\r\n"), Parsed::Reject(s) if s.starts_with("400")));
        let long = vec![b'a'; MAX_HEAD + 1];
        let mut head = b"GET / HTTP/1.1\r\nX: ".to_vec();
        head.extend_from_slice(&long);
        assert!(matches!(parse(&head), Parsed::Reject(s) if s.starts_with("431")));
    }
}
