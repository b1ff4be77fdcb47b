//! Call spans of the network server (feature `tracing`): one span per call, as tower-http's
//! `TraceLayer` makes one per request, named `grpc`, at `DEBUG`, with the call's `service`
//! and `method` (from its path), its `status` (the gRPC code, recorded when the call ends) and
//! `latency_ms`; an event `finished processing call` closes it with the same two. The call's
//! response future and body are polled inside it, so the handler's own events (and the fibers
//! it spawns, which inherit it) are inside too. Without the feature [`CallTrace`] is empty and
//! every method compiles to nothing.

use crate::call_metrics::{code_of, CallMetrics, Side};

/// One call's span and start time (nothing without the feature), and its figures (module
/// `call_metrics`, feature `metrics`).
#[derive(Debug)]
pub(super) struct CallTrace {
    #[cfg(feature = "tracing")]
    inner: Option<(tracing::Span, std::time::Instant)>,
    metrics: CallMetrics,
}

impl CallTrace {
    /// No span: a refused request, or a trace already finished.
    #[inline(always)]
    pub(super) fn none() -> CallTrace {
        CallTrace {
            #[cfg(feature = "tracing")]
            inner: None,
            metrics: CallMetrics::none(),
        }
    }

    /// The span of a call to `path` (`/package.Service/Method`), if its level is enabled.
    #[inline]
    pub(super) fn new(path: &str) -> CallTrace {
        let metrics = CallMetrics::start(Side::Server, path);
        #[cfg(feature = "tracing")]
        {
            let (service, method) =
                crate::path::service_and_method(path.trim_start_matches('/')).unwrap_or((path, ""));
            let span = tracing::debug_span!(
                "grpc",
                service,
                method,
                status = tracing::field::Empty,
                latency_ms = tracing::field::Empty,
            );
            if span.is_disabled() {
                return CallTrace { inner: None, metrics };
            }
            CallTrace { inner: Some((span, std::time::Instant::now())), metrics }
        }
        #[cfg(not(feature = "tracing"))]
        CallTrace { metrics }
    }

    /// Enters the span (if any) until the guard drops.
    #[inline(always)]
    pub(super) fn enter(&self) -> Entered<'_> {
        #[cfg(feature = "tracing")]
        return Entered(self.inner.as_ref().map(|(span, _)| span.enter()));
        #[cfg(not(feature = "tracing"))]
        Entered(std::marker::PhantomData)
    }

    /// The call ended with `status` (a `grpc-status` value; none: the body ended without
    /// trailers, an abnormal end hyper will reset): records it and the latency.
    #[inline]
    pub(super) fn finish(mut self, status: Option<&http::HeaderValue>) {
        // No status: hyper resets the stream, the client sees the call cancelled.
        self.metrics.end_with(|| if status.is_some() { code_of(status) } else { tonic::Code::Cancelled });
        #[cfg(feature = "tracing")]
        if let Some((span, start)) = self.inner.take() {
            let latency_ms = start.elapsed().as_secs_f64() * 1e3;
            let status = status.and_then(|s| s.to_str().ok()).unwrap_or("none");
            span.record("status", status);
            span.record("latency_ms", latency_ms);
            span.in_scope(|| tracing::debug!(status, latency_ms, "finished processing call"));
        }
        #[cfg(not(feature = "tracing"))]
        let _ = status;
    }
}

/// The guard of [`CallTrace::enter`].
#[cfg(feature = "tracing")]
pub(super) struct Entered<'a>(#[allow(dead_code)] Option<tracing::span::Entered<'a>>);

/// The guard of [`CallTrace::enter`] (nothing without the feature).
#[cfg(not(feature = "tracing"))]
pub(super) struct Entered<'a>(std::marker::PhantomData<&'a ()>);

/// Dropped where the span would be left, as with the feature.
#[cfg(not(feature = "tracing"))]
impl Drop for Entered<'_> {
    fn drop(&mut self) {}
}
