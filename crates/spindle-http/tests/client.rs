//! The HTTP client against spindle-http's own server: keep-alive reuse,
//! HTTP/2 by prior knowledge, pool limits and idle timeout, timeouts and connect errors,
//! streaming bodies both ways, blocking style in fibers and futures in tasks.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Frame;
use spindle_http::{Body, BoxError, Client, ClientErrorKind, Request, Response, Server, Version};

fn runtime() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(1).build().unwrap()
}

/// `read()`, polled every 10 ms until `want` holds of it or `limit` passes; the last reading.
fn poll_count(limit: Duration, read: impl Fn() -> usize, want: impl Fn(usize) -> bool) -> usize {
    let deadline = Instant::now() + limit;
    loop {
        let n = read();
        if want(n) || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The server's open connections, polled until `want` holds or 5 s pass.
fn connections(server: &Server, want: impl Fn(usize) -> bool) -> usize {
    poll_count(Duration::from_secs(5), || server.open_connections(), want)
}

fn echo_server() -> Server {
    Server::builder()
        .max_body_size(16 << 20)
        .serve("127.0.0.1:0", |req: Request<Body>| {
            let version = format!("{:?}", req.version());
            if req.uri().path() == "/len" {
                let n = req.into_body().bytes().map(|b| b.len()).unwrap_or(0);
                return Response::new(Body::from(n.to_string()));
            }
            if let Some(n) = req.uri().path().strip_prefix("/bytes/") {
                let n: usize = n.parse().unwrap();
                return Response::new(Body::wrap(Chunks { left: n }));
            }
            Response::new(Body::from(version))
        })
        .unwrap()
}

/// A body of `left` bytes in 64 KiB chunks.
struct Chunks {
    left: usize,
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
        let n = this.left.min(64 * 1024);
        this.left -= n;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b'c'; n])))))
    }
}

