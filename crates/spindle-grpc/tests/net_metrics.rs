//! Per-method call figures (feature `metrics`) through the `metrics` facade, as a recorder
//! receives them: calls over the network counted on the server and on the client by service,
//! method and code, the in-flight gauges back to zero once the calls are gone, and a latency
//! sample per call.
//!
//! Its own test binary: the recorder is process-wide and set once.
#![cfg(feature = "metrics")]

mod net;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::{CompositeKey, MetricKind};

/// What the recorder holds (taken once: a snapshot drains the histograms).
type Snapshot = Vec<(CompositeKey, Option<metrics::Unit>, Option<metrics::SharedString>, DebugValue)>;
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::*;

/// The value of the metric `name` whose labels include all of `labels`.
fn value<'a>(
    snapshot: &'a Snapshot,
    kind: MetricKind,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<&'a DebugValue> {
    snapshot.iter().find_map(|(key, _, _, value)| {
        let matches = key.kind() == kind
            && key.key().name() == name
            && labels
                .iter()
                .all(|(l, v)| key.key().labels().any(|label| label.key() == *l && label.value() == *v));
        matches.then_some(value)
    })
}

fn counter(s: &Snapshot, name: &str, labels: &[(&str, &str)]) -> u64 {
    match value(s, MetricKind::Counter, name, labels) {
        Some(DebugValue::Counter(n)) => *n,
        None => 0,
        other => panic!("{name}: {other:?}"),
    }
}

fn gauge(s: &Snapshot, name: &str, labels: &[(&str, &str)]) -> f64 {
    match value(s, MetricKind::Gauge, name, labels) {
        Some(DebugValue::Gauge(g)) => g.into_inner(),
        None => 0.0,
        other => panic!("{name}: {other:?}"),
    }
}

fn samples(s: &Snapshot, name: &str, labels: &[(&str, &str)]) -> usize {
    match value(s, MetricKind::Histogram, name, labels) {
        Some(DebugValue::Histogram(v)) => v.len(),
        None => 0,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn calls_are_counted_by_method_and_code_on_both_sides() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().expect("the only recorder of this test binary");

    let net = net::start(|s| s);
    let channel = net.client();
    let outcomes = net.run(async move {
        let mut client = TestServiceClient::new(channel);
        let mut outcomes = Vec::new();
        for _ in 0..5 {
            outcomes.push(
                client.unary_call(SimpleRequest { response_size: 1, ..Default::default() }).await.is_ok(),
            );
        }
        for _ in 0..2 {
            let failing = SimpleRequest {
                response_status: Some(EchoStatus { code: 9, message: "no".into() }),
                ..Default::default()
            };
            outcomes.push(client.unary_call(failing).await.is_ok());
        }
        outcomes.push(client.empty_call(Empty {}).await.is_ok());
        outcomes
    });
    assert_eq!(outcomes, [true, true, true, true, true, false, false, true]);

    let unary = [("grpc_service", "spindle.interop.TestService"), ("grpc_method", "UnaryCall")];
    let ok = [unary[0], unary[1], ("grpc_code", "OK")];
    let failed = [unary[0], unary[1], ("grpc_code", "FAILED_PRECONDITION")];
    // One snapshot (taking one resets the counters and drains the histograms). Every call
    // has ended on both sides: the server records its end before it sends the status, the
    // client when it reads it.
    let snapshot = snapshotter.snapshot().into_vec();
    let s = &snapshot;
    for side in ["server", "client"] {
        let name = |what: &str| format!("grpc_{side}_{what}");
        assert_eq!(counter(s, &name("started_total"), &unary), 7, "{side}");
        assert_eq!(counter(s, &name("handled_total"), &ok), 5, "{side}");
        assert_eq!(counter(s, &name("handled_total"), &failed), 2, "{side}");
        assert_eq!(samples(s, &name("handling_seconds"), &unary), 7, "{side}");
        let empty = [("grpc_method", "EmptyCall"), ("grpc_code", "OK")];
        assert_eq!(counter(s, &name("handled_total"), &empty), 1, "{side}");
        assert_eq!(gauge(s, &name("in_flight"), &unary), 0.0, "{side}: calls left in flight");
        assert!(value(s, MetricKind::Gauge, &name("in_flight"), &unary).is_some(), "{side}: no gauge");
    }
}
