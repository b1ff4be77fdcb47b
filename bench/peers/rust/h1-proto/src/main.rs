//! PROTOTYPE (see Cargo.toml): a hello-world HTTP/1.1 server on spindle without hyper, in
//! spindle-http's shape: one `Send` task per connection (it may move between workers), the
//! request parsed with `httparse` into an `http::Request<()>` (method, URI, version and a
//! `HeaderMap`, what a spindle-http handler receives), the handler a plain function returning
//! an `http::Response<Bytes>`, and the answer written by hand (status line, the handler's
//! headers, `content-length`, a `date` formatted once a second). Pipelined requests are
//! answered in one write.
//!
//! `--handler fiber` (default) calls the handler on a fiber of its own per request, started
//! at once inside the task's poll (`spawn_now`, as spindle-http's blocking handlers);
//! `--handler inline` calls it in the task (as an async handler that never waits).
//!
//! Deliberately incomplete, as a measurement needs: bodies (`content-length` > 0,
//! `transfer-encoding`) and `Expect`, `Upgrade` are refused with a status and a close, there
//! are no timeouts and no limits beyond the head's 8 KiB. Environment: PORT (127.0.0.1:$PORT),
//! WORKERS.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;

use bytes::Bytes;
use futures_io::{AsyncRead, AsyncWrite};
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, Response, Uri, Version};
use spindle::net::{TcpListener, TcpStream};

const MAX_HEAD: usize = 8 * 1024;
const MAX_HEADERS: usize = 32;

type Handler = fn(Request<()>) -> Response<Bytes>;

fn hello(_req: Request<()>) -> Response<Bytes> {
    let mut res = Response::new(Bytes::from_static(b"Hello, World!"));
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    res
}

/// The `date` value, formatted once a second per thread: the monoio competitor's (shared).
#[allow(dead_code)]
#[path = "../../monoio/src/responder.rs"]
mod responder;
use responder::push_date;

/// What the head at the start of the buffer is. Returned once per request and taken apart at
/// once, never stored: no box for the large variant.
#[allow(clippy::large_enum_variant)]
enum Head {
    /// A request without a body, its head `len` bytes long.
    Request {
        req: Request<()>,
        len: usize,
        close: bool,
    },
    Incomplete,
    /// Refused: answer this status and close.
    Reject(&'static str),
}

fn parse(buf: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return Head::Reject("431 Request Header Fields Too Large")
        }
        Ok(httparse::Status::Partial) => return Head::Incomplete,
        Err(httparse::Error::TooManyHeaders) => return Head::Reject("431 Request Header Fields Too Large"),
        Err(_) => return Head::Reject("400 Bad Request"),
    };
    let version = if parsed.version == Some(1) { Version::HTTP_11 } else { Version::HTTP_10 };
    let Ok(method) = Method::from_bytes(parsed.method.unwrap_or("").as_bytes()) else {
        return Head::Reject("400 Bad Request");
    };
    let Ok(uri) = parsed.path.unwrap_or("/").parse::<Uri>() else { return Head::Reject("400 Bad Request") };
    let mut map = HeaderMap::with_capacity(parsed.headers.len());
    let mut close = version == Version::HTTP_10;
    for h in parsed.headers.iter() {
        let Ok(name) = HeaderName::from_bytes(h.name.as_bytes()) else {
            return Head::Reject("400 Bad Request");
        };
        let Ok(value) = HeaderValue::from_bytes(h.value) else { return Head::Reject("400 Bad Request") };
        let body = name == http::header::CONTENT_LENGTH && h.value != b"0"
            || name == http::header::TRANSFER_ENCODING;
        if body || name == http::header::EXPECT || name == http::header::UPGRADE {
            return Head::Reject("501 Not Implemented");
        }
        if name == http::header::CONNECTION {
            if h.value.eq_ignore_ascii_case(b"close") {
                close = true;
            } else if h.value.eq_ignore_ascii_case(b"keep-alive") {
                close = false;
            }
        }
        map.append(name, value);
    }
    let mut req = Request::new(());
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.version_mut() = version;
    *req.headers_mut() = map;
    Head::Request { req, len, close }
}

