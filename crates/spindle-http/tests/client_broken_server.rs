//! spindle-http's client against broken and hostile HTTP servers written with plain
//! `std::net` sockets: a server that never answers, one that sends garbage, one that stalls in
//! the middle of its headers, a body shorter than its Content-Length, a header block of a
//! MiB, an endless chunked body, a keep-alive server that hangs up on its idle connections,
//! 1xx responses, a reset in the middle of a body, hundreds of requests against a server that
//! hangs up after every response, HTTP/2 prior knowledge against an HTTP/1 server, and a
//! server that answers before reading the request body. Each request ends with the right
//! response or an error of the kind the client's docs promise, never a hang; memory stays
//! bounded; a connection that failed or was left mid-body is never handed out again.
//!
//! Each case runs under a watchdog that aborts the test binary with "hung: ..." after 30 s, so
//! that a regression fails instead of stalling CI. Nothing here asserts how long anything took.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use bytes::Bytes;
use spindle_http::{Body, BoxError, Client, ClientError, ClientErrorKind, Request, StatusCode};

/// Aborts the process if it is not dropped within 30 s (a panic on another thread would not
/// fail the test, and the hung thread could not be unwound anyway).
struct Watchdog(Option<mpsc::Sender<()>>);

impl Watchdog {
    fn arm(case: &'static str) -> Watchdog {
        let (done, wait) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(Duration::from_secs(30)) {
                // Straight to the file: the test harness would keep an `eprintln!` in its
                // capture, lost with the process.
                let _ = writeln!(std::io::stderr(), "hung: {case} did not finish within 30 s");
                std::process::abort();
            }
        });
        Watchdog(Some(done))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            let _ = done.send(());
        }
    }
}

fn runtime() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(2).build().unwrap()
}

/// Accepts connections on a thread, each handled by `serve(stream, n)` (`n`: 0 for the first
/// connection, 1 for the second...) on a thread of its own; the number accepted so far.
fn serve(serve: impl Fn(TcpStream, usize) + Send + Sync + 'static) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let n = count.fetch_add(1, SeqCst);
            let serve = serve.clone();
            std::thread::spawn(move || serve(stream, n));
        }
    });
    (addr, accepted)
}

/// Reads one request head (up to its blank line); false if the connection ends first.
fn read_head(stream: &mut TcpStream) -> bool {
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
fn hold(mut stream: TcpStream) {
    let mut sink = [0u8; 4096];
    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
}

/// Answers each request on the connection with `ok` (keep-alive) until the client closes it.
fn answer_ok(mut stream: TcpStream) {
    while read_head(&mut stream) {
        if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").is_err() {
            return;
        }
    }
}

/// A client with a short request timeout (the silent cases end with it).
fn client() -> Client {
    Client::builder().request_timeout(Duration::from_millis(300)).build()
}

/// How an exchange ended.
#[derive(Debug)]
enum Outcome {
    /// The request failed before a response head.
    Head(ClientError),
    /// The head arrived (its status), reading the body failed.
    Body(StatusCode, BoxError),
    /// The head and the whole body arrived.
    Ok(StatusCode, Bytes),
}