#[test]
fn keep_alive_requests_reuse_one_pooled_connection() {
    let server = echo_server();
    let url = format!("http://{}/", server.local_addr());
    let client = Client::new();
    // The runtime stays alive while the server's connections are counted: the pooled
    // connections' drivers run on it.
    let rt = runtime();
    let texts = rt.block_on(move || {
        (0..5).map(|_| client.get(&url).unwrap().into_body().text().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(texts, vec!["HTTP/1.1"; 5]);
    assert_eq!(connections(&server, |n| n == 1), 1);
    drop(rt);
    server.shutdown();
}

/// On a `LocalRuntime` the pooled connection's driver task waits between two `block_on`
/// calls (nothing runs then) and serves the next call's request: one connection for both.
#[test]
fn a_local_runtime_keeps_its_pooled_connection_between_block_on_calls() {
    let server = echo_server();
    let url = format!("http://{}/", server.local_addr());
    let client = Client::new();
    let rt = spindle::LocalRuntime::new().unwrap();
    let first = rt.block_on({
        let (client, url) = (client.clone(), url.clone());
        move || client.get(&url).unwrap().into_body().text().unwrap()
    });
    assert_eq!(client.pooled_connections(), 1, "the connection went back to the pool");
    let second = rt.block_on(move || {
        let text = client.get(&url).unwrap().into_body().text().unwrap();
        (text, client.pooled_connections())
    });
    assert_eq!((first.as_str(), second.0.as_str(), second.1), ("HTTP/1.1", "HTTP/1.1", 1));
    assert_eq!(connections(&server, |n| n == 1), 1, "both requests on one connection");
    drop(rt);
    assert_eq!(connections(&server, |n| n == 0), 0, "the runtime's drop closed it");
    server.shutdown();
}

#[test]
fn http2_prior_knowledge_multiplexes_tasks_on_one_connection() {
    let server = echo_server();
    let url: spindle_http::Uri = format!("http://{}/", server.local_addr()).parse().unwrap();
    let client = Client::builder().http2_prior_knowledge(true).build();
    let rt = runtime();
    let out = rt.block_on(move || {
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let send = client.send(Request::get(url.clone()).body(Body::empty()).unwrap());
                spindle::task::spawn_local(async move {
                    use http_body_util::BodyExt;
                    let res = send.await.unwrap();
                    let version = res.version();
                    (version, res.into_body().collect().await.unwrap().to_bytes())
                })
            })
            .collect();
        tasks.into_iter().map(|t| t.join().unwrap()).collect::<Vec<_>>()
    });
    assert!(out.iter().all(|(v, b)| *v == Version::HTTP_2 && b == "HTTP/2.0"), "{out:?}");
    assert_eq!(connections(&server, |n| n == 1), 1);
    drop(rt);
    server.shutdown();
}

#[test]
fn pool_limits_open_connections_per_host() {
    // Each request holds its connection for a while; 6 requests from 6 fibers over at most
    // 2 connections: the server never runs more than 2 handlers at once.
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    let server = Server::builder()
        .serve("127.0.0.1:0", move |_req: Request<Body>| {
            p.fetch_max(r.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            spindle::time::sleep(Duration::from_millis(30));
            r.fetch_sub(1, Ordering::SeqCst);
            Response::new("ok")
        })
        .unwrap();
    let url = format!("http://{}/", server.local_addr());
    let client = Client::builder().max_connections_per_host(2).build();
    let ok = runtime().block_on(move || {
        let fibers: Vec<_> = (0..6)
            .map(|_| {
                let (client, url) = (client.clone(), url.clone());
                spindle::spawn(move || client.get(&url).unwrap().into_body().text().unwrap())
            })
            .collect();
        fibers.into_iter().map(|f| f.join().unwrap()).filter(|t| t == "ok").count()
    });
    assert_eq!(ok, 6);
    let peak = peak.load(Ordering::SeqCst);
    assert!((1..=2).contains(&peak), "{peak} handlers ran at once over a 2-connection pool");
    server.shutdown();
}

#[test]
fn idle_pooled_connection_is_closed_after_the_idle_timeout() {
    let server = echo_server();
    let url = format!("http://{}/", server.local_addr());
    let client = Client::builder().idle_timeout(Duration::from_millis(100)).build();
    let rt = runtime();
    let c = client.clone();
    let u = url.clone();
    assert_eq!(rt.block_on(move || c.get(&u).unwrap().status()), 200);
    // The client closes its idle connection; the server closes its end.
    assert_eq!(connections(&server, |n| n == 0), 0);
    // And the next request opens a new one.
    assert_eq!(rt.block_on(move || client.get(&url).unwrap().status()), 200);
    server.shutdown();
}

#[test]
fn idle_http2_connection_is_closed_after_the_idle_timeout_but_not_while_a_stream_is_open() {
    let server = echo_server();
    let addr = server.local_addr();
    let client =
        Client::builder().http2_prior_knowledge(true).idle_timeout(Duration::from_millis(100)).build();
    let rt = runtime();
    let c = client.clone();
    let held = rt.block_on(move || {
        assert_eq!(c.get(&format!("http://{addr}/")).unwrap().into_body().text().unwrap(), "HTTP/2.0");
        // A response whose body is not read yet keeps its stream, and so the connection, in use
        // for longer than the idle timeout.
        let held = c.get(&format!("http://{addr}/bytes/{}", 1 << 20)).unwrap();
        spindle::time::sleep(Duration::from_millis(400));
        held
    });
    assert_eq!(server.open_connections(), 1, "closed while a stream was open");
    let len = rt.block_on(move || held.into_body().bytes().unwrap().len());
    assert_eq!(len, 1 << 20);
    // The last stream ended: the client closes the idle connection, the server its end.
    assert_eq!(connections(&server, |n| n == 0), 0);
    // And the next request opens a new one.
    let url = format!("http://{addr}/");
    assert_eq!(rt.block_on(move || client.get(&url).unwrap().into_body().text().unwrap()), "HTTP/2.0");
    assert_eq!(connections(&server, |n| n == 1), 1);
    drop(rt);
    server.shutdown();
}

#[test]
fn send_futures_run_in_send_tasks_that_any_worker_may_poll() {
    let server = echo_server();
    let addr = server.local_addr();
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    for h2 in [false, true] {
        let client = Client::builder().http2_prior_knowledge(h2).build();
        // `spawn_async` takes only `Send` futures: these tasks may be stolen by either worker
        // between two polls, while the connections they use stay with the worker that opened
        // them.
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let client = client.clone();
                rt.spawn_async(async move {
                    let mut bodies = Vec::new();
                    for _ in 0..3 {
                        let req = Request::post(format!("http://{addr}/len"))
                            .body(Body::from(vec![7u8; i]))
                            .unwrap();
                        let res = client.send(req).await.unwrap();
                        bodies.push(
                            http_body_util::BodyExt::collect(res.into_body()).await.unwrap().to_bytes(),
                        );
                    }
                    bodies
                })
            })
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            let bodies = task.join().unwrap();
            assert_eq!(bodies, vec![Bytes::from(i.to_string()); 3], "h2 = {h2}");
        }
    }
    drop(rt);
    server.shutdown();
}

