//! The client follows redirects (module `client::redirect`): Location resolution, the method
//! and body rules of each code, credentials dropped on the way to another origin, the limit,
//! `Policy::none`, the final URL, and the connections of the redirects given back to the pool.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Frame;
use spindle_http::redirect::{Policy, ResponseUrl};
use spindle_http::{Body, BoxError, Client, ClientErrorKind, Method, Request, Response, Server, StatusCode};

fn runtime() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(1).build().unwrap()
}

/// The requests a server saw: method and path with query.
type Hits = Arc<Mutex<Vec<String>>>;

fn redirect(status: u16, location: &str) -> Response<Body> {
    Response::builder().status(status).header("location", location).body(Body::from("moved")).unwrap()
}

/// A server whose routes are:
///
/// - `/rel/start` -> 302 `step` (a relative path), `/rel/step` -> 301 `?q=1` (a query),
///   `/rel/step?q=1` -> 302 `/abs/x` (an absolute path), `/abs/x` -> 307 `//HOST/final`
///   (scheme-relative), `/to-absolute` -> 308 `http://HOST/final` (an absolute URL);
/// - `/final`: `done`; `/echo`: the method, the body, and the Content-Type, Content-Length,
///   Authorization, Cookie, X-Custom and Host headers it got;
/// - `/r/CODE?to=URL`: `CODE` with `Location: URL`; `/loop`: 302 to itself.
fn server() -> (Server, Hits) {
    let hits = Hits::default();
    let seen = hits.clone();
    let server = Server::builder()
        .serve("127.0.0.1:0", move |req: Request<Body>| {
            let path = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
            seen.lock().unwrap().push(format!("{} {path}", req.method()));
            // HTTP/2 carries the authority in the URI (`:authority`), HTTP/1.1 in `Host`.
            let host = req.headers().get("host").and_then(|h| h.to_str().ok()).map(str::to_owned);
            let host = host.or_else(|| req.uri().authority().map(|a| a.to_string())).unwrap_or("?".into());
            match path.as_str() {
                "/rel/start" => redirect(302, "step"),
                "/rel/step" => redirect(301, "?q=1"),
                "/rel/step?q=1" => redirect(302, "/abs/x"),
                "/abs/x" => redirect(307, &format!("//{host}/final")),
                "/to-absolute" => redirect(308, &format!("http://{host}/final")),
                "/final" => Response::new(Body::from("done")),
                "/loop" => redirect(302, "/loop"),
                "/echo" => {
                    let header = |name: &str| {
                        req.headers().get(name).map(|v| v.to_str().unwrap().to_owned()).unwrap_or("-".into())
                    };
                    let headers =
                        ["content-type", "content-length", "authorization", "cookie", "x-custom", "host"]
                            .map(header)
                            .join(" ");
                    let method = req.method().clone();
                    let body = req.into_body().text().unwrap();
                    Response::new(Body::from(format!("{method} [{body}] {headers}")))
                }
                _ => match path.strip_prefix("/r/").and_then(|rest| rest.split_once("?to=")) {
                    Some((code, to)) => redirect(code.parse().unwrap(), to),
                    None => Response::builder().status(404).body(Body::empty()).unwrap(),
                },
            }
        })
        .unwrap();
    (server, hits)
}

fn hits(hits: &Hits) -> Vec<String> {
    hits.lock().unwrap().clone()
}

/// A body sent as a stream (not held in memory, so it cannot be sent again).
struct Stream(Option<Bytes>);

impl http_body::Body for Stream {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.get_mut().0.take().map(|b| Ok(Frame::data(b))))
    }
}

