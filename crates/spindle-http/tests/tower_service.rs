//! `Builder::serve_service`: an axum `Router` (axum without tokio) and plain tower services
//! served by spindle-http, checked over raw sockets.

mod common;

use std::convert::Infallible;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::Router;
use common::{connect, read_response};
use spindle_http::{Body, Request, Response, Server, StatusCode};

fn local() -> &'static str {
    "127.0.0.1:0"
}

fn request(addr: std::net::SocketAddr, raw: &str) -> common::Resp {
    let mut s = connect(addr);
    s.write_all(raw.as_bytes()).unwrap();
    read_response(&mut s, &mut Vec::new()).expect("a response")
}

fn router(hits: Arc<AtomicUsize>) -> Router {
    Router::new()
        .route("/", get(|| async { "root" }))
        .route("/users/{id}", get(|Path(id): Path<u32>| async move { format!("user {id}") }))
        .route(
            "/count",
            get(|State(hits): State<Arc<AtomicUsize>>| async move {
                format!("{}", hits.fetch_add(1, Ordering::SeqCst) + 1)
            }),
        )
        .route("/echo", post(|body: axum::body::Bytes| async move { format!("{} bytes", body.len()) }))
        // Blocking style inside an async route: the work runs on a fiber of its own.
        .route(
            "/fiber",
            get(|| async {
                spindle::spawn(|| {
                    spindle::time::sleep(Duration::from_millis(5));
                    String::from("slept on a fiber")
                })
                .await
                .expect("the fiber finished")
            }),
        )
        .route(
            "/panic",
            get(|| async {
                if true {
                    panic!("an axum handler panics (expected by the test)");
                }
                "unreachable"
            }),
        )
        .with_state(hits)
}

#[test]
fn an_axum_router_routes_extracts_and_refuses() {
    let hits = Arc::new(AtomicUsize::new(0));
    let server = Server::builder().workers(2).serve_service(local(), router(hits.clone())).unwrap();
    let addr = server.local_addr();

    let resp = request(addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((resp.status, resp.text().as_str()), (200, "root"));
    let resp = request(addr, "GET /users/42 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((resp.status, resp.text().as_str()), (200, "user 42"));
    // The Path extractor refuses what does not parse; the router what it does not route.
    assert_eq!(request(addr, "GET /users/abc HTTP/1.1\r\nHost: x\r\n\r\n").status, 400);
    assert_eq!(request(addr, "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n").status, 404);
    assert_eq!(request(addr, "DELETE / HTTP/1.1\r\nHost: x\r\n\r\n").status, 405);
    // State is shared by every request (each calls a clone of the router).
    for n in 1..=3 {
        assert_eq!(request(addr, "GET /count HTTP/1.1\r\nHost: x\r\n\r\n").text(), n.to_string());
    }
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    let resp = request(addr, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world");
    assert_eq!((resp.status, resp.text().as_str()), (200, "11 bytes"));
    let resp = request(addr, "GET /fiber HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((resp.status, resp.text().as_str()), (200, "slept on a fiber"));
    server.shutdown();
}

#[test]
fn keep_alive_and_a_panicking_route() {
    let server = Server::builder().serve_service(local(), router(Arc::default())).unwrap();
    let mut s = connect(server.local_addr());
    let mut buf = Vec::new();
    for path in ["/", "/users/7", "/"] {
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut s, &mut buf).expect("a response").status, 200);
    }
    // A panic answers 500 and the server goes on (a new connection is served).
    assert_eq!(request(server.local_addr(), "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n").status, 500);
    assert_eq!(request(server.local_addr(), "GET /users/8 HTTP/1.1\r\nHost: x\r\n\r\n").text(), "user 8");
    server.shutdown();
}

#[test]
fn the_servers_body_limit_applies_before_the_service() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let svc = tower::service_fn(move |req: Request<Body>| {
        seen.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, Infallible>(Response::new(req.into_body())) }
    });
    let server = Server::builder().max_body_size(1024).serve_service(local(), svc).unwrap();
    let body = "x".repeat(4096);
    let raw = format!("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    assert_eq!(request(server.local_addr(), &raw).status, 413);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the service was called for a refused request");
    let resp = request(server.local_addr(), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok");
    assert_eq!((resp.status, resp.text().as_str(), calls.load(Ordering::SeqCst)), (200, "ok", 1));
    server.shutdown();
}

#[test]
fn a_service_of_spindle_bodies_echoes_the_request_body() {
    // A service of spindle-http's own `Body` both ways (the response body is not boxed again).
    let echo =
        tower::service_fn(
            |req: Request<Body>| async move { Ok::<_, Infallible>(Response::new(req.into_body())) },
        );
    let server = Server::builder().serve_service(local(), echo).unwrap();
    let resp = request(server.local_addr(), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!((resp.status, resp.text().as_str()), (200, "hello"));
    server.shutdown();
}

/// A tower service whose `poll_ready` or `call` fails on request.
#[derive(Clone)]
struct Failing {
    ready_fails: bool,
}

impl tower::Service<Request<Body>> for Failing {
    type Response = Response<Body>;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Response<Body>, std::io::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.ready_fails {
            return Poll::Ready(Err(std::io::Error::other("not ready (expected by the test)")));
        }
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        if req.uri().path() == "/fail" {
            return std::future::ready(Err(std::io::Error::other("call failed (expected by the test)")));
        }
        std::future::ready(Ok(Response::new(Body::from("ok"))))
    }
}

#[test]
fn a_service_error_answers_500_and_the_connection_goes_on() {
    let server = Server::builder().serve_service(local(), Failing { ready_fails: false }).unwrap();
    let mut s = connect(server.local_addr());
    let mut buf = Vec::new();
    s.write_all(b"GET /fail HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let resp = read_response(&mut s, &mut buf).expect("a response");
    assert_eq!((resp.status, resp.text().as_str()), (500, "Internal Server Error\n"));
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let resp = read_response(&mut s, &mut buf).expect("a response");
    assert_eq!((resp.status, resp.text().as_str()), (200, "ok"));
    server.shutdown();

    let server = Server::builder().serve_service(local(), Failing { ready_fails: true }).unwrap();
    assert_eq!(request(server.local_addr(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n").status, 500);
    server.shutdown();
}

#[test]
fn a_boxed_tower_stack_over_http2() {
    use http_body_util::BodyExt;
    // The type-erased form a real stack is passed in, served to an HTTP/2 client.
    let svc = tower::util::BoxCloneSyncService::new(router(Arc::default()));
    let server = Server::builder().serve_service(local(), svc).unwrap();
    let addr = server.local_addr();
    let rt = spindle::Runtime::new().unwrap();
    let text = rt.block_on(move || {
        let client = spindle_http::Client::builder().http2_prior_knowledge(true).build();
        let res = client.get(&format!("http://{addr}/users/5")).expect("an HTTP/2 answer");
        assert_eq!(res.version(), spindle_http::Version::HTTP_2);
        assert_eq!(res.status(), StatusCode::OK);
        String::from_utf8(spindle::task::block_on(res.into_body().collect()).unwrap().to_bytes().to_vec())
            .unwrap()
    });
    assert_eq!(text, "user 5");
    server.shutdown();
}
