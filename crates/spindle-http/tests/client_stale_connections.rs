//! spindle-http's client and the connections it keeps: a keep-alive server that hangs up on
//! its idle connections (with and without reading the next request first), hundreds of
//! requests against a server that hangs up after every response, and a server that answers
//! before reading the request body and then neither reads nor closes. A request sent on a
//! pooled connection the server had closed is sent again on another (an unsent one, or an
//! idempotent one with its body in memory), never failed spuriously; a connection that is not
//! ready for its next request is never handed out. Servers and harness: `broken_server`.
//!
//! Each case runs under a watchdog that aborts the test binary with "hung: ..." after 30 s, so
//! that a regression fails instead of stalling CI. Nothing here asserts how long anything took.

mod broken_server;

use broken_server::*;

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
