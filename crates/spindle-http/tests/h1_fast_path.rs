//! spindle-http's own HTTP/1.1 path (module `h1`): plain requests answered without hyper,
//! the hand-off to hyper at the first request that is not plain, response framing, and
//! the path's waits. Raw bytes over std sockets.

mod common;

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use common::{connect, read_response};
use http_body::Frame;
use spindle_http::header::{HeaderValue, CONNECTION, CONTENT_LENGTH};
use spindle_http::{Body, Request, Response, Server, StatusCode};

fn local() -> &'static str {
    "127.0.0.1:0"
}

/// Answers `<method> <path> <body length>`, reading the request body.
fn describe(req: Request<Body>) -> Response<String> {
    let (parts, body) = req.into_parts();
    let len = body.bytes().map(|b| b.len()).unwrap_or(usize::MAX);
    Response::new(format!("{} {} {len}", parts.method, parts.uri.path()))
}

/// A body that yields its pieces one poll apart (each piece after a `Pending` that wakes
/// itself), so the server sees a stream, not a buffer.
struct Pieces {
    pieces: VecDeque<Bytes>,
    ready: bool,
    exact: Option<u64>,
}

impl Pieces {
    fn body(pieces: &[&'static str], exact: Option<u64>) -> Body {
        let pieces = pieces.iter().map(|p| Bytes::from_static(p.as_bytes())).collect();
        Body::wrap(Pieces { pieces, ready: false, exact })
    }
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if !self.ready {
            self.ready = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.ready = false;
        Poll::Ready(self.pieces.pop_front().map(|p| Ok(Frame::data(p))))
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.exact.map(http_body::SizeHint::with_exact).unwrap_or_default()
    }
}

#[test]
fn a_chunked_body_hands_the_connection_to_hyper_in_order() {
    for fast in [true, false] {
        let server = Server::builder().http1_fast_path(fast).serve(local(), describe).unwrap();
        let mut s = connect(server.local_addr());
        // Plain, plain, a small body (in memory), plain, chunked (hyper from here on),
        // plain: one write.
        s.write_all(
            b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\n\
              DELETE /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n\
              POST /3 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
              GET /4 HTTP/1.1\r\nHost: x\r\n\r\n\
              PUT /5 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
              GET /6 HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .unwrap();
        let mut buf = Vec::new();
        for want in ["GET /1 0", "DELETE /2 0", "POST /3 5", "GET /4 0", "PUT /5 3", "GET /6 0"] {
            let resp = read_response(&mut s, &mut buf).unwrap_or_else(|| panic!("no answer for {want}"));
            assert_eq!((resp.status, resp.text().as_str()), (200, want), "fast path {fast}");
        }
        // The same connection still serves.
        s.write_all(b"GET /7 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut s, &mut buf).unwrap().text(), "GET /7 0");
        server.shutdown();
    }
}

#[test]
fn bodies_in_memory_large_bodies_and_bodies_past_the_limit() {
    let server = Server::builder().max_body_size(30_000).serve(local(), describe).unwrap();
    let mut s = connect(server.local_addr());
    s.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    // A body in pieces, after its head (hyper's from here on: it times the body).
    for piece in [&b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01"[..], b"2345", b"6789"] {
        s.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(read_response(&mut s, &mut buf).unwrap().text(), "POST /a 10");
    // Larger than the own path waits for (8 KiB): hyper reads it, and serves on.
    write!(s, "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n{}", "y".repeat(20_000)).unwrap();
    assert_eq!(read_response(&mut s, &mut buf).unwrap().text(), "POST /b 20000");
    s.write_all(b"GET /c HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut s, &mut buf).unwrap().text(), "GET /c 0");
    // Past the body limit: 413 before the handler, connection closed.
    let out = common::raw_exchange(
        server.local_addr(),
        b"POST /d HTTP/1.1\r\nHost: x\r\nContent-Length: 30001\r\n\r\n",
    );
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    server.shutdown();
}

#[test]
fn a_head_sent_in_pieces_is_served() {
    let server = Server::builder().serve(local(), describe).unwrap();
    let mut s = connect(server.local_addr());
    s.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    for piece in [&b"GET /sl"[..], b"ow HTTP/1.1\r\nHo", b"st: x\r\n", b"\r\n"] {
        s.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(read_response(&mut s, &mut buf).unwrap().text(), "GET /slow 0");
    server.shutdown();
}

#[test]
fn a_head_larger_than_the_own_paths_buffer_is_served_by_hyper() {
    let server = Server::builder()
        .serve(local(), |req: Request<Body>| Response::new(req.headers()["x-big"].len().to_string()))
        .unwrap();
    let mut s = connect(server.local_addr());
    let big = "b".repeat(20_000);
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nX-Big: 1\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut s, &mut buf).unwrap().text(), "20000");
    assert_eq!(read_response(&mut s, &mut buf).unwrap().text(), "1");
    server.shutdown();
}

#[test]
fn a_streamed_response_is_chunked_unless_its_length_is_known() {
    let server = Server::builder()
        .serve(local(), |req: Request<Body>| match req.uri().path() {
            "/chunked" => Response::new(Pieces::body(&["one,", "", "two,", "three"], None)),
            "/exact" => Response::new(Pieces::body(&["one,", "two"], Some(7))),
            "/declared" => {
                let mut res = Response::new(Pieces::body(&["abc", "de"], None));
                res.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from_static("5"));
                res
            }
            _ => Response::new(Body::empty()),
        })
        .unwrap();
    let mut s = connect(server.local_addr());
    let mut buf = Vec::new();
    s.write_all(b"GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let resp = read_response(&mut s, &mut buf).unwrap();
    assert_eq!(resp.header("transfer-encoding"), Some("chunked"));
    assert_eq!(resp.header("content-length"), None);
    assert_eq!(resp.text(), "one,two,three", "an empty piece does not end the body");
    s.write_all(b"GET /exact HTTP/1.1\r\nHost: x\r\n\r\nGET /declared HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let resp = read_response(&mut s, &mut buf).unwrap();
    assert_eq!((resp.header("content-length"), resp.header("transfer-encoding")), (Some("7"), None));
    assert_eq!(resp.text(), "one,two");
    let resp = read_response(&mut s, &mut buf).unwrap();
    assert_eq!((resp.header("content-length"), resp.text().as_str()), (Some("5"), "abcde"));
    assert!(buf.is_empty(), "no bytes past the bodies: {buf:?}");
    server.shutdown();
}

#[test]
fn a_stream_longer_than_its_content_length_ends_the_connection() {
    let server = Server::builder()
        .serve(local(), |_req: Request<Body>| {
            let mut res = Response::new(Pieces::body(&["abc", "defgh"], None));
            res.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from_static("4"));
            res
        })
        .unwrap();
    let mut s = connect(server.local_addr());
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("the server closes (the client's 20 s read timeout is a hang guard)");
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n") && text.contains("content-length: 4\r\n"), "{text}");
    let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
    assert_eq!(body, "abc", "no byte past the declared length, and the body cut short: closed");
}

#[test]
fn head_204_and_304_answers_carry_no_body() {
    let server = Server::builder()
        .serve(local(), |req: Request<Body>| {
            let status = match req.uri().path() {
                "/204" => StatusCode::NO_CONTENT,
                "/304" => StatusCode::NOT_MODIFIED,
                _ => StatusCode::OK,
            };
            let mut res = Response::new(Body::from("Hello, World!"));
            *res.status_mut() = status;
            res
        })
        .unwrap();
    let mut s = connect(server.local_addr());
    s.write_all(
        b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET /204 HTTP/1.1\r\nHost: x\r\n\r\n\
          GET /304 HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .unwrap();
    let mut buf = Vec::new();
    let head = read_response(&mut s, &mut buf).unwrap();
    assert_eq!((head.status, head.header("content-length")), (200, Some("13")));
    // read_response reads the 13 bytes the header announces: the next answer's head then,
    // had the server sent a body. Read heads by hand instead.
    assert!(head.body.starts_with(b"HTTP/1.1 204") || head.body.is_empty());
    let mut all = head.body.clone();
    all.extend_from_slice(&buf);
    while all.windows(13).filter(|w| w == b"Hello, World!").count() < 1 {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed early");
        all.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8(all).unwrap();
    let statuses: Vec<&str> = text.split("\r\n").filter(|l| l.starts_with("HTTP/1.1")).collect();
    assert_eq!(
        statuses,
        ["HTTP/1.1 204 No Content", "HTTP/1.1 304 Not Modified", "HTTP/1.1 200 OK"],
        "{text}"
    );
    assert_eq!(text.matches("Hello, World!").count(), 1, "only the GET has a body: {text}");
    assert!(!text.split("HTTP/1.1 304").next().unwrap().contains("content-length"), "204: no length");
    server.shutdown();
}

#[test]
fn a_handler_asking_to_close_ends_the_connection_after_its_answer() {
    let server = Server::builder()
        .serve(local(), |_req: Request<Body>| {
            let mut res = Response::new("bye");
            res.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
            res
        })
        .unwrap();
    let mut s = connect(server.local_addr());
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /never HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("the server closes");
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.matches("HTTP/1.1").count(), 1, "one answer, then the close: {text}");
    assert_eq!(text.to_ascii_lowercase().matches("connection: close").count(), 1, "{text}");
    drop(s); // as a client does: the server's lingering close ends at once
    server.shutdown();
}

/// The two ways a request's answer closes the connection: the request asks for it, or the
/// server has keep-alive off (`keep_alive`, the request).
const CLOSING: [(bool, &[u8]); 2] = [
    (true, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    (false, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
];

#[test]
fn a_request_asking_to_close_and_keep_alive_off_close_after_the_answer() {
    for (keep_alive, request) in CLOSING {
        let server = Server::builder().keep_alive(keep_alive).serve(local(), describe).unwrap();
        let mut s = connect(server.local_addr());
        s.write_all(request).unwrap();
        s.write_all(b"GET /never HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).expect("the server closes");
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("HTTP/1.1 200").count(), 1, "{text}");
        assert!(text.contains("connection: close\r\n") && text.ends_with("GET / 0"), "{text}");
        // Closed as a client does once it has the answer: the server's lingering close (which
        // a graceful shutdown waits for, up to 2 s) ends at once.
        drop(s);
        server.shutdown();
    }
}

/// The client sends its next request while the closing answer is being made: that request
/// sits unread in the server's socket when the server closes, and a plain `close` then
/// resets the connection (RFC 9112 §9.6), so that the client's read ends in an error, not
/// at the end of the answer. The server half-closes and reads the rest instead. The handler
/// waits until the second request has been written (the test's order, not a timing).
#[test]
fn a_request_that_came_while_the_closing_answer_was_made_does_not_reset_the_connection() {
    use std::sync::mpsc::{channel, Receiver, Sender};
    use std::sync::Mutex;
    for (keep_alive, first) in CLOSING {
        let (started_tx, started_rx) = channel::<()>();
        let (go_tx, go_rx) = channel::<()>();
        let sync: Mutex<(Sender<()>, Receiver<()>)> = Mutex::new((started_tx, go_rx));
        let server = Server::builder()
            .keep_alive(keep_alive)
            .serve(local(), move |req: Request<Body>| {
                let sync = sync.lock().unwrap();
                sync.0.send(()).unwrap();
                sync.1.recv().unwrap(); // until the next request has been written
                describe(req)
            })
            .unwrap();
        let mut s = connect(server.local_addr());
        s.write_all(first).unwrap();
        started_rx.recv().unwrap();
        s.write_all(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        go_tx.send(()).unwrap();
        let mut out = Vec::new();
        let read = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(read.is_ok(), "keep_alive {keep_alive}: {read:?} after {text:?}");
        assert_eq!(text.matches("HTTP/1.1 200").count(), 1, "{text}");
        assert!(text.contains("connection: close\r\n") && text.ends_with("GET / 0"), "{text}");
        drop(s);
        server.shutdown();
    }
}

#[test]
fn a_missing_or_repeated_host_gets_hypers_400() {
    for request in [&b"GET / HTTP/1.1\r\n\r\n"[..], b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"] {
        let server = Server::builder().serve(local(), describe).unwrap();
        let out = common::raw_exchange(server.local_addr(), request);
        assert!(out.starts_with("HTTP/1.1 400"), "{out}");
        server.shutdown();
    }
}

#[test]
fn a_client_that_never_reads_is_closed_at_the_idle_timeout() {
    // 64 KiB answers, pipelined without reading: the server's writes stop (the socket is
    // full), and no byte moves for an idle period: the connection closes.
    let body = Bytes::from(vec![b'x'; 64 * 1024]);
    let server = Server::builder()
        .idle_timeout(Duration::from_millis(300))
        .serve(local(), move |_req: Request<Body>| Response::new(Body::from(body.clone())))
        .unwrap();
    let mut s = connect(server.local_addr());
    // 64 MiB of answers: more than the kernel's socket buffers hold on both ends.
    let requests = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(1000);
    s.write_all(&requests).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // Now read everything: it ends (EOF or reset) well short of 200 answers.
    let mut total = 0usize;
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("hung or failed: {e}"),
        }
    }
    assert!(total < 1000 * 64 * 1024, "every answer was sent: {total}");
    server.shutdown();
}

/// Mixed pipelined requests (plain GETs with extra fields, small and large bodies, chunked
/// bodies, `Content-Length: 0`), written in pieces of random sizes: every one is answered,
/// in order, with what its handler saw, whichever path served it; with the path and
/// without.
#[test]
fn mixed_pipelined_requests_in_random_pieces_are_answered_in_order() {
    for fast in [true, false] {
        let server = Server::builder().http1_fast_path(fast).serve(local(), describe).unwrap();
        for seed in 1..=6u64 {
            // Seeded: the same cases on every run.
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut wire = Vec::new();
            let mut want = Vec::new();
            // Odd seeds: only what the own path serves (GETs, DELETEs, POSTs of small
            // bodies), so its partial heads are exercised; even seeds: everything.
            let kinds = if seed % 2 == 1 { 3 } else { 5 };
            for i in 0..40 {
                let path = format!("/r{i}");
                match [0, 4, 1, 2, 3][rng.usize(..kinds)] {
                    0 => {
                        let extra = "v".repeat(rng.usize(..200));
                        write!(wire, "GET {path} HTTP/1.1\r\nHost: x\r\nX-Extra: {extra}\r\n\r\n").unwrap();
                        want.push(format!("GET {path} 0"));
                    }
                    1 | 2 => {
                        let len = if kinds == 3 {
                            [0, 1, 100][rng.usize(..3)]
                        } else {
                            [0, 1, 100, 5_000, 12_000][rng.usize(..5)]
                        };
                        write!(wire, "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n")
                            .unwrap();
                        wire.extend(std::iter::repeat_n(b'b', len));
                        want.push(format!("POST {path} {len}"));
                    }
                    3 => {
                        let len = rng.usize(..3000) + 1;
                        write!(
                            wire,
                            "PUT {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{len:x}\r\n"
                        )
                        .unwrap();
                        wire.extend(std::iter::repeat_n(b'c', len));
                        wire.extend_from_slice(b"\r\n0\r\n\r\n");
                        want.push(format!("PUT {path} {len}"));
                    }
                    _ => {
                        write!(wire, "DELETE {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
                            .unwrap();
                        want.push(format!("DELETE {path} 0"));
                    }
                }
            }
            let mut s = connect(server.local_addr());
            s.set_nodelay(true).unwrap();
            let reader = {
                let mut r = s.try_clone().unwrap();
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut got = Vec::new();
                    while got.len() < 40 {
                        match read_response(&mut r, &mut buf) {
                            Some(resp) => got.push((resp.status, resp.text())),
                            None => break,
                        }
                    }
                    got
                })
            };
            let mut at = 0;
            while at < wire.len() {
                let n = (rng.usize(..3000) + 1).min(wire.len() - at);
                s.write_all(&wire[at..at + n]).unwrap();
                at += n;
                if rng.usize(..4) == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let got = reader.join().unwrap();
            let texts: Vec<&str> = got.iter().map(|(_, t)| t.as_str()).collect();
            assert_eq!(texts, want, "seed {seed}, fast path {fast}");
            assert!(got.iter().all(|(status, _)| *status == 200));
        }
        server.shutdown();
    }
}

/// Hostile bytes: random garbage, truncated heads and bad fields, each on its own
/// connection, then closed. The server answers an error or closes, never panics or hangs,
/// and serves a proper request afterwards.
#[test]
fn random_garbage_never_stops_the_server() {
    let server =
        Server::builder().header_read_timeout(Duration::from_millis(300)).serve(local(), describe).unwrap();
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let pieces: [&[u8]; 12] = [
        b"GET ",
        b"/ ",
        b"HTTP/1.1",
        b"\r\n",
        b"Host: x",
        b"Content-Length: ",
        b"5",
        b"-1",
        b"Transfer-Encoding: chunked",
        b"\x00\xff",
        b" ",
        b"\n",
    ];
    for _ in 0..150 {
        let mut wire = Vec::new();
        for _ in 0..rng.usize(..20) {
            if rng.usize(..3) == 0 {
                wire.push(rng.u8(..));
            } else {
                wire.extend_from_slice(pieces[rng.usize(..pieces.len())]);
            }
        }
        let mut s = connect(server.local_addr());
        let _ = s.write_all(&wire);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut out = Vec::new();
        // The server answers and closes, or closes at once, or at the header timeout (the
        // client's 20 s read timeout is a hang guard).
        match s.read_to_end(&mut out) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("{e} after {wire:?}"),
        }
    }
    let resp = common::get(server.local_addr(), "/after");
    assert_eq!(resp.text(), "GET /after 0");
    server.shutdown();
}

/// Graceful shutdown on this path: a kept-alive connection waiting for its next request is
/// closed at once (not at its idle timeout), and counted as closed, not cancelled.
#[test]
fn shutdown_closes_a_kept_alive_connection_between_requests() {
    let server = Server::builder().idle_timeout(Duration::from_secs(600)).serve(local(), describe).unwrap();
    let mut s = connect(server.local_addr());
    s.write_all(b"GET /one HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().text(), "GET /one 0");
    let report = server.shutdown_timeout(Duration::from_secs(20));
    assert_eq!(report.cancelled_connections, 0, "{report:?}");
    let mut rest = Vec::new();
    assert!(matches!(s.read_to_end(&mut rest), Ok(0)), "closed by the server: {rest:?}");
}
