//! Call spans of the network client (feature `tracing`) and its call figures (feature
//! `metrics`, module `call_metrics`), ended together.
//!
//! One span per call sent on a connection, named `grpc_client`, at `DEBUG`, with the call's
//! `service` and `method` (from its path), its `status` (the gRPC code, recorded when the call
//! ends) and `latency_ms`; an event `finished call` closes it with the same two. The span is
//! made where the call starts, inside whatever span the caller is in, so a request's server
//! span, the client calls its handler makes and their retries nest as one trace. A balanced
//! channel's call that is retried makes one span per attempt (each attempt is a call on a
//! connection). Without the features [`ClientTrace`] is empty and every method compiles to
//! nothing.
//!
//! # Invariants
//!
//! - **Ended once.** A started call is ended exactly once: by [`ClientTrace::end_with`] with
//!   its status, or by the drop as `CANCELLED` (the caller dropped the call or its body).

use tonic::Code;

use crate::call_metrics::{CallMetrics, Side};

/// One client call's span and start time (nothing without the `tracing` feature), and its
/// figures.
#[derive(Debug)]
pub(crate) struct ClientTrace {
    #[cfg(feature = "tracing")]
    span: Option<(tracing::Span, std::time::Instant)>,
    metrics: CallMetrics,
}

impl ClientTrace {
    /// The span and figures of a call to `path` (`/package.Service/Method`).
    #[inline]
    pub(crate) fn start(path: &str) -> ClientTrace {
        let metrics = CallMetrics::start(Side::Client, path);
        #[cfg(feature = "tracing")]
        {
            let (service, method) =
                crate::path::service_and_method(path.trim_start_matches('/')).unwrap_or((path, ""));
            let span = tracing::debug_span!(
                "grpc_client",
                service,
                method,
                status = tracing::field::Empty,
                latency_ms = tracing::field::Empty,
            );
            let span = (!span.is_disabled()).then(|| (span, std::time::Instant::now()));
            ClientTrace { span, metrics }
        }
        #[cfg(not(feature = "tracing"))]
        ClientTrace { metrics }
    }

    /// Ends the call with the code `code` gives (asked only if the call has not ended).
    #[inline]
    pub(crate) fn end_with(&mut self, code: impl FnOnce() -> Code) {
        #[cfg(feature = "tracing")]
        if let Some((span, start)) = self.span.take() {
            let code = code();
            self.metrics.end_with(|| code);
            let latency_ms = start.elapsed().as_secs_f64() * 1e3;
            let status = code as i32;
            span.record("status", status);
            span.record("latency_ms", latency_ms);
            span.in_scope(|| tracing::debug!(status, latency_ms, "finished call"));
            return;
        }
        self.metrics.end_with(code);
    }
}

impl Drop for ClientTrace {
    fn drop(&mut self) {
        #[cfg(feature = "tracing")]
        if self.span.is_some() {
            self.end_with(|| Code::Cancelled);
        }
        // Without a span the figures end themselves as CANCELLED on their drop.
    }
}