impl Outcome {
    #[track_caller]
    fn head_error(self, kind: ClientErrorKind) -> ClientError {
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
    fn ok(self) -> (StatusCode, Bytes) {
        match self {
            Outcome::Ok(status, body) => (status, body),
            other => panic!("expected a response, got {other:?}"),
        }
    }
}

/// Blocking style from a fiber, or `Client::send` from an async task.
#[derive(Debug, Clone, Copy)]
enum Style {
    Fiber,
    Task,
}

const STYLES: [Style; 2] = [Style::Fiber, Style::Task];

/// `GET url` with `client` in `style`, its body read to the end.
fn fetch(rt: &spindle::Runtime, style: Style, client: &Client, url: &str) -> Outcome {
    let req = Request::get(url).body(Body::empty()).unwrap();
    send(rt, style, client, req)
}

fn send(rt: &spindle::Runtime, style: Style, client: &Client, req: Request<Body>) -> Outcome {
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
fn wait_for<T>(read: impl Fn() -> T, want: impl Fn(&T) -> bool) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let value = read();
        if want(&value) || std::time::Instant::now() > deadline {
            return value;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A server that reads the request and never answers: the request timeout ends it; the timed
/// out connection is closed (the server sees the end) and its pool slot freed, so that the
/// next request, with one connection allowed per host, gets a new connection.
#[test]
fn silent_server_ends_with_the_request_timeout() {
    let _watchdog = Watchdog::arm("silent server");
    let closed = Arc::new(AtomicUsize::new(0));
    let seen = closed.clone();
    let (addr, accepted) = serve(move |mut stream, n| {
        if n % 2 == 0 {
            read_head(&mut stream);
            hold(stream);
            seen.fetch_add(1, SeqCst);
        } else {
            answer_ok(stream);
        }
    });
    let url = format!("http://{addr}/");
    let rt = runtime();
    for (i, style) in STYLES.into_iter().enumerate() {
        let client =
            Client::builder().request_timeout(Duration::from_millis(300)).max_connections_per_host(1).build();
        fetch(&rt, style, &client, &url).head_error(ClientErrorKind::RequestTimeout);
        assert_eq!(wait_for(|| closed.load(SeqCst), |&n| n == i + 1), i + 1, "{style:?}: not closed");
        let (status, body) = fetch(&rt, style, &client, &url).ok();
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"ok"[..]), "{style:?}");
        assert_eq!(accepted.load(SeqCst), 2 * i + 2, "{style:?}");
    }
}

/// A server that answers with bytes that are not HTTP: a protocol error.
#[test]
fn garbage_instead_of_a_status_line_is_a_protocol_error() {
    let _watchdog = Watchdog::arm("garbage server");
    for garbage in
        [&b"SSH-2.0-OpenSSH_9.6\r\n"[..], b"\x00\x01\x02\x03garbage\r\n\r\n", b"HTTP/1.1 abc OK\r\n\r\n"]
    {
        let (addr, _) = serve(move |mut stream, _| {
            read_head(&mut stream);
            let _ = stream.write_all(garbage);
            hold(stream);
        });
        let rt = runtime();
        for style in STYLES {
            fetch(&rt, style, &client(), &format!("http://{addr}/")).head_error(ClientErrorKind::Protocol);
        }
    }
}

/// A status line and some headers, then nothing: the request timeout ends it.
#[test]
fn stall_in_the_middle_of_the_headers_ends_with_the_request_timeout() {
    let _watchdog = Watchdog::arm("stall mid-headers");
    let (addr, _) = serve(|mut stream, _| {
        read_head(&mut stream);
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Half: ");
        hold(stream);
    });
    let rt = runtime();
    for style in STYLES {
        fetch(&rt, style, &client(), &format!("http://{addr}/")).head_error(ClientErrorKind::RequestTimeout);
    }
}

/// `Content-Length: 100`, 10 bytes, then the server closes: reading the body fails (no short
/// body reported as complete), and the next request gets a new connection.
#[test]
fn body_shorter_than_its_content_length_is_an_error_and_the_connection_is_not_reused() {
    let _watchdog = Watchdog::arm("short body");
    let (addr, accepted) = serve(|mut stream, n| {
        if n % 2 == 1 {
            return answer_ok(stream);
        }
        read_head(&mut stream);
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
    });
    let url = format!("http://{addr}/");
    let rt = runtime();
    for (i, style) in STYLES.into_iter().enumerate() {
        let client = client();
        match fetch(&rt, style, &client, &url) {
            Outcome::Body(StatusCode::OK, e) => assert!(!e.to_string().is_empty()),
            other => panic!("{style:?}: expected a body error, got {other:?}"),
        }
        assert_eq!(fetch(&rt, style, &client, &url).ok().1, "ok", "{style:?}");
        assert_eq!(accepted.load(SeqCst), 2 * i + 2, "{style:?}");
    }
}

/// A status line followed by a MiB of headers (many lines, or one huge line), and 10,000 tiny
/// headers: a protocol error once the client's head buffer limit is reached, not a MiB
/// buffered.
#[test]
fn huge_header_block_is_a_protocol_error() {
    let _watchdog = Watchdog::arm("huge headers");
    let many_lines: Vec<u8> =
        (0..1024).flat_map(|i| format!("X-Filler-{i}: {}\r\n", "a".repeat(1000)).into_bytes()).collect();
    let one_line = format!("X-Huge: {}\r\n", "b".repeat(1 << 20)).into_bytes();
    let tiny: Vec<u8> = (0..10_000).flat_map(|i| format!("x{i}: y\r\n").into_bytes()).collect();
    for headers in [many_lines, one_line, tiny] {
        let headers = Arc::new(headers);
        let (addr, _) = serve(move |mut stream, _| {
            read_head(&mut stream);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\n");
            let _ = stream.write_all(&headers);
            let _ = stream.write_all(b"Content-Length: 2\r\n\r\nok");
            hold(stream);
        });
        let rt = runtime();
        for style in STYLES {
            let err = fetch(&rt, style, &client(), &format!("http://{addr}/"))
                .head_error(ClientErrorKind::Protocol);
            let why = format!("{err}").to_lowercase();
            assert!(why.contains("large") || why.contains("too many"), "{err}");
        }
    }
}

/// What the endless-body server saw.
#[derive(Default)]
struct Endless {
    /// Bytes of body written so far.
    written: AtomicUsize,
    /// Set when a write has stayed blocked for 200 ms (the client stopped reading).
    blocked: AtomicBool,
    /// Set when the client closed the connection.
    closed: AtomicBool,
}

/// An endless chunked body, read slowly and then dropped: the server's writes block (the
/// client buffers a bounded amount), and dropping the response closes the connection rather
/// than pooling it (the next request opens a new one).
#[test]
fn endless_chunked_body_is_read_with_backpressure_and_closed_when_dropped() {
    let _watchdog = Watchdog::arm("endless chunked body");
    for style in STYLES {
        let seen = Arc::new(Endless::default());
        let server = seen.clone();
        let (addr, accepted) = serve(move |mut stream, n| {
            if n > 0 {
                return answer_ok(stream);
            }
            read_head(&mut stream);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
            stream.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
            let chunk = format!("4000\r\n{}\r\n", "z".repeat(0x4000)).into_bytes();
            loop {
                match stream.write(&chunk) {
                    Ok(n) => server.written.fetch_add(n, SeqCst),
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        server.blocked.store(true, SeqCst);
                        continue;
                    }
                    Err(_) => break, // the client closed the connection
                };
            }
            server.closed.store(true, SeqCst);
        });
        let url = format!("http://{addr}/");
        let rt = runtime();
        let client = client();
        let (c, u, s) = (client.clone(), url.clone(), seen.clone());
        // Read the head and one frame, then wait (parked, not blocking a worker) until the
        // server's writes block, then drop the response.
        let first = async move {
            let res = c.send(Request::get(u).body(Body::empty()).unwrap()).await.unwrap();
            let mut body = res.into_body();
            let frame = http_body_util::BodyExt::frame(&mut body).await.unwrap().unwrap();
            assert!(frame.is_data());
            while !s.blocked.load(SeqCst) {
                spindle::time::sleep_future(Duration::from_millis(5)).await;
            }
            drop(body);
        };
        match style {
            Style::Fiber => rt.block_on(move || spindle::task::block_on(first)),
            Style::Task => rt.spawn_async(first).join().unwrap(),
        }
        let written = seen.written.load(SeqCst);
        assert!(written < 32 << 20, "{style:?}: the client took {written} bytes of a body it did not read");
        assert!(wait_for(|| seen.closed.load(SeqCst), |&c| c), "{style:?}: connection left open");
        assert_eq!(fetch(&rt, style, &client, &url).ok().1, "ok");
        assert_eq!(accepted.load(SeqCst), 2, "{style:?}: the dropped connection was reused");
    }
}

