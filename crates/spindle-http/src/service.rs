//! The hyper service of one connection: checks what must be refused before a handler runs
//! (`limits::precheck`), puts the request body under the server's limits, and hands the
//! request to the handler; a body limit broken while the handler ran replaces its answer.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body::Body as _;
use hyper::body::Incoming;
use hyper::{Request, Response};

use crate::handler::{Busy, Respond};
use crate::limits::{self, Fault, Guarded};
use crate::server::Shared;
use crate::Body;

/// What a handler fiber spawned for a request is made from: its name says which client and
/// request it serves (the stack overflow report and `Server::dump_fibers` show it).
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    /// `spindle-http 127.0.0.1:5000`: the connection's name, the start of its handler
    /// fibers' names.
    pub(crate) name: Box<str>,
    pub(crate) stack_size: usize,
    /// HTTP/2 (no `Connection` header in answers).
    pub(crate) http2: bool,
}

impl Origin {
    pub(crate) fn new(peer: Option<SocketAddr>, stack_size: usize, http2: bool) -> Origin {
        let name = match peer {
            Some(peer) => format!("spindle-http {peer}"),
            None => "spindle-http connection".to_owned(),
        };
        Origin { name: name.into_boxed_str(), stack_size, http2 }
    }

    /// `spindle-http 127.0.0.1:5000 POST /upload`: a handler fiber's name (the path cut at
    /// 100 bytes).
    pub(crate) fn handler_name<B>(&self, req: &Request<B>) -> String {
        let path = req.uri().path();
        let cut = (0..=path.len().min(100)).rev().find(|&i| path.is_char_boundary(i)).unwrap_or(0);
        let method = req.method().as_str();
        let mut name = String::with_capacity(self.name.len() + method.len() + cut + 2);
        name.push_str(&self.name);
        name.push(' ');
        name.push_str(method);
        name.push(' ');
        name.push_str(&path[..cut]);
        name
    }
}

/// The counters a connection's service and its driver share.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Handlers running (request received, response not yet produced): a connection with a
    /// running handler is not idle. Under HTTP/2 the streams' futures may finish on several
    /// workers at once: read-modify-writes.
    pub(crate) busy: AtomicU32,
    /// Requests received.
    pub(crate) requests: AtomicU64,
}

pub(crate) struct Service<H> {
    pub(crate) shared: Arc<Shared<H>>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) origin: Origin,
}

impl<H: Respond> hyper::service::Service<Request<Incoming>> for Service<H> {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ResponseFuture<H::Future>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let body_limits = self.shared.config.body_limits;
        // HTTP/2 has no `Connection` header (a refused stream is reset; the connection lives).
        let http2 = self.origin.http2;
        if let Some(refused) = limits::precheck(&req, &body_limits) {
            return ResponseFuture::Early { response: Some(without_connection_header(refused, http2)) };
        }
        let busy = Busy::enter(&self.counters);
        let mut fault = Fault::default();
        let req = req.map(|body| {
            if body.is_end_stream() {
                Body::empty() // no body (a GET): nothing to guard, nothing to allocate
            } else {
                fault = Fault::new();
                Body::guarded(Guarded::new(body, body_limits, fault.clone()))
            }
        });
        let inner = self.shared.handler.respond(req, busy, &self.origin);
        ResponseFuture::Handler { inner, fault, http2 }
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
    /// hyper moves this future around once per request, so it is kept small).
    #[project = ResponseProj]
    pub(crate) enum ResponseFuture<F> {
        Early { response: Option<Response<Body>> },
        Handler { #[pin] inner: F, fault: Fault, http2: bool },
    }
}

impl<F: Future<Output = Response<Body>>> Future for ResponseFuture<F> {
    type Output = Result<Response<Body>, Infallible>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ResponseProj::Early { response } => Poll::Ready(Ok(response
                .take()
                .expect("spindle-http response future polled after completion"))),
            ResponseProj::Handler { inner, fault, http2 } => {
                let res = std::task::ready!(inner.poll(cx));
                let replaced = fault.response().map(|r| without_connection_header(r, *http2));
                Poll::Ready(Ok(replaced.unwrap_or(res)))
            }
        }
    }
}
