//! One request's exchange: a connection from the pool (or a new one, module `connect`), the
//! request sent on it (again on another when a reused connection turns out closed, module
//! `retry`), and the response whose body gives the connection back (module `body`); and the
//! request timeout around it (`within`).

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use hyper::header::{HeaderValue, HOST};
use hyper::{Request, Response, Uri, Version};

use crate::client::body::{GiveBack, PooledBody};
use crate::client::config::ClientConfig;
use crate::client::connect;
use crate::client::error::{ClientError, ClientErrorKind};
use crate::client::key::Key;
use crate::client::pool::{Checkout, Conn, Pool};
use crate::client::retry::{failed, Kept, Replay, MAX_RETRIES};
use crate::transport::body::Body;

/// What a client and its clones share: the settings and the connection pool.
pub(crate) struct Inner {
    pub(crate) config: ClientConfig,
    pub(crate) pool: Arc<Pool>,
}

/// `future`'s output, or the request timeout's error once `timer` (if any) fires first.
pub(crate) fn within<'a, F: Future + ?Sized>(
    mut future: Pin<&'a mut F>,
    timer: &'a mut Option<spindle::time::Sleep>,
    limit: Option<Duration>,
) -> impl Future<Output = Result<F::Output, ClientError>> + 'a {
    poll_fn(move |cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        match (timer.as_mut(), limit) {
            (Some(timer), Some(limit)) => Pin::new(timer).poll(cx).map(|()| {
                Err(ClientError::new(
                    ClientErrorKind::RequestTimeout,
                    format!("no response within {limit:?}"),
                ))
            }),
            _ => Poll::Pending,
        }
    })
}

/// One request: a connection from the pool (or a new one), the exchange, and the response
/// body wrapped so that the connection returns to the pool when it ends.
///
/// A request that fails on a *reused* connection because the server had closed it is sent
/// again, on another connection, at most [`MAX_RETRIES`] times: any request hyper gives
/// back unsent, and an idempotent one (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) with a body
/// held in memory when the connection ended (closed or reset) before a response head. A
/// failure on a new connection is final (no retry loop against a server that closes at once).
pub(crate) async fn exchange(
    inner: &Arc<Inner>,
    mut req: Request<Body>,
    kept: Option<&Kept>,
) -> Result<Response<PooledBody>, ClientError> {
    let key = Key::from_uri(req.uri())?;
    let mut retries = 0;
    loop {
        let (conn, reused) = checkout(inner, &key).await?;
        let may_retry = reused && retries < MAX_RETRIES;
        // What is kept to send the request again if the connection turns out closed after
        // it went out. The send is written out here, not in a function of its own: each hop
        // of the request through another future's state was one more copy of it.
        let replay = if may_retry { Replay::of(&req, kept) } else { None };
        let refused = match conn {
            Conn::H1 { mut sender, idle } => {
                // HTTP/1.1 wants the origin form and a Host header.
                if !req.headers().contains_key(HOST) {
                    if let Some(value) = host_header(req.uri()) {
                        req.headers_mut().insert(HOST, value);
                    }
                }
                *req.uri_mut() = origin_form(req.uri());
                *req.version_mut() = Version::HTTP_11;
                match sender.try_send_request(req).await {
                    Ok(res) => {
                        let giveback = GiveBack::H1 {
                            pool: inner.pool.clone(),
                            key,
                            max_idle: inner.config.max_idle_per_host,
                            sender,
                            idle,
                        };
                        let read_timeout = inner.config.read_timeout;
                        return Ok(res.map(|body| PooledBody::new(body, giveback, read_timeout)));
                    }
                    Err(e) => e,
                }
            }
            Conn::H2 { mut sender, lease } => {
                *req.version_mut() = Version::HTTP_2;
                match sender.try_send_request(req).await {
                    Ok(res) => {
                        let read_timeout = inner.config.read_timeout;
                        return Ok(res.map(|body| PooledBody::new(body, GiveBack::H2(lease), read_timeout)));
                    }
                    Err(e) => e,
                }
            }
        };
        match failed(&key, refused, may_retry, replay) {
            (error, None) => return Err(error),
            (error, Some(again)) => {
                log::debug!("{}; sending the request again on another connection", error);
                req = again;
            }
        }
        retries += 1;
    }
}

/// A connection for `key`: a live pooled one (`true`: reused) or a new one (`false`).
async fn checkout(inner: &Arc<Inner>, key: &Key) -> Result<(Conn, bool), ClientError> {
    let config = &inner.config;
    let h2_wanted = !key.https && config.http2_prior_knowledge;
    loop {
        let checkout =
            poll_fn(|cx| inner.pool.poll_checkout(cx, key, config.max_connections_per_host, h2_wanted)).await;
        let (mut conn, fresh) = match checkout {
            Checkout::Reuse(conn) => (conn, false),
            Checkout::Open(guard) => {
                // Boxed: opening (resolve, connect, TLS, handshake) is rare, and its state
                // inline made every request's future far larger, all of it in the caller's
                // fiber stack, moved and brought into the cache on every request over a kept
                // connection (`docs/perf/http.md`, "Client").
                let conn = Box::pin(connect::open(key, config, guard)).await?;
                inner.pool.set_h2(key, &conn);
                (conn, true)
            }
        };
        // A pooled connection may have been closed by the server meanwhile: then take
        // another. A new one that is not usable is an error (no retry loop against a server
        // that closes at once).
        let ready = match &mut conn {
            Conn::H1 { sender, .. } => sender.ready().await,
            Conn::H2 { sender, .. } => sender.ready().await,
        };
        match ready {
            Ok(()) => return Ok((conn, !fresh)),
            Err(e) if fresh => {
                return Err(ClientError::with_source(
                    ClientErrorKind::Protocol,
                    format!("new connection to {key}"),
                    e,
                ))
            }
            Err(_) => {}
        }
    }
}

/// The Host header of a request for `uri`: its authority as written (an IPv6 host keeps
/// its brackets, a port given stays), without any user information. One copy of the
/// authority's bytes, no formatting.
fn host_header(uri: &Uri) -> Option<HeaderValue> {
    let authority = uri.authority()?.as_str();
    // A byte scan: the authority is short, and `rsplit_once` costs a generic searcher.
    let host = match authority.bytes().rposition(|b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    HeaderValue::from_str(host).ok()
}

/// `uri`'s origin form (path and query only), for an HTTP/1.1 request line: the parsed path
/// is shared, not parsed again.
fn origin_form(uri: &Uri) -> Uri {
    match uri.path_and_query() {
        Some(path) => {
            let mut parts = hyper::http::uri::Parts::default();
            parts.path_and_query = Some(path.clone());
            Uri::from_parts(parts).expect("a path and query alone is a valid URI")
        }
        None => Uri::from_static("/"),
    }
}
