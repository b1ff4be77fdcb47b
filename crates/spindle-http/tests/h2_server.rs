//! HTTP/2 beside HTTP/1.1 on the same port (h2c by prior knowledge), with the same handler
//! API and the same limits. The client is hyper's HTTP/2 client on a
//! spindle socket, in a fiber of a runtime of the test's own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use spindle_http::{Body, Request, Response, Server, StatusCode, Version};

/// Sends `reqs` over one HTTP/2 connection to `addr`, all at once, and returns the answers
/// (status, body) in order.
fn h2_exchange(
    addr: std::net::SocketAddr,
    reqs: Vec<Request<Full<Bytes>>>,
) -> Vec<(StatusCode, Version, Bytes)> {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(move || {
        let stream = spindle::net::TcpStream::connect(addr).unwrap();
        let (sender, conn) = spindle::task::block_on(hyper::client::conn::http2::handshake(
            spindle::hyper_rt::Executor,
            stream,
        ))
        .expect("h2 handshake");
        let driver = spindle::task::spawn_local(async move {
            let _ = conn.await;
        });
        let handles: Vec<_> = reqs
            .into_iter()
            .map(|req| {
                let mut sender = sender.clone();
                spindle::task::spawn_local(async move {
                    let res = sender.send_request(req).await.expect("response");
                    let (status, version) = (res.status(), res.version());
                    let body = res.into_body().collect().await.expect("body").to_bytes();
                    (status, version, body)
                })
            })
            .collect();
        let out = handles.into_iter().map(|h| h.join().unwrap()).collect();
        drop(sender);
        driver.abort();
        out
    })
}

fn get(addr: std::net::SocketAddr, path: &str) -> Request<Full<Bytes>> {
    Request::get(format!("http://{addr}{path}")).body(Full::default()).unwrap()
}

#[test]
fn h2c_prior_knowledge_is_answered_by_the_same_handler() {
    let server = Server::builder()
        .serve("127.0.0.1:0", |req: Request<Body>| {
            Response::new(format!("{:?} {}", req.version(), req.uri().path()))
        })
        .unwrap();
    let addr = server.local_addr();
    let out = h2_exchange(addr, vec![get(addr, "/one"), get(addr, "/two")]);
    assert_eq!(out[0], (StatusCode::OK, Version::HTTP_2, Bytes::from("HTTP/2.0 /one")));
    assert_eq!(out[1], (StatusCode::OK, Version::HTTP_2, Bytes::from("HTTP/2.0 /two")));
    // HTTP/1.1 on the same port.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    use std::io::{Read, Write};
    s.write_all(b"GET /three HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200") && text.ends_with("HTTP/1.1 /three"), "{text:?}");
    server.shutdown();
}

#[test]
fn h2_streams_of_one_connection_run_blocking_handlers_concurrently() {
    // Each handler parks (spindle sleep) until 4 handlers are running at once, bounded by
    // 5 s; with streams served one after another the peak would stay 1.
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    let server = Server::builder()
        .serve("127.0.0.1:0", move |_req: Request<Body>| {
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            for _ in 0..500 {
                if p.load(Ordering::SeqCst) >= 4 {
                    break;
                }
                spindle::time::sleep(Duration::from_millis(10));
            }
            r.fetch_sub(1, Ordering::SeqCst);
            Response::new("done")
        })
        .unwrap();
    let addr = server.local_addr();
    let out = h2_exchange(addr, (0..4).map(|_| get(addr, "/")).collect());
    assert!(out.iter().all(|(s, _, b)| *s == StatusCode::OK && b == "done"));
    assert_eq!(peak.load(Ordering::SeqCst), 4);
    server.shutdown();
}