/// A keep-alive server that answers one request per connection and then closes it, without
/// saying so (no `Connection: close`). A second request sent at once may find the pooled
/// connection closed or closing: it is sent again on a new connection, never failed.
#[test]
fn server_closing_idle_pooled_connections_does_not_fail_the_next_request() {
    let _watchdog = Watchdog::arm("server closes idle connections");
    let (addr, accepted) = serve(|mut stream, _| {
        if read_head(&mut stream) {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    let url = format!("http://{addr}/");
    let rt = runtime();
    let mut sent = 0;
    for style in STYLES {
        let client = client();
        for _ in 0..20 {
            for _ in 0..2 {
                assert_eq!(fetch(&rt, style, &client, &url).ok().1, "ok", "{style:?}");
                sent += 1;
            }
        }
    }
    assert!(accepted.load(SeqCst) <= sent);
}

/// A keep-alive server that answers the first request of a connection, then reads the second
/// and closes (or resets) the connection without answering: the race of a server closing an
/// idle connection while a request is on its way, made certain. An idempotent request with a
/// body that can be sent again (GET, PUT of bytes) is retried on a new connection; a POST
/// fails with a protocol error saying the connection closed.
#[test]
fn request_on_a_pooled_connection_the_server_closes_is_retried_if_idempotent() {
    let _watchdog = Watchdog::arm("server closes with a request in flight");
    for reset in [false, true] {
        let (addr, accepted) = serve(move |mut stream, _| {
            if !read_head(&mut stream) {
                return;
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            read_head(&mut stream);
            if reset {
                socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)).unwrap();
            }
        });
        let url = format!("http://{addr}/");
        let rt = runtime();
        for style in STYLES {
            for method in ["GET", "PUT", "POST"] {
                let client = client();
                let req = || Request::builder().method(method).uri(&url).body(Body::from("x")).unwrap();
                let before = accepted.load(SeqCst);
                assert_eq!(send(&rt, style, &client, req()).ok().1, "ok", "{style:?} {method}");
                match (method, send(&rt, style, &client, req())) {
                    ("POST", Outcome::Head(e)) => assert_eq!(e.kind(), ClientErrorKind::Protocol, "{e}"),
                    ("POST", other) => panic!("{style:?} reset {reset}: POST: {other:?}"),
                    (_, outcome) => {
                        assert_eq!(outcome.ok().1, "ok", "{style:?} reset {reset} {method}");
                        assert_eq!(accepted.load(SeqCst), before + 2, "{style:?} {method}");
                    }
                }
            }
        }
    }
}

/// `100 Continue` (or `103 Early Hints`) and then nothing: the request timeout; 1xx responses
/// and then a 200: the 200.
#[test]
fn informational_responses_are_skipped() {
    let _watchdog = Watchdog::arm("1xx responses");
    let rt = runtime();
    for then_nothing in
        [&b"HTTP/1.1 100 Continue\r\n\r\n"[..], b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"]
    {
        let (addr, _) = serve(move |mut stream, _| {
            read_head(&mut stream);
            let _ = stream.write_all(then_nothing);
            hold(stream);
        });
        for style in STYLES {
            fetch(&rt, style, &client(), &format!("http://{addr}/"))
                .head_error(ClientErrorKind::RequestTimeout);
        }
    }
    let (addr, _) = serve(|stream, _| {
        let mut stream = stream;
        while read_head(&mut stream) {
            let _ = stream.write_all(
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n\
                  HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            );
        }
    });
    for style in STYLES {
        let client = client();
        for _ in 0..2 {
            let (status, body) = fetch(&rt, style, &client, &format!("http://{addr}/")).ok();
            assert_eq!((status, &body[..]), (StatusCode::OK, &b"ok"[..]), "{style:?}");
        }
    }
}

/// An endless stream of `100 Continue`: the request timeout, memory bounded (hyper drops
/// each 1xx head), and the connection is closed (the server's writes fail).
#[test]
fn endless_informational_responses_end_with_the_request_timeout() {
    let _watchdog = Watchdog::arm("endless 1xx responses");
    let rt = runtime();
    let closed = Arc::new(AtomicUsize::new(0));
    let seen = closed.clone();
    let (addr, _) = serve(move |mut stream, _| {
        read_head(&mut stream);
        while stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_ok() {}
        seen.fetch_add(1, SeqCst);
    });
    for (i, style) in STYLES.into_iter().enumerate() {
        fetch(&rt, style, &client(), &format!("http://{addr}/")).head_error(ClientErrorKind::RequestTimeout);
        assert_eq!(wait_for(|| closed.load(SeqCst), |&n| n == i + 1), i + 1, "{style:?}: not closed");
    }
}

/// A `101 Switching Protocols` the client did not ask for: not a usable response, and the
/// connection is not reused.
#[test]
fn unsolicited_switching_protocols_is_not_reused() {
    let _watchdog = Watchdog::arm("unsolicited 101");
    let (addr, accepted) = serve(|mut stream, n| {
        if n % 2 == 1 {
            return answer_ok(stream);
        }
        read_head(&mut stream);
        let _ = stream.write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: upgrade\r\n\r\n\x00\x01",
        );
        hold(stream);
    });
    let url = format!("http://{addr}/");
    let rt = runtime();
    for (i, style) in STYLES.into_iter().enumerate() {
        let client = client();
        let outcome = fetch(&rt, style, &client, &url);
        assert!(
            matches!(&outcome, Outcome::Head(e) if e.kind() == ClientErrorKind::Protocol)
                || matches!(&outcome, Outcome::Ok(StatusCode::SWITCHING_PROTOCOLS, _)),
            "{style:?}: {outcome:?}"
        );
        assert_eq!(fetch(&rt, style, &client, &url).ok().1, "ok");
        assert_eq!(accepted.load(SeqCst), 2 * i + 2, "{style:?}");
    }
}

/// A reset (SO_LINGER 0 close) in the middle of the body: reading the body fails, the next
/// request gets a new connection. A reset before the head: a protocol error.
#[test]
fn reset_during_the_body_is_a_body_error() {
    let _watchdog = Watchdog::arm("reset mid-body");
    for before_head in [false, true] {
        let (addr, accepted) = serve(move |mut stream, n| {
            if n % 2 == 1 {
                return answer_ok(stream);
            }
            read_head(&mut stream);
            if !before_head {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
                let _ = stream.write_all(&[b'r'; 100]);
                std::thread::sleep(Duration::from_millis(50));
            }
            socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)).unwrap();
        });
        let url = format!("http://{addr}/");
        let rt = runtime();
        for (i, style) in STYLES.into_iter().enumerate() {
            let client = client();
            match fetch(&rt, style, &client, &url) {
                Outcome::Body(StatusCode::OK, _) if !before_head => {}
                Outcome::Head(e) if before_head && e.kind() == ClientErrorKind::Protocol => {}
                other => panic!("{style:?} before head {before_head}: {other:?}"),
            }
            assert_eq!(fetch(&rt, style, &client, &url).ok().1, "ok");
            assert_eq!(accepted.load(SeqCst), 2 * i + 2, "{style:?}");
        }
    }
}