#[test]
fn relative_locations_resolve_against_the_current_url() {
    let (server, seen) = server();
    let base = format!("http://{}", server.local_addr());
    let client = Client::new();
    let url = format!("{base}/rel/start");
    let (status, text, final_url) = runtime().block_on(move || {
        let res = client.get(&url).unwrap();
        let final_url = res.extensions().get::<ResponseUrl>().map(|u| u.to_string());
        (res.status(), res.into_body().text().unwrap(), final_url)
    });
    assert_eq!((status, text.as_str()), (StatusCode::OK, "done"));
    assert_eq!(final_url, Some(format!("{base}/final")));
    // A relative path, a query alone, an absolute path, then a scheme-relative `//host/path`.
    assert_eq!(
        hits(&seen),
        ["GET /rel/start", "GET /rel/step", "GET /rel/step?q=1", "GET /abs/x", "GET /final"]
    );
    server.shutdown();
}

#[test]
fn absolute_location_is_followed_and_the_final_url_reported() {
    let (server, seen) = server();
    let base = format!("http://{}", server.local_addr());
    let client = Client::new();
    let (url, plain) = (format!("{base}/to-absolute"), format!("{base}/final"));
    let (text, final_url, direct_url) = runtime().block_on(move || {
        let res = client.get(&url).unwrap();
        let final_url = res.extensions().get::<ResponseUrl>().cloned();
        // Not redirected: no extension (the response came from the URL requested).
        let direct = client.get(&plain).unwrap();
        let direct_url = direct.extensions().get::<ResponseUrl>().cloned();
        (res.into_body().text().unwrap(), final_url, direct_url)
    });
    assert_eq!(text, "done");
    assert_eq!(final_url.unwrap().uri().to_string(), format!("{base}/final"));
    assert_eq!(direct_url, None);
    assert_eq!(hits(&seen), ["GET /to-absolute", "GET /final", "GET /final"]);
    server.shutdown();
}

#[test]
fn redirects_over_http2_follow_the_same_rules() {
    // The server answers HTTP/2 by prior knowledge on the same port; each hop is a stream of
    // the one multiplexed connection.
    let (server, seen) = server();
    let base = format!("http://{}", server.local_addr());
    let client = Client::builder().http2_prior_knowledge(true).build();
    let (url, post) = (format!("{base}/rel/start"), format!("{base}/r/302?to=/echo"));
    let (version, text, final_url, echoed) = runtime().block_on(move || {
        let res = client.get(&url).unwrap();
        let version = res.version();
        let final_url = res.extensions().get::<ResponseUrl>().map(|u| u.to_string());
        let text = res.into_body().text().unwrap();
        // A POST on 302 becomes a GET without body here too.
        let req =
            Request::post(post).header("content-type", "text/plain").body(Body::from("payload")).unwrap();
        let echoed = client.request(req).unwrap().into_body().text().unwrap();
        (version, text, final_url, echoed)
    });
    assert_eq!(version, spindle_http::Version::HTTP_2);
    assert_eq!(text, "done");
    assert_eq!(final_url, Some(format!("{base}/final")));
    assert!(echoed.starts_with("GET [] - - "), "{echoed}");
    assert_eq!(
        hits(&seen),
        [
            "GET /rel/start",
            "GET /rel/step",
            "GET /rel/step?q=1",
            "GET /abs/x",
            "GET /final",
            "POST /r/302?to=/echo",
            "GET /echo"
        ]
    );
    server.shutdown();
}

/// Sends `method` with a `text/plain` body `payload` to `/r/CODE?to=/echo`; the echo's answer.
fn echo_after(code: u16, method: Method, body: Body) -> (StatusCode, String, Vec<String>) {
    let (server, seen) = server();
    let url = format!("http://{}/r/{code}?to=/echo", server.local_addr());
    let client = Client::new();
    let (status, text) = runtime().block_on(move || {
        let req = Request::builder()
            .method(method)
            .uri(url)
            .header("content-type", "text/plain")
            .body(body)
            .unwrap();
        let res = client.request(req).unwrap();
        (res.status(), res.into_body().text().unwrap())
    });
    let hits = hits(&seen);
    server.shutdown();
    (status, text, hits)
}