#[test]
fn timeouts_and_connect_errors_are_reported_by_kind() {
    let server = Server::builder()
        .serve("127.0.0.1:0", |_req: Request<Body>| {
            spindle::time::sleep(Duration::from_secs(2));
            Response::new("late")
        })
        .unwrap();
    let slow = format!("http://{}/", server.local_addr());
    // A port with no listener: bind one, note its port, close it.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/", l.local_addr().unwrap())
    };
    let client = Client::builder().request_timeout(Duration::from_millis(200)).build();
    let (timeout, refused, bad) = runtime().block_on(move || {
        (
            client.get(&slow).unwrap_err(),
            client.get(&closed).unwrap_err(),
            client.get("ftp://x/").unwrap_err(),
        )
    });
    assert_eq!(timeout.kind(), ClientErrorKind::RequestTimeout, "{timeout}");
    assert_eq!(refused.kind(), ClientErrorKind::Connect, "{refused}");
    assert!(refused.to_string().contains("127.0.0.1"), "{refused}");
    assert_eq!(bad.kind(), ClientErrorKind::InvalidUrl, "{bad}");
    server.shutdown_timeout(Duration::from_secs(5));
}

#[test]
fn bodies_stream_both_ways() {
    let server = echo_server();
    let addr = server.local_addr();
    let client = Client::new();
    let (uploaded, downloaded, chunks) = runtime().block_on(move || {
        let req =
            Request::post(format!("http://{addr}/len")).body(Body::wrap(Chunks { left: 4 << 20 })).unwrap();
        let uploaded = client.request(req).unwrap().into_body().text().unwrap();
        // Read a 8 MiB response frame by frame.
        let res = client.get(&format!("http://{addr}/bytes/{}", 8 << 20)).unwrap();
        let mut body = res.into_body();
        let (mut total, mut chunks) = (0usize, 0usize);
        while let Some(frame) = spindle::task::block_on(http_body_util::BodyExt::frame(&mut body)) {
            total += frame.unwrap().into_data().map(|d| d.len()).unwrap_or(0);
            chunks += 1;
        }
        (uploaded, total, chunks)
    });
    assert_eq!(uploaded, (4 << 20).to_string());
    assert_eq!(downloaded, 8 << 20);
    assert!(chunks > 1, "streamed in pieces");
    server.shutdown();
}

#[test]
fn client_outside_a_runtime_says_so() {
    let err = Client::new().get("http://127.0.0.1:9/").unwrap_err();
    assert_eq!(err.kind(), ClientErrorKind::NoRuntime, "{err}");
}

#[test]
fn server_that_closes_at_once_is_a_protocol_error_not_a_hang() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let closer = std::thread::spawn(move || {
        if let Ok((s, _)) = listener.accept() {
            drop(s);
        }
    });
    let client = Client::builder().request_timeout(None).build();
    let err = runtime().block_on(move || client.get(&url).unwrap_err());
    assert_eq!(err.kind(), ClientErrorKind::Protocol, "{err}");
    closer.join().unwrap();
}