/// 200 requests at once (fibers, then async tasks) against a server that hangs up after
/// every response, without saying so: every request ends (with the response, or a protocol
/// error), the client never has more connections open than its per-host limit, and opens at
/// most one a request.
#[test]
fn many_requests_against_a_server_that_hangs_up_after_every_response() {
    let _watchdog = Watchdog::arm("many requests, hang-up server");
    const REQUESTS: usize = 200;
    const LIMIT: usize = 8;
    for style in STYLES {
        let open = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (o, p) = (open.clone(), peak.clone());
        let (addr, accepted) = serve(move |mut stream, _| {
            p.fetch_max(o.fetch_add(1, SeqCst) + 1, SeqCst);
            if read_head(&mut stream) {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
            o.fetch_sub(1, SeqCst);
        });
        let url = format!("http://{addr}/");
        let rt = runtime();
        let client = Client::builder()
            .max_connections_per_host(LIMIT)
            .request_timeout(Duration::from_secs(20))
            .build();
        let outcomes: Vec<Outcome> = match style {
            Style::Fiber => rt.block_on(move || {
                let fibers: Vec<_> = (0..REQUESTS)
                    .map(|_| {
                        let (client, url) = (client.clone(), url.clone());
                        spindle::spawn(move || match client.get(&url) {
                            Err(e) => Outcome::Head(e),
                            Ok(res) => match res.into_body().bytes() {
                                Ok(b) => Outcome::Ok(StatusCode::OK, b),
                                Err(e) => Outcome::Body(StatusCode::OK, e),
                            },
                        })
                    })
                    .collect();
                fibers.into_iter().map(|f| f.join().unwrap()).collect()
            }),
            Style::Task => {
                let tasks: Vec<_> = (0..REQUESTS)
                    .map(|_| {
                        let (client, url) = (client.clone(), url.clone());
                        rt.spawn_async(async move {
                            match client.send(Request::get(url).body(Body::empty()).unwrap()).await {
                                Err(e) => Outcome::Head(e),
                                Ok(res) => match http_body_util::BodyExt::collect(res.into_body()).await {
                                    Ok(b) => Outcome::Ok(StatusCode::OK, b.to_bytes()),
                                    Err(e) => Outcome::Body(StatusCode::OK, e),
                                },
                            }
                        })
                    })
                    .collect();
                tasks.into_iter().map(|t| t.join().unwrap()).collect()
            }
        };
        let mut ok = 0;
        for outcome in outcomes {
            match outcome {
                Outcome::Ok(_, body) if body == "ok" => ok += 1,
                Outcome::Head(e) if e.kind() == ClientErrorKind::Protocol => {}
                other => panic!("{style:?}: {other:?}"),
            }
        }
        assert_eq!(ok, REQUESTS, "{style:?}: {ok} of {REQUESTS} requests succeeded");
        let (accepted, peak) = (accepted.load(SeqCst), peak.load(SeqCst));
        assert!(accepted <= REQUESTS, "{style:?}: {accepted} connections for {REQUESTS} requests");
        assert!(peak <= LIMIT, "{style:?}: {peak} connections at once, limit {LIMIT}");
    }
}

/// HTTP/2 by prior knowledge against an HTTP/1.1 server: one that answers the preface with a
/// 400 and closes, a protocol error; one that says nothing, the request timeout.
#[test]
fn http2_prior_knowledge_against_an_http1_server() {
    let _watchdog = Watchdog::arm("h2 against h1");
    let rt = runtime();
    for answer in [true, false] {
        let (addr, _) = serve(move |mut stream, _| {
            read_head(&mut stream); // the preface looks like a request head
            if answer {
                let _ = stream
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            } else {
                hold(stream);
            }
        });
        for style in STYLES {
            let client = Client::builder()
                .http2_prior_knowledge(true)
                .request_timeout(Duration::from_millis(300))
                .build();
            let kind = if answer { ClientErrorKind::Protocol } else { ClientErrorKind::RequestTimeout };
            fetch(&rt, style, &client, &format!("http://{addr}/")).head_error(kind);
        }
    }
}

/// A server that answers before reading the request body. A polite one (it then reads the
/// body, and closes) gets its answer through; a rude one (keep-alive, and it never reads the
/// body) too, and its connection, still busy sending the body, is not handed to the next
/// request.
#[test]
fn response_before_the_request_body_is_read() {
    let _watchdog = Watchdog::arm("early response");
    let rt = runtime();
    let big = || Body::from(vec![b'u'; 8 << 20]);
    for style in STYLES {
        // Polite: 413, then drain and close.
        let (addr, _) = serve(|mut stream, _| {
            read_head(&mut stream);
            let _ = stream.write_all(
                b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbig",
            );
            let _ = stream.shutdown(std::net::Shutdown::Write);
            hold(stream);
        });
        let req = Request::post(format!("http://{addr}/")).body(big()).unwrap();
        let (status, body) = send(&rt, style, &client(), req).ok();
        assert_eq!((status, &body[..]), (StatusCode::PAYLOAD_TOO_LARGE, &b"big"[..]), "{style:?}");

        // Rude: 200 on a keep-alive connection it then neither reads nor closes.
        let (addr, accepted) = serve(|mut stream, n| {
            if n > 0 {
                return answer_ok(stream);
            }
            read_head(&mut stream);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            std::thread::sleep(Duration::from_secs(5));
        });
        let url = format!("http://{addr}/");
        let client = client();
        let req = Request::post(&url).body(big()).unwrap();
        let outcome = send(&rt, style, &client, req);
        assert!(
            matches!(&outcome, Outcome::Ok(StatusCode::OK, b) if b == "ok")
                || matches!(&outcome, Outcome::Head(e) if e.kind() == ClientErrorKind::RequestTimeout),
            "{style:?}: {outcome:?}"
        );
        assert_eq!(fetch(&rt, style, &client, &url).ok().1, "ok", "{style:?}");
        assert_eq!(accepted.load(SeqCst), 2, "{style:?}");
    }
}
