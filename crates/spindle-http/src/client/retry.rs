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

use crate::client::error::{ClientError, ClientErrorKind};
use crate::client::key::Key;
use crate::transport::body::Body;
use crate::transport::body::Held;

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
    replay: Option<Replay<'_>>,
) -> (ClientError, Option<Request<Body>>) {
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
        None => replay.filter(|_| closed).and_then(Replay::into_request),
    };
    (ClientError::with_source(ClientErrorKind::Protocol, format!("request to {key}"), e), again)
}

/// `uri` with `key`'s scheme and authority (a request HTTP/1.1 gave back in the origin form).
fn absolute_uri(key: &Key, uri: &Uri) -> Option<Uri> {
    if uri.scheme().is_some() {
        return Some(uri.clone());
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    format!("{key}{path}").parse().ok()
}

/// A copy of a request as it goes out: to send it again on another connection (a retry), or
/// to make the next hop of a redirect (module `follow`). Made for most requests, so small:
/// the header map and the extensions only when they are not empty, each boxed, and the body
/// only when it is held in memory (a reference count). One copy serves both: the redirect
/// loop lends its copy to the retries ([`Replay::Lent`]).
pub(super) struct Kept {
    pub(super) method: hyper::Method,
    pub(super) version: Version,
    pub(super) uri: Uri,
    pub(super) headers: Option<Box<hyper::HeaderMap>>,
    pub(super) extensions: Option<Box<hyper::http::Extensions>>,
    /// `None`: a streamed body, which cannot go again.
    pub(super) body: Option<Held>,
}

impl Kept {
    pub(super) fn of(req: &Request<Body>) -> Kept {
        Kept {
            body: req.body().held(),
            method: req.method().clone(),
            version: req.version(),
            uri: req.uri().clone(),
            headers: (!req.headers().is_empty()).then(|| Box::new(req.headers().clone())),
            extensions: (!req.extensions().is_empty()).then(|| Box::new(req.extensions().clone())),
        }
    }

    /// Whether the request may be sent again after its connection ended before a response
    /// head: idempotent, with its body in memory.
    fn replayable(&self) -> bool {
        use hyper::Method;
        self.body.is_some()
            && matches!(
                self.method,
                Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
            )
    }

    fn into_request(self) -> Option<Request<Body>> {
        let mut req = Request::new(self.body?.body());
        *req.method_mut() = self.method;
        *req.version_mut() = self.version;
        *req.uri_mut() = self.uri;
        if let Some(headers) = self.headers {
            *req.headers_mut() = *headers;
        }
        if let Some(extensions) = self.extensions {
            *req.extensions_mut() = *extensions;
        }
        Some(req)
    }

    fn to_request(&self) -> Option<Request<Body>> {
        let mut req = Request::new(self.body.as_ref()?.body());
        *req.method_mut() = self.method.clone();
        *req.version_mut() = self.version;
        *req.uri_mut() = self.uri.clone();
        if let Some(headers) = &self.headers {
            *req.headers_mut() = (**headers).clone();
        }
        if let Some(extensions) = &self.extensions {
            *req.extensions_mut() = (**extensions).clone();
        }
        Some(req)
    }
}

/// What a send on a reused connection keeps to send the request again: a copy of its own, or
/// the one the redirect loop made of the same request (lent: no second copy per request).
pub(super) enum Replay<'a> {
    Own(Kept),
    Lent(&'a Kept),
}

impl<'a> Replay<'a> {
    /// `lent` if given, else a copy of `req`, if it may be sent again (idempotent, its body
    /// in memory).
    pub(super) fn of(req: &Request<Body>, lent: Option<&'a Kept>) -> Option<Replay<'a>> {
        match lent {
            Some(kept) => kept.replayable().then_some(Replay::Lent(kept)),
            None => {
                let kept = Kept::of(req);
                kept.replayable().then_some(Replay::Own(kept))
            }
        }
    }

    fn into_request(self) -> Option<Request<Body>> {
        match self {
            Replay::Own(kept) => kept.into_request(),
            Replay::Lent(kept) => kept.to_request(),
        }
    }
}