#[test]
fn host_header_is_the_urls_authority_with_ipv6_brackets_and_without_user_information() {
    let server = Server::builder()
        .serve("[::1]:0", |req: Request<Body>| {
            let host = req.headers().get("host").map(|v| v.to_str().unwrap().to_owned());
            Response::new(Body::from(host.unwrap_or_else(|| "no Host header".into())))
        })
        .unwrap();
    let port = server.local_addr().port();
    let client = Client::new();
    let rt = runtime();
    let hosts = rt.block_on(move || {
        [format!("http://[::1]:{port}/"), format!("http://user:secret@[::1]:{port}/x?y")]
            .iter()
            .map(|url| {
                let res = client.get(url).unwrap();
                let status = res.status();
                (status, res.into_body().text().unwrap())
            })
            .collect::<Vec<_>>()
    });
    let want = format!("[::1]:{port}");
    assert_eq!(
        hosts,
        vec![(spindle_http::StatusCode::OK, want.clone()), (spindle_http::StatusCode::OK, want)]
    );
    server.shutdown();
}

/// The client's pooled host records, polled until `want` holds or 10 s pass.
fn pooled_hosts(client: &Client, want: impl Fn(usize) -> bool) -> usize {
    poll_count(Duration::from_secs(10), || client.pooled_hosts(), want)
}

/// The pool forgets a host once nothing of it is left (no connection open, being opened or
/// idle, no request waiting): a crawler that visits thousands of hosts keeps no record for
/// each host it no longer talks to. Connections end every way here: the client's idle timeout
/// (HTTP/1.1 and the shared HTTP/2 connection), the server closing each connection after its
/// response, and a refused connect. A host with a live connection keeps its record.
#[test]
fn the_pool_forgets_a_host_once_its_connections_are_gone() {
    const HOSTS: usize = 50;
    // One server on every local address: 127.0.0.N are distinct pool keys for one server.
    let server = Server::builder()
        .serve("0.0.0.0:0", |req: Request<Body>| {
            let mut res = Response::new(Body::from("ok"));
            if req.uri().path() == "/close" {
                res.headers_mut()
                    .insert("connection", spindle_http::header::HeaderValue::from_static("close"));
            }
            res
        })
        .unwrap();
    let port = server.local_addr().port();
    let rt = runtime();
    let visit = |client: &Client, path: &'static str| {
        let client = client.clone();
        rt.block_on(move || {
            for n in 1..=HOSTS {
                let res = client.get(&format!("http://127.0.0.{n}:{port}{path}")).unwrap();
                assert_eq!(res.into_body().text().unwrap(), "ok");
            }
        });
    };

    // Idle connections live (90 s idle timeout): one record per host, and they stay.
    let client = Client::new();
    visit(&client, "/");
    assert_eq!(client.pooled_hosts(), HOSTS, "a host with an idle connection lost its record");
    // The server closes every connection after its response.
    let client = Client::new();
    visit(&client, "/close");
    assert_eq!(pooled_hosts(&client, |n| n == 0), 0, "hosts whose connections the server closed");
    // The client's idle timeout closes them, HTTP/1.1 and HTTP/2.
    for h2 in [false, true] {
        let client =
            Client::builder().http2_prior_knowledge(h2).idle_timeout(Duration::from_millis(50)).build();
        visit(&client, "/");
        assert_eq!(pooled_hosts(&client, |n| n == 0), 0, "hosts whose idle connections expired (h2: {h2})");
    }
    // A connect that fails leaves nothing behind.
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let client = Client::new();
    let c = client.clone();
    rt.block_on(move || {
        for n in 1..=10 {
            let err = c.get(&format!("http://127.0.0.{n}:{closed_port}/")).unwrap_err();
            assert_eq!(err.kind(), ClientErrorKind::Connect, "{err}");
        }
    });
    assert_eq!(pooled_hosts(&client, |n| n == 0), 0, "hosts whose connect failed");
    drop(rt);
    server.shutdown();
}
