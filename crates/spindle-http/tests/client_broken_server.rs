//! spindle-http's client against broken and hostile HTTP servers: a server that never
//! answers, one that sends garbage, one that stalls in the middle of its headers, a body
//! shorter than its Content-Length, a header block of a MiB, an endless chunked body, 1xx
//! responses (also an endless stream of them), an unsolicited 101, a reset in the middle of a
//! body, a body that stalls (the read timeout) or trickles (read whole), and HTTP/2 prior
//! knowledge against an HTTP/1 server. Each request ends with the right
//! response or an error of the kind the client's docs promise, never a hang; memory stays
//! bounded; a connection that failed or was left mid-body is never handed out again. The
//! pooled-connection cases are in `client_stale_connections.rs`; servers and harness in
//! `broken_server`.
//!
//! Each case runs under a watchdog that aborts the test binary with "hung: ..." after 30 s, so
//! that a regression fails instead of stalling CI. Nothing here asserts how long anything took.

mod broken_server;

use broken_server::*;

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

/// A server that sends the head and part of the body, then nothing (holding the connection
/// open): the read timeout ends the body with a `ReadTimeout` error, and the connection is not
/// handed out again.
#[test]
fn body_stall_ends_with_the_read_timeout() {
    let _watchdog = Watchdog::arm("body stall");
    let (addr, accepted) = serve(|mut stream, n| {
        if n % 2 == 1 {
            return answer_ok(stream);
        }
        read_head(&mut stream);
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
        hold(stream);
    });
    let url = format!("http://{addr}/");
    let rt = runtime();
    // A read timeout shorter than the request timeout (the body arms its own timer), and one
    // as long (the request's timer goes on into the body: module `client::body`).
    let configs = [
        (Duration::from_secs(30), Duration::from_millis(300)),
        (Duration::from_millis(300), Duration::from_millis(300)),
    ];
    let cases = STYLES.into_iter().flat_map(|style| configs.map(|config| (style, config)));
    for (i, (style, (request, read))) in cases.enumerate() {
        let client = Client::builder().request_timeout(request).read_timeout(read).build();
        match fetch(&rt, style, &client, &url) {
            Outcome::Body(StatusCode::OK, e) => {
                let e = e.downcast::<ClientError>().unwrap_or_else(|e| panic!("{style:?}: {e}"));
                assert_eq!(e.kind(), ClientErrorKind::ReadTimeout, "{style:?}: {e}");
                assert!(e.to_string().contains("read timeout"), "{e}");
            }
            other => panic!("{style:?}: expected a body error, got {other:?}"),
        }
        assert_eq!(fetch(&rt, style, &client, &url).ok().1, "ok", "{style:?}");
        assert_eq!(accepted.load(SeqCst), 2 * i + 2, "{style:?}: the stalled connection was reused");
    }
}

/// A body whose pieces come with pauses far shorter than the read timeout is read whole: the
/// timeout bounds each wait, not the body.
#[test]
fn a_slow_body_that_keeps_coming_is_read_whole() {
    let _watchdog = Watchdog::arm("slow body");
    let (addr, _) = serve(|mut stream, _| {
        read_head(&mut stream);
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        for _ in 0..14 {
            std::thread::sleep(Duration::from_millis(80));
            if stream.write_all(b"1\r\nx\r\n").is_err() {
                return;
            }
        }
        let _ = stream.write_all(b"0\r\n\r\n");
        hold(stream);
    });
    let url = format!("http://{addr}/");
    let rt = runtime();
    for style in STYLES {
        // The whole body takes longer than one read timeout, each pause a fraction of it; the
        // request's own timer (as long as the read timeout) fires in the middle of it.
        for request in [Duration::from_secs(30), Duration::from_secs(1)] {
            let client =
                Client::builder().request_timeout(request).read_timeout(Duration::from_secs(1)).build();
            assert_eq!(fetch(&rt, style, &client, &url).ok().1, "x".repeat(14), "{style:?} {request:?}");
        }
    }
}

/// A head that comes late and body data after a pause shorter than the read timeout: the
/// request's timer, gone on into the body, fires during that pause, and only re-arms (the
/// pause is not yet a read timeout of silence).
#[test]
fn the_request_timer_going_on_into_the_body_does_not_cut_it_short() {
    let _watchdog = Watchdog::arm("late head, paused body");
    let (addr, _) = serve(|mut stream, _| {
        read_head(&mut stream);
        std::thread::sleep(Duration::from_secs(2));
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n");
        std::thread::sleep(Duration::from_millis(1500));
        let _ = stream.write_all(b"late");
        hold(stream);
    });
    let url = format!("http://{addr}/");
    let rt = runtime();
    for style in STYLES {
        // The request's timer fires 3 s after the call: 1 s after the head, 0.5 s before the
        // body's data.
        let timeout = Duration::from_secs(3);
        let client = Client::builder().request_timeout(timeout).read_timeout(timeout).build();
        assert_eq!(fetch(&rt, style, &client, &url).ok().1, "late", "{style:?}");
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
