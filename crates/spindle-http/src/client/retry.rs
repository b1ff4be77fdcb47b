//! Which requests are sent again, and what is kept to do it: a request that fails on a
//! *reused* connection because the server had closed it goes out again on another
//! connection, at most [`MAX_RETRIES`] times (module `client`'s `exchange` loops), when
//!
//! - hyper gave it back unsent (`try_send_request`; any method, as hyper-util's client), or
//! - it is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE), its body is held in memory, and
//!   the connection ended (closed or reset) before a response head (Go's and browsers' rule):
//!   then the [`Replay`] made before sending it.
//!
//! A failure on a new connection is final: no retry loop against a server that closes at once.

use hyper::{Request, Uri, Version};

use super::{Error, ErrorKind, Key};
use crate::Body;

/// Retries of one request on pooled connections that turned out dead.
pub(super) const MAX_RETRIES: usize = 4;

/// The error of a failed send, and the request to send again, if `may_retry`: the one hyper
/// gave back unsent (its absolute URI made again from the key: HTTP/1.1 sent the origin
/// form), or else the one `replay` keeps if the connection ended (closed or reset) before a
/// response head.
#[cold]
pub(super) fn failed(
    key: &Key,
    mut refused: hyper::client::conn::TrySendError<Request<Body>>,
    may_retry: bool,
    replay: Option<Replay>,
) -> (Error, Option<Request<Body>>) {
    let unsent = if may_retry { refused.take_message() } else { None };
    let e = refused.into_error();
    let closed = e.is_incomplete_message()
        || std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>()).is_some_and(|io| {
            use std::io::ErrorKind::*;
            matches!(io.kind(), ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof)
        });
    let again = match unsent {
        Some(mut req) => absolute_uri(key, req.uri()).map(|uri| {
            *req.uri_mut() = uri;
            req
        }),
        None => replay.filter(|_| closed).map(Replay::into_request),
    };
    (Error::with_source(ErrorKind::Protocol, format!("request to {key}"), e), again)
}

/// `uri` with `key`'s scheme and authority (a request HTTP/1.1 gave back in the origin form).
fn absolute_uri(key: &Key, uri: &Uri) -> Option<Uri> {
    if uri.scheme().is_some() {
        return Some(uri.clone());
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    format!("{key}{path}").parse().ok()
}

/// What is kept of a request sent on a reused connection, to send it again if the server had
/// closed that connection: made for every such request, so small (the header map and the
/// extensions only when they are not empty, each boxed), and only for an idempotent request
/// whose body is held in memory.
pub(super) struct Replay {
    method: hyper::Method,
    version: Version,
    uri: Uri,
    headers: Option<Box<hyper::HeaderMap>>,
    extensions: Option<Box<hyper::http::Extensions>>,
    body: Body,
}

impl Replay {
    pub(super) fn of(req: &Request<Body>) -> Option<Replay> {
        use hyper::Method;
        let idempotent = matches!(
            *req.method(),
            Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
        );
        if !idempotent {
            return None;
        }
        Some(Replay {
            body: req.body().try_clone()?,
            method: req.method().clone(),
            version: req.version(),
            uri: req.uri().clone(),
            headers: (!req.headers().is_empty()).then(|| Box::new(req.headers().clone())),
            extensions: (!req.extensions().is_empty()).then(|| Box::new(req.extensions().clone())),
        })
    }

    fn into_request(self) -> Request<Body> {
        let mut req = Request::new(self.body);
        *req.method_mut() = self.method;
        *req.version_mut() = self.version;
        *req.uri_mut() = self.uri;
        if let Some(headers) = self.headers {
            *req.headers_mut() = *headers;
        }
        if let Some(extensions) = self.extensions {
            *req.extensions_mut() = *extensions;
        }
        req
    }
}