#[test]
fn post_302_becomes_a_get_without_body() {
    let (status, text, hits) = echo_after(302, Method::POST, Body::from("payload"));
    assert_eq!(status, StatusCode::OK);
    // No body, and no Content-Type or Content-Length left of the POST's.
    assert!(text.starts_with("GET [] - - "), "{text}");
    assert_eq!(hits, ["POST /r/302?to=/echo", "GET /echo"]);
}

#[test]
fn post_307_and_308_keep_the_method_and_body() {
    for code in [307, 308] {
        let (status, text, hits) = echo_after(code, Method::POST, Body::from("payload"));
        assert_eq!(status, StatusCode::OK);
        assert!(text.starts_with("POST [payload] text/plain 7 "), "{code}: {text}");
        assert_eq!(hits, [format!("POST /r/{code}?to=/echo"), "POST /echo".to_owned()]);
    }
}

#[test]
fn put_303_becomes_a_get() {
    let (status, text, hits) = echo_after(303, Method::PUT, Body::from("payload"));
    assert_eq!(status, StatusCode::OK);
    assert!(text.starts_with("GET [] - - "), "{text}");
    assert_eq!(hits, ["PUT /r/303?to=/echo", "GET /echo"]);
}

#[test]
fn streamed_body_on_307_returns_the_redirect() {
    let stream = Body::wrap(Stream(Some(Bytes::from_static(b"payload"))));
    let (status, text, hits) = echo_after(307, Method::POST, stream);
    // The body cannot be sent again: the 307 is the response.
    assert_eq!((status, text.as_str()), (StatusCode::TEMPORARY_REDIRECT, "moved"));
    assert_eq!(hits, ["POST /r/307?to=/echo"]);
}

#[test]
fn credentials_kept_on_the_same_host_dropped_on_another_port() {
    let (a, _) = server();
    let (b, _) = server();
    let b_echo = format!("http://{}/echo", b.local_addr());
    let same = format!("http://{}/r/302?to=/echo", a.local_addr());
    let other = format!("http://{}/r/302?to={b_echo}", a.local_addr());
    let b_host = b.local_addr().to_string();
    let client = Client::new();
    let [same, other] = runtime().block_on(move || {
        [same, other].map(|url| {
            let req = Request::get(url)
                .header("authorization", "Bearer secret")
                .header("cookie", "id=1")
                .header("x-custom", "kept")
                .header("host", "example.test")
                .body(Body::empty())
                .unwrap();
            client.request(req).unwrap().into_body().text().unwrap()
        })
    });
    // The same host and port: the credentials go on; Host is set for the new URL.
    assert_eq!(same, format!("GET [] - - Bearer secret id=1 kept {}", a.local_addr()));
    // Another port: Authorization and Cookie are dropped, other headers kept.
    assert_eq!(other, format!("GET [] - - - - kept {b_host}"));
    a.shutdown();
    b.shutdown();
}

#[test]
fn a_redirect_loop_ends_with_too_many_redirects_at_the_default_limit() {
    let (server, seen) = server();
    let url = format!("http://{}/loop", server.local_addr());
    let client = Client::new();
    let err = runtime().block_on(move || client.get(&url).unwrap_err());
    assert_eq!(err.kind(), ClientErrorKind::TooManyRedirects);
    let message = err.to_string();
    assert!(message.contains("more than 10 redirects") && message.contains("/loop"), "{message}");
    // The request and 10 redirects followed; the 11th response ends it.
    assert_eq!(hits(&seen).len(), 11);
    server.shutdown();
}

#[test]
fn policy_none_returns_the_301_as_it_is() {
    let (server, seen) = server();
    let url = format!("http://{}/r/301?to=/final", server.local_addr());
    let client = Client::builder().redirect(Policy::none()).build();
    let (status, location) = runtime().block_on(move || {
        let res = client.get(&url).unwrap();
        (res.status(), res.headers()["location"].to_str().unwrap().to_owned())
    });
    assert_eq!((status, location.as_str()), (StatusCode::MOVED_PERMANENTLY, "/final"));
    assert_eq!(hits(&seen).len(), 1);
    server.shutdown();
}