fn encode(res: Response<Bytes>, head_only: bool, close: bool, out: &mut Vec<u8>) {
    let (parts, body) = res.into_parts();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(parts.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(parts.status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
    if close {
        out.extend_from_slice(b"\r\nconnection: close");
    }
    out.extend_from_slice(b"\r\ndate: ");
    push_date(out);
    out.extend_from_slice(b"\r\n\r\n");
    if !head_only {
        out.extend_from_slice(&body);
    }
}

/// Reads into `buf[filled..]` (zeroed once, when the connection starts).
async fn read(stream: &mut TcpStream, buf: &mut [u8], filled: usize) -> io::Result<usize> {
    poll_fn(|cx| Pin::new(&mut *stream).poll_read(cx, &mut buf[filled..])).await
}

async fn write_all(stream: &mut TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        let n = poll_fn(|cx: &mut Context<'_>| Pin::new(&mut *stream).poll_write(cx, data)).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        data = &data[n..];
    }
    Ok(())
}

async fn respond(handler: Handler, req: Request<()>, on_fiber: bool) -> Response<Bytes> {
    if !on_fiber {
        return handler(req);
    }
    match spindle::fiber::Builder::new().spawn_now(move || handler(req)) {
        Ok(mut join) => poll_fn(|cx| Pin::new(&mut join).poll(cx)).await.unwrap_or_else(|_| {
            let mut res = Response::new(Bytes::new());
            *res.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
            res
        }),
        Err(_) => {
            let mut res = Response::new(Bytes::new());
            *res.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
            res
        }
    }
}

async fn serve(mut stream: TcpStream, handler: Handler, on_fiber: bool) {
    let _ = stream.set_nodelay(true);
    let mut inbuf = vec![0u8; MAX_HEAD];
    let mut filled = 0;
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    loop {
        match read(&mut stream, &mut inbuf, filled).await {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
        let mut start = 0;
        let mut close = false;
        loop {
            match parse(&inbuf[start..filled]) {
                Head::Incomplete => break,
                Head::Reject(status) => {
                    out.extend_from_slice(b"HTTP/1.1 ");
                    out.extend_from_slice(status.as_bytes());
                    out.extend_from_slice(b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                    close = true;
                    break;
                }
                Head::Request { req, len, close: c } => {
                    start += len;
                    let head_only = req.method() == Method::HEAD;
                    let res = respond(handler, req, on_fiber).await;
                    encode(res, head_only, c, &mut out);
                    if c {
                        close = true;
                        break;
                    }
                }
            }
        }
        // The unparsed rest (a partial head) moves to the front.
        inbuf.copy_within(start..filled, 0);
        filled -= start;
        if !out.is_empty() {
            if write_all(&mut stream, &out).await.is_err() {
                return;
            }
            out.clear();
        }
        if close {
            return;
        }
    }
}

fn main() {
    let mut on_fiber = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next().as_deref()) {
            ("--handler", Some("fiber")) => on_fiber = true,
            ("--handler", Some("inline")) => on_fiber = false,
            _ => {
                eprintln!("usage: h1-proto [--handler fiber|inline]  (env PORT, WORKERS)");
                std::process::exit(2);
            }
        }
    }
    let port: u16 = std::env::var("PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(8080);
    let workers: usize = std::env::var("WORKERS").ok().and_then(|p| p.parse().ok()).unwrap_or(1);
    let rt = Arc::new(spindle::runtime::Builder::new().worker_threads(workers).build().expect("runtime"));
    rt.block_on(move || {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind");
        let accept = spindle::task::spawn_async(async move {
            loop {
                match poll_fn(|cx| listener.poll_accept(cx)).await {
                    Ok((stream, _)) => {
                        drop(
                            spindle::task::Builder::new().batched(true).spawn(serve(stream, hello, on_fiber)),
                        );
                    }
                    Err(e) => eprintln!("accept: {e}"),
                }
            }
        });
        let _ = accept.join();
    });
}
