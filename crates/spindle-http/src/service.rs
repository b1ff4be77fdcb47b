//! The hyper service of one connection: checks what must be refused before a handler runs
//! (`limits::precheck`), puts the request body under the server's limits, and hands the
//! request to the handler; a body limit broken while the handler ran replaces its answer.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body::Body as _;
use hyper::body::Incoming;
use hyper::{Request, Response};

use crate::handler::{Busy, Respond};
use crate::limits::{self, Fault, Guarded};
use crate::server::Shared;
use crate::socket::CountersRef;
use crate::Body;

/// What a handler fiber spawned for a request is made from: its name says which client and
/// request it serves (the stack overflow report and `Server::dump_fibers` show it). Made for
/// each request from what the service keeps (the peer's address, not a name: the name is
/// written only when a handler fiber is named, so an idle connection holds no string).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    /// The client's address, if known.
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) stack_size: usize,
    /// HTTP/2 (no `Connection` header in answers).
    pub(crate) http2: bool,
}

impl Origin {
    /// `spindle-http 127.0.0.1:5000 POST /upload`: a handler fiber's name (the path cut at
    /// 100 bytes); `spindle-http connection POST /upload` when the peer is unknown.
    pub(crate) fn handler_name<B>(&self, req: &Request<B>) -> String {
        use std::fmt::Write as _;
        let path = req.uri().path();
        let cut = (0..=path.len().min(100)).rev().find(|&i| path.is_char_boundary(i)).unwrap_or(0);
        let method = req.method().as_str();
        // The exact length first: the fiber keeps the name as a boxed str, and a string with
        // spare room would be reallocated for it.
        let peer_len = self.peer.map_or("connection".len(), |peer| {
            let mut len = Len(0);
            let _ = write!(len, "{peer}");
            len.0
        });
        let mut name = String::with_capacity("spindle-http ".len() + peer_len + method.len() + cut + 2);
        match self.peer {
            Some(peer) => {
                let _ = write!(name, "spindle-http {peer}");
            }
            None => name.push_str("spindle-http connection"),
        }
        name.push(' ');
        name.push_str(method);
        name.push(' ');
        name.push_str(&path[..cut]);
        name
    }
}

/// Counts the bytes written through it.
struct Len(usize);

impl std::fmt::Write for Len {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

/// The counters a connection's service and its driver share (they live in the socket's
/// shared state, module `socket`: one allocation per connection).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Handlers running (request received, response not yet produced): a connection with a
    /// running handler is not idle. Under HTTP/2 the streams' futures may finish on several
    /// workers at once: read-modify-writes.
    pub(crate) busy: AtomicU32,
    /// Whether a request was received (an atomic the size of a byte: the counters share an
    /// allocation with the socket, whose size is rounded to the allocator's chunk).
    pub(crate) requested: AtomicBool,
}

pub(crate) struct Service<H> {
    pub(crate) shared: Arc<Shared<H>>,
    pub(crate) counters: CountersRef,
    pub(crate) peer: Option<SocketAddr>,
    /// HTTP/2 (no `Connection` header in answers).
    pub(crate) http2: bool,
}

impl<H: Respond> hyper::service::Service<Request<Incoming>> for Service<H> {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ResponseFuture<H::Future>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        self.counters.requested.store(true, Ordering::Relaxed);
        let body_limits = self.shared.config.body_limits;
        // HTTP/2 has no `Connection` header (a refused stream is reset; the connection lives).
        let http2 = self.http2;
        if let Some(refused) = limits::precheck(&req, &body_limits) {
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
        let inner = self.shared.handler.respond(req, busy, &origin);
        ResponseFuture::Handler { inner, fault }
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
        Handler { #[pin] inner: F, fault: Fault },
    }
}

impl<F: Future<Output = Response<Body>>> Future for ResponseFuture<F> {
    type Output = Result<Response<Body>, Infallible>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ResponseProj::Early { response } => Poll::Ready(Ok(*response
                .take()
                .expect("spindle-http response future polled after completion"))),
            ResponseProj::Handler { inner, fault } => {
                let res = std::task::ready!(inner.poll(cx));
                Poll::Ready(Ok(fault.response().unwrap_or(res)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::Blocking;

    /// hyper keeps a box with room for the response future for the connection's whole life.
    #[test]
    fn the_response_future_stays_small() {
        type H = Blocking<fn(Request<Body>) -> Response<&'static str>>;
        let size = std::mem::size_of::<ResponseFuture<<H as Respond>::Future>>();
        assert!(size <= 56, "a response future takes {size} bytes");
    }

    #[test]
    fn a_handler_fiber_is_named_after_the_peer_and_the_request() {
        let req = Request::post("/upload?x=1").body(()).unwrap();
        let peer = Some("127.0.0.1:5000".parse().unwrap());
        let named = |peer| Origin { peer, stack_size: 0, http2: false }.handler_name(&req);
        assert_eq!(named(peer), "spindle-http 127.0.0.1:5000 POST /upload");
        assert_eq!(named(None), "spindle-http connection POST /upload");
        let v6 = Some("[2001:db8::1%7]:443".parse().unwrap());
        let name = named(v6);
        assert_eq!(name, "spindle-http [2001:db8::1%7]:443 POST /upload");
        assert_eq!(name.capacity(), name.len(), "made at its exact length");
        let long = Request::get(format!("/{}", "é".repeat(80))).body(()).unwrap();
        let name = Origin { peer, stack_size: 0, http2: false }.handler_name(&long);
        assert!(name.len() <= "spindle-http 127.0.0.1:5000 GET ".len() + 100, "the path is cut");
    }
}
