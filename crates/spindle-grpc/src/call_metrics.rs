//! Per-method call figures (feature `metrics`) through the [`metrics`] crate's facade, so that
//! whatever recorder the program installs (a Prometheus exporter, statsd...) receives them: on
//! the server and on the network client, for each `service`/`method`,
//!
//! - `grpc_{server,client}_started_total` (counter): calls started;
//! - `grpc_{server,client}_handled_total` (counter, label `grpc_code`: `OK`, `UNAVAILABLE`...):
//!   calls ended, by status; a call dropped before its status (the client went away, the
//!   caller dropped it) counts as `CANCELLED`;
//! - `grpc_{server,client}_in_flight` (gauge): calls started and not ended;
//! - `grpc_{server,client}_handling_seconds` (histogram): from start to status.
//!
//! The names and labels follow go-grpc-prometheus (`grpc_service`, `grpc_method`, `grpc_code`).
//! Without the feature [`CallMetrics`] is empty and every method compiles to nothing.
//!
//! # Invariants
//!
//! - **Ended once.** Every started call is ended exactly once: by [`CallMetrics::end`] with
//!   its status, or by the guard's drop as `CANCELLED`; so `in_flight` returns to zero when
//!   the calls are gone, whatever way they went.
//! - **Handles made once per method.** The counters, gauge and histogram of a method are
//!   registered with the recorder at its first call and kept in a map (read-locked on later
//!   calls): a call costs a lookup by path, not a registration with labels built each time.
//!   The map holds one entry per method path seen, at most [`MAX_METHODS`] per side: past
//!   that (a client sending made-up paths), calls share one `unknown`/`unknown` entry.

/// Which side of a call: the label prefix of its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Side {
    Server,
    Client,
}

/// The most methods with figures of their own, per side (module docs).
pub const MAX_METHODS: usize = 1024;

#[cfg(feature = "metrics")]
mod on {
    use std::collections::HashMap;
    use std::sync::{Arc, OnceLock, RwLock};
    use std::time::Instant;

    use tonic::Code;

    use super::Side;
    use crate::status::code_name;

    /// The figures of one method on one side.
    #[derive(Debug)]
    pub(super) struct MethodMetrics {
        service: String,
        method: String,
        side: Side,
        started: metrics::Counter,
        in_flight: metrics::Gauge,
        handling: metrics::Histogram,
        /// One counter per code, registered at its first use.
        handled: [OnceLock<metrics::Counter>; 17],
    }

    type Registry = RwLock<HashMap<(Side, Box<str>), Arc<MethodMetrics>>>;

    fn registry() -> &'static Registry {
        static REGISTRY: OnceLock<Registry> = OnceLock::new();
        REGISTRY.get_or_init(Registry::default)
    }

    fn names(side: Side) -> [&'static str; 4] {
        match side {
            Side::Server => [
                "grpc_server_started_total",
                "grpc_server_in_flight",
                "grpc_server_handling_seconds",
                "grpc_server_handled_total",
            ],
            Side::Client => [
                "grpc_client_started_total",
                "grpc_client_in_flight",
                "grpc_client_handling_seconds",
                "grpc_client_handled_total",
            ],
        }
    }

    impl MethodMetrics {
        fn of(side: Side, path: &str) -> Arc<MethodMetrics> {
            {
                let map = registry().read().unwrap_or_else(|e| e.into_inner());
                if let Some(m) = map.get(&(side, path.into())) {
                    return m.clone();
                }
                let count = map.keys().filter(|(s, _)| *s == side).count();
                if count >= super::MAX_METHODS && path != "/unknown/unknown" {
                    drop(map);
                    return MethodMetrics::of(side, "/unknown/unknown");
                }
            }
            let (service, method) = crate::path::service_and_method(path.trim_start_matches('/'))
                .unwrap_or(("unknown", "unknown"));
            let [started, in_flight, handling, _] = names(side);
            let labels = [("grpc_service", service.to_string()), ("grpc_method", method.to_string())];
            let made = Arc::new(MethodMetrics {
                service: service.to_string(),
                method: method.to_string(),
                side,
                started: metrics::counter!(started, &labels),
                in_flight: metrics::gauge!(in_flight, &labels),
                handling: metrics::histogram!(handling, &labels),
                handled: Default::default(),
            });
            let mut map = registry().write().unwrap_or_else(|e| e.into_inner());
            map.entry((side, path.into())).or_insert(made).clone()
        }

        fn handled(&self, code: Code) -> &metrics::Counter {
            self.handled[(code as i32).clamp(0, 16) as usize].get_or_init(|| {
                let labels = [
                    ("grpc_service", self.service.clone()),
                    ("grpc_method", self.method.clone()),
                    ("grpc_code", code_name(code).to_string()),
                ];
                metrics::counter!(names(self.side)[3], &labels)
            })
        }
    }

    /// One call's figures (module docs).
    #[derive(Debug)]
    pub(crate) struct CallMetrics(Option<(Arc<MethodMetrics>, Instant)>);

    impl CallMetrics {
        pub(crate) fn none() -> CallMetrics {
            CallMetrics(None)
        }

        pub(crate) fn start(side: Side, path: &str) -> CallMetrics {
            let method = MethodMetrics::of(side, path);
            method.started.increment(1);
            method.in_flight.increment(1.0);
            CallMetrics(Some((method, Instant::now())))
        }

        /// Ends the call with the code `code` gives (asked only if the call has not ended).
        pub(crate) fn end_with(&mut self, code: impl FnOnce() -> Code) {
            if self.0.is_some() {
                self.end(code());
            }
        }

        pub(crate) fn end(&mut self, code: Code) {
            if let Some((method, start)) = self.0.take() {
                method.in_flight.decrement(1.0);
                method.handling.record(start.elapsed().as_secs_f64());
                method.handled(code).increment(1);
            }
        }
    }

    impl Drop for CallMetrics {
        fn drop(&mut self) {
            self.end(Code::Cancelled);
        }
    }
}

#[cfg(feature = "metrics")]
pub(crate) use on::CallMetrics;

/// One call's figures: nothing without the `metrics` feature.
#[cfg(not(feature = "metrics"))]
#[derive(Debug)]
pub(crate) struct CallMetrics;

#[cfg(not(feature = "metrics"))]
impl CallMetrics {
    #[inline(always)]
    pub(crate) fn none() -> CallMetrics {
        CallMetrics
    }

    #[inline(always)]
    pub(crate) fn start(_: Side, _: &str) -> CallMetrics {
        CallMetrics
    }

    #[inline(always)]
    pub(crate) fn end_with(&mut self, _: impl FnOnce() -> tonic::Code) {}
}

/// The code of a `grpc-status` value (`UNKNOWN` for one that is not a number).
pub(crate) fn code_of(status: Option<&http::HeaderValue>) -> tonic::Code {
    status
        .and_then(|s| s.to_str().ok())
        .and_then(|s| s.parse::<i32>().ok())
        .map(tonic::Code::from_i32)
        .unwrap_or(tonic::Code::Unknown)
}
