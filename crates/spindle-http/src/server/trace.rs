//! Request spans (feature `tracing`): each request a handler answers runs in a span named
//! `request`, at `DEBUG`, as tower-http's `TraceLayer` makes them, with its `method`, `path`
//! and `version`; its `status` and `latency_ms` (until the response head is ready) are
//! recorded when the handler answers, with an event `finished processing request` in the
//! span. The handler is called and its response future polled inside the span, so a blocking
//! handler's fiber inherits it (spindle's fiber-aware tracing) and its events are inside too.
//! Without the feature [`Traced`] is its inner future and nothing else.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::{Request, Response};

use crate::server::handler::{Busy, Respond};
use crate::server::origin::Origin;
use crate::transport::body::Body;

/// Calls `handler` for `req` inside the request's span (module doc).
#[inline(always)]
pub(crate) fn respond<H: Respond>(
    handler: &H,
    req: Request<Body>,
    busy: Busy,
    origin: &Origin,
) -> Traced<H::Future> {
    #[cfg(feature = "tracing")]
    {
        let span = tracing::debug_span!(
            "request",
            method = %req.method(),
            path = req.uri().path(),
            version = ?req.version(),
            status = tracing::field::Empty,
            latency_ms = tracing::field::Empty,
        );
        let inner = span.in_scope(|| handler.respond(req, busy, origin));
        let span = (!span.is_disabled()).then(|| Box::new((span, std::time::Instant::now())));
        Traced { inner, span }
    }
    #[cfg(not(feature = "tracing"))]
    Traced { inner: handler.respond(req, busy, origin), span: () }
}

pin_project_lite::pin_project! {
    /// A handler's response future, polled inside its request's span.
    pub(crate) struct Traced<F> {
        #[pin]
        inner: F,
        span: SpanSlot,
    }
}

/// The request's span and start, once the handler is called (feature `tracing`). Boxed: hyper
/// keeps room for the response future for the connection's whole life.
#[cfg(feature = "tracing")]
type SpanSlot = Option<Box<(tracing::Span, std::time::Instant)>>;

/// Nothing without the feature.
#[cfg(not(feature = "tracing"))]
type SpanSlot = ();

impl<F, E> Future for Traced<F>
where
    F: Future<Output = Result<Response<Body>, E>>,
{
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        #[cfg(feature = "tracing")]
        {
            let Some(traced) = this.span.as_ref() else { return this.inner.poll(cx) };
            let poll = traced.0.in_scope(|| this.inner.poll(cx));
            if let Poll::Ready(Ok(response)) = &poll {
                let (span, start) = &**traced;
                let latency_ms = start.elapsed().as_secs_f64() * 1e3;
                let status = response.status().as_u16();
                span.record("status", status);
                span.record("latency_ms", latency_ms);
                span.in_scope(|| tracing::debug!(status, latency_ms, "finished processing request"));
                *this.span = None;
            }
            poll
        }
        #[cfg(not(feature = "tracing"))]
        {
            let _ = this.span;
            this.inner.poll(cx)
        }
    }
}