/// A server on one worker polls each stream's first poll inside the connection's poll
/// (`spindle::task::spawn_eager`): a handler that parks there must not hold up the
/// connection's other streams.
#[test]
fn on_one_worker_streams_whose_handlers_park_still_run_concurrently() {
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    let server = Server::builder()
        .workers(1)
        .serve("127.0.0.1:0", move |_req: Request<Body>| {
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            for _ in 0..500 {
                if p.load(Ordering::SeqCst) >= 8 {
                    break;
                }
                spindle::time::sleep(Duration::from_millis(10));
            }
            r.fetch_sub(1, Ordering::SeqCst);
            Response::new("done")
        })
        .unwrap();
    let addr = server.local_addr();
    let out = h2_exchange(addr, (0..8).map(|_| get(addr, "/")).collect());
    assert!(out.iter().all(|(s, _, b)| *s == StatusCode::OK && b == "done"));
    assert_eq!(peak.load(Ordering::SeqCst), 8, "all 8 handlers were parked at once");
    server.shutdown();
}

/// More streams at once on one connection than a poll's I/O budget lets run eagerly (128):
/// every one is answered, with its own answer, whether its first poll was eager or queued.
#[test]
fn on_one_worker_hundreds_of_concurrent_streams_each_get_their_own_answer() {
    let server = Server::builder()
        .workers(1)
        .serve("127.0.0.1:0", |req: Request<Body>| Response::new(req.uri().path().to_string()))
        .unwrap();
    let addr = server.local_addr();
    let n = 300;
    let out = h2_exchange(addr, (0..n).map(|i| get(addr, &format!("/{i}"))).collect());
    assert_eq!(out.len(), n);
    for (i, (status, version, body)) in out.iter().enumerate() {
        assert_eq!((*status, *version), (StatusCode::OK, Version::HTTP_2));
        assert_eq!(body, &format!("/{i}"), "stream {i} got another stream's answer");
    }
    server.shutdown();
}

/// The same with an async handler, which stays in the stream's task: one that waits on a
/// timer returns `Pending` from its eager first poll and is finished by a later one.
#[test]
fn on_one_worker_async_handlers_that_wait_are_finished_later() {
    let server = Server::builder()
        .workers(1)
        .serve_async("127.0.0.1:0", |req: Request<Body>| async move {
            spindle::time::sleep_future(Duration::from_millis(5)).await;
            Response::new(req.uri().path().to_string())
        })
        .unwrap();
    let addr = server.local_addr();
    let out = h2_exchange(addr, (0..20).map(|i| get(addr, &format!("/a{i}"))).collect());
    for (i, (status, _, body)) in out.iter().enumerate() {
        assert_eq!(*status, StatusCode::OK);
        assert_eq!(body, &format!("/a{i}"));
    }
    server.shutdown();
}

#[test]
fn h2_requests_get_the_same_limits() {
    let server = Server::builder()
        .max_body_size(1024)
        .serve("127.0.0.1:0", |req: Request<Body>| match req.into_body().bytes() {
            Ok(b) => Response::new(b.len().to_string()),
            Err(e) => Response::new(e.to_string()),
        })
        .unwrap();
    let addr = server.local_addr();
    let post = |n: usize| {
        Request::post(format!("http://{addr}/")).body(Full::new(Bytes::from(vec![b'x'; n]))).unwrap()
    };
    let out = h2_exchange(addr, vec![post(100), post(4096)]);
    assert_eq!((out[0].0, &out[0].2[..]), (StatusCode::OK, &b"100"[..]));
    assert_eq!(out[1].0, StatusCode::PAYLOAD_TOO_LARGE);
    server.shutdown();
}

#[test]
fn silent_connection_is_closed_at_the_header_timeout_before_the_protocol_is_known() {
    use std::io::Read;
    let server = Server::builder()
        .header_read_timeout(Duration::from_millis(200))
        .serve("127.0.0.1:0", |_req: Request<Body>| Response::new("never"))
        .unwrap();
    let mut s = std::net::TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut out = Vec::new();
    // EOF from the server, long before the 20 s read timeout would fail the test.
    assert!(s.read_to_end(&mut out).is_ok_and(|n| n == 0), "{out:?}");
    server.shutdown();
}
