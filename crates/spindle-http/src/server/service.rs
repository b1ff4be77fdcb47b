//! The hyper service of one connection: checks what must be refused before a handler runs
//! (`limits::precheck`), puts the request body under the server's limits, and hands the
//! request to the handler; a body limit broken while the handler ran replaces its answer.
//!
//! Under HTTP/2 it also refuses a new stream (`REFUSED_STREAM`, which a client may retry
//! safely) while the connection is at its limit of running handlers, or holds more unsent
//! response bytes than its budget (module `meter`):
//!
//! - **Handlers count until they end.** h2 counts a stream against
//!   `max_concurrent_streams` only until it is reset, but a blocking handler whose stream
//!   was reset runs on until its next park (and a handler that never parks, until it
//!   returns). `Counters::busy` counts handlers until they end, and a stream that would take
//!   it past the limit is refused.
//! - **Refusing is bounded too.** Each stream refused for running handlers adds to
//!   `Counters::refused` (a stream served clears it); the connection's driver ends a
//!   connection whose client kept opening streams past [`REFUSALS_BEFORE_GOAWAY`] refusals
//!   with a GOAWAY of `ENHANCE_YOUR_CALM`, as h2 does for streams reset before they were
//!   accepted.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body::Body as _;
use hyper::body::Incoming;
use hyper::{Request, Response};

use crate::server::counters::{CountersRef, WeakCounters};
use crate::server::handler::{Busy, Respond};
use crate::server::origin::{Origin, Peer};
use crate::server::precheck::{fault_response, precheck};
use crate::server::shared::Shared;
use crate::server::trace::{respond, Traced};
use crate::transport::body::Body;
use crate::transport::limits::{Fault, Guarded};

/// Streams refused in a row for running handlers before the connection is ended with
/// `ENHANCE_YOUR_CALM` (module doc): as many as h2 tolerates streams reset before they were
/// accepted, by default.
pub(crate) const REFUSALS_BEFORE_GOAWAY: u8 = 20;

pub(crate) struct Service<H> {
    pub(crate) shared: Arc<Shared<H>>,
    pub(crate) counters: CountersRef,
    pub(crate) peer: Peer,
    /// HTTP/2 (no `Connection` header in answers).
    pub(crate) http2: bool,
}

impl<H: Respond> Service<H> {
    /// Whether a new HTTP/2 stream must be refused (module doc); counts a refusal for
    /// running handlers.
    fn refuses_stream(&self) -> bool {
        let config = &self.shared.config;
        if self.counters.busy.load(Ordering::Relaxed) >= config.max_concurrent_streams {
            // A load and a store: hyper calls one connection's service from its task only.
            let refused = self.counters.refused.load(Ordering::Relaxed);
            self.counters.refused.store(refused.saturating_add(1), Ordering::Relaxed);
            return true;
        }
        if self.counters.refused.load(Ordering::Relaxed) != 0 {
            self.counters.refused.store(0, Ordering::Relaxed);
        }
        self.counters.unsent.load(Ordering::Relaxed) > config.http2_max_unsent
    }
}

impl<H: Respond> hyper::service::Service<Request<Incoming>> for Service<H> {
    type Response = Response<Body>;
    /// A refused HTTP/2 stream: hyper resets it with the error's reason.
    type Error = h2::Error;
    type Future = ResponseFuture<Traced<H::Future>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        self.counters.requested.store(true, Ordering::Relaxed);
        let body_limits = self.shared.config.body_limits;
        // HTTP/2 has no `Connection` header (a refused stream is reset; the connection lives).
        let http2 = self.http2;
        if http2 && self.refuses_stream() {
            return ResponseFuture::Refused;
        }
        if let Some(refused) = precheck(&req, &body_limits) {
            let response = Box::new(without_connection_header(refused, http2));
            return ResponseFuture::Early { response: Some(response) };
        }
        let busy = Busy::enter(&self.counters);
        let mut fault = Fault::default();
        let req = req.map(|body| {
            if body.is_end_stream() {
                Body::empty() // no body (a GET): nothing to guard, nothing to allocate
            } else {
                fault = Fault::new(http2);
                Body::guarded(Guarded::new(body, body_limits, fault.clone()))
            }
        });
        let origin = Origin { peer: self.peer, stack_size: self.shared.config.stack_size, http2 };
        let inner = respond(&self.shared.handler, req, busy, &origin);
        let meter = if http2 { Some(self.counters.downgrade()) } else { None };
        ResponseFuture::Handler { inner, fault, meter }
    }
}

fn without_connection_header(mut res: Response<Body>, http2: bool) -> Response<Body> {
    if http2 {
        res.headers_mut().remove(hyper::header::CONNECTION);
    }
    res
}

pin_project_lite::pin_project! {
    /// The handler's response future, or an answer decided before the handler (one variant:
    /// hyper moves this future around once per request, so it is kept small). hyper keeps a
    /// box with room for it for the connection's whole life, idle or not, so the early
    /// answer (a `Response` is 152 bytes, most of it its header map) is boxed: only refused
    /// requests pay for it.
    #[project = ResponseProj]
    pub(crate) enum ResponseFuture<F> {
        Early { response: Option<Box<Response<Body>>> },
        /// An HTTP/2 stream refused before its handler (module doc).
        Refused,
        /// `meter`: under HTTP/2, the connection whose unsent bytes the body counts in.
        Handler { #[pin] inner: F, fault: Fault, meter: Option<WeakCounters> },
    }
}

impl<F: Future<Output = Result<Response<Body>, Infallible>>> Future for ResponseFuture<F> {
    type Output = Result<Response<Body>, h2::Error>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ResponseProj::Early { response } => Poll::Ready(Ok(*response
                .take()
                .expect("spindle-http response future polled after completion"))),
            ResponseProj::Refused => Poll::Ready(Err(h2::Reason::REFUSED_STREAM.into())),
            ResponseProj::Handler { inner, fault, meter } => {
                let Poll::Ready(Ok(mut response)) = inner.poll(cx) else { return Poll::Pending };
                if let Some(replaced) = fault_response(fault) {
                    response = replaced;
                }
                if let Some(counters) = meter {
                    response = response.map(|body| crate::server::meter::meter(body, counters));
                }
                Poll::Ready(Ok(response))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::handler::Blocking;

    /// hyper keeps a box with room for the response future for the connection's whole life.
    #[test]
    fn the_response_future_stays_small() {
        type H = Blocking<fn(Request<Body>) -> Response<&'static str>>;
        let size = std::mem::size_of::<ResponseFuture<Traced<<H as Respond>::Future>>>();
        // The request's span (feature `tracing`) adds one boxed pointer.
        let limit = if cfg!(feature = "tracing") { 64 } else { 56 };
        assert!(size <= limit, "a response future takes {size} bytes");
    }
}