#[test]
fn a_location_with_an_unsupported_scheme_is_an_error() {
    let (server, seen) = server();
    let url = format!("http://{}/r/302?to=ftp://example.test/file", server.local_addr());
    let client = Client::new();
    let err = runtime().block_on(move || client.get(&url).unwrap_err());
    assert_eq!(err.kind(), ClientErrorKind::InvalidUrl);
    assert!(err.to_string().contains("unsupported scheme \"ftp\""), "{err}");
    assert_eq!(hits(&seen).len(), 1);
    server.shutdown();
}

#[test]
fn send_from_a_task_follows_redirects() {
    let (server, _) = server();
    let url = format!("http://{}/rel/start", server.local_addr());
    let client = Client::new();
    let text = runtime().block_on(move || {
        let send = client.send(Request::get(url).body(Body::empty()).unwrap());
        let task = spindle::task::spawn_async(async move {
            use http_body_util::BodyExt;
            let res = send.await.unwrap();
            assert!(res.extensions().get::<ResponseUrl>().is_some());
            res.into_body().collect().await.unwrap().to_bytes()
        });
        task.join().unwrap()
    });
    assert_eq!(text, "done");
    server.shutdown();
}

/// A plain HTTP/1.1 server on std threads, keep-alive, for GETs only: `/from` answers 302
/// to `/to` with a body of `redirect_body` bytes (chunked), `/to` answers `ok`. Counts the
/// connections it accepts.
fn counting_server(redirect_body: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end + 4);
                    let response = if head.starts_with("GET /from ") {
                        let body = "m".repeat(redirect_body);
                        let head =
                            "HTTP/1.1 302 Found\r\nlocation: /to\r\ntransfer-encoding: chunked\r\n\r\n";
                        format!("{head}{:x}\r\n{body}\r\n0\r\n\r\n", body.len())
                    } else {
                        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_owned()
                    };
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// 50 redirected GETs with at most 2 connections a host: each must find a free one (a
/// redirect's connection held forever would make a request wait for its timeout and fail).
fn fifty_redirected_gets(addr: SocketAddr) -> (Client, spindle::Runtime) {
    let client = Client::builder()
        .max_connections_per_host(2)
        .max_idle_per_host(2)
        .request_timeout(Duration::from_secs(20))
        .build();
    let c = client.clone();
    let url = format!("http://{addr}/from");
    let rt = runtime();
    let texts = rt.block_on(move || {
        (0..50).map(|_| c.get(&url).unwrap().into_body().text().unwrap()).collect::<Vec<_>>()
    });
    assert!(texts.iter().all(|t| t == "ok"), "{texts:?}");
    assert_eq!(client.pooled_hosts(), 1);
    assert!(client.pooled_connections() <= 2, "{}", client.pooled_connections());
    // The runtime is handed back alive: the pooled connections' drivers run on it.
    (client, rt)
}

#[test]
fn short_redirect_bodies_are_drained_and_their_connection_reused() {
    let (addr, accepted) = counting_server(100);
    let (client, rt) = fifty_redirected_gets(addr);
    assert_eq!(client.pooled_connections(), 1);
    drop(rt);
    // Every redirect's body was read, and its connection served the next hop.
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[test]
fn long_redirect_bodies_close_their_connection_and_the_pool_stays_bounded() {
    let (addr, accepted) = counting_server(64 * 1024);
    let (client, rt) = fifty_redirected_gets(addr);
    // Each redirect's connection was closed, not kept: a new one for each hop after it.
    assert!(accepted.load(Ordering::SeqCst) > 50, "{}", accepted.load(Ordering::SeqCst));
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.pooled_connections() > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(client.pooled_connections() <= 1, "{}", client.pooled_connections());
    drop(rt);
}
