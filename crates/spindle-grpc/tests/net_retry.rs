//! Retries on a `BalancedChannel`: a replica that answers UNAVAILABLE is retried past under a
//! retry policy (and not without one, nor for a code the policy does not name); the attempts
//! stop at `maxAttempts` and under the throttle; a request above the retry buffer is sent
//! once; a server stopped while calls go on costs no call an error with a policy; a call
//! never waits past its deadline for a retry; with outlier ejection, a replica whose calls keep
//! failing is left out of the picks.
//!
//! Every wait is bounded (client fibers under a hang guard); no assertion is about speed.

mod net;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use spindle_grpc::{
    BalancedChannel, Channel, Endpoint, OutlierEjection, RetryPolicy, RetryThrottle, Server, ServiceConfig,
    Serving,
};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::*;
use spindle_grpc_interop::Counters;
use tonic::Code;

use net::fleet::{run, runtime, HANG_GUARD};

/// Answers UNAVAILABLE (with an optional pushback header) while `fail` is set, counting the
/// requests it refused; otherwise passes the request on.
#[derive(Clone)]
struct Failing<S> {
    inner: S,
    fail: Arc<AtomicBool>,
    refused: Arc<AtomicUsize>,
}

impl<S> tower::Service<http::Request<tonic::body::Body>> for Failing<S>
where
    S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        if self.fail.load(SeqCst) {
            self.refused.fetch_add(1, SeqCst);
            let response = tonic::Status::unavailable("this replica refuses calls (the test's)").into_http();
            return Box::pin(async move { Ok(response) });
        }
        Box::pin(self.inner.call(request))
    }
}

struct Replica {
    serving: Option<Serving>,
    counters: Arc<Counters>,
    refused: Arc<AtomicUsize>,
    addr: SocketAddr,
}

impl Replica {
    fn start(rt: &spindle::Runtime, failing: bool) -> Replica {
        let service = spindle_grpc_interop::Server::new(net::spindle_sleep);
        let counters = service.counters.clone();
        let fail = Arc::new(AtomicBool::new(failing));
        let refused = Arc::new(AtomicUsize::new(0));
        let channel = Channel::new().with_handle(rt.handle()).add_service(TestServiceServer::new(service));
        let (f, r) = (fail.clone(), refused.clone());
        let layer =
            tower::layer::layer_fn(move |inner| Failing { inner, fail: f.clone(), refused: r.clone() });
        let serving = rt.block_on(move || {
            let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
            Server::new(channel).layer(layer).serve_tcp(listener).unwrap()
        });
        let addr = serving.local_addr().unwrap();
        Replica { serving: Some(serving), counters, refused, addr }
    }

    fn served(&self) -> u64 {
        self.counters.started.load(SeqCst)
    }
}

fn unavailable_policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::new(
        max_attempts,
        Duration::from_millis(1),
        Duration::from_millis(5),
        2.0,
        [Code::Unavailable],
    )
    .unwrap()
}

fn channel(
    rt: &spindle::Runtime,
    replicas: &[&Replica],
    config: Option<ServiceConfig>,
    buffer: Option<usize>,
) -> BalancedChannel {
    let list: Vec<String> = replicas.iter().map(|r| r.addr.to_string()).collect();
    let template = Endpoint::new("http://ignored")
        .unwrap()
        .handle(rt.handle())
        .backoff(Duration::from_millis(10), Duration::from_millis(50));
    let mut builder =
        BalancedChannel::builder(&format!("ipv4:{}", list.join(","))).unwrap().endpoint(template);
    if let Some(config) = config {
        builder = builder.service_config(config);
    }
    if let Some(bytes) = buffer {
        builder = builder.retry_buffer(bytes);
    }
    builder.build().unwrap()
}

/// `n` unary calls of `size` bytes each; their outcomes.
fn calls(
    rt: &spindle::Runtime,
    channel: &BalancedChannel,
    n: usize,
    size: usize,
) -> Vec<Result<(), tonic::Status>> {
    let mut client = TestServiceClient::new(channel.clone());
    run(rt, async move {
        let mut outcomes = Vec::with_capacity(n);
        for _ in 0..n {
            let request = SimpleRequest {
                response_size: 1,
                payload: Some(Payload { body: vec![7; size].into() }),
                ..Default::default()
            };
            outcomes.push(client.unary_call(request).await.map(drop));
        }
        outcomes
    })
}

fn errors(outcomes: &[Result<(), tonic::Status>]) -> Vec<Code> {
    outcomes.iter().filter_map(|o| o.as_ref().err().map(tonic::Status::code)).collect()
}

#[test]
fn a_replica_answering_unavailable_is_retried_past_under_a_policy() {
    let rt = runtime();
    let (bad, good) = (Replica::start(&rt, true), Replica::start(&rt, false));

    // Without a policy, the calls picked for the bad replica fail.
    let plain = channel(&rt, &[&bad, &good], None, None);
    let outcomes = calls(&rt, &plain, 40, 10);
    let failed = errors(&outcomes);
    assert!(!failed.is_empty() && failed.iter().all(|&c| c == Code::Unavailable), "{failed:?}");

    // With one, every call succeeds: a refused attempt goes again, to the next replica.
    let refused_before = bad.refused.load(SeqCst);
    let served_before = good.served();
    let retried = channel(&rt, &[&bad, &good], Some(ServiceConfig::retry_all(unavailable_policy(3))), None);
    let outcomes = calls(&rt, &retried, 40, 10);
    assert!(errors(&outcomes).is_empty(), "{:?}", errors(&outcomes));
    assert_eq!(good.served() - served_before, 40);
    assert!(bad.refused.load(SeqCst) > refused_before, "the bad replica was never tried");
}

#[test]
fn attempts_stop_at_the_policy_and_codes_it_does_not_name_are_not_retried() {
    let rt = runtime();
    let bad = Replica::start(&rt, true);
    let channel_3 = channel(&rt, &[&bad], Some(ServiceConfig::retry_all(unavailable_policy(3))), None);
    let outcomes = calls(&rt, &channel_3, 5, 10);
    assert_eq!(errors(&outcomes), [Code::Unavailable; 5]);
    assert_eq!(bad.refused.load(SeqCst), 15, "3 attempts a call");

    // A policy for ABORTED only: UNAVAILABLE is not retried.
    let aborted =
        RetryPolicy::new(5, Duration::from_millis(1), Duration::from_millis(5), 2.0, [Code::Aborted])
            .unwrap();
    let other = channel(&rt, &[&bad], Some(ServiceConfig::retry_all(aborted)), None);
    let before = bad.refused.load(SeqCst);
    let outcomes = calls(&rt, &other, 5, 10);
    assert_eq!(errors(&outcomes), [Code::Unavailable; 5]);
    assert_eq!(bad.refused.load(SeqCst) - before, 5, "one attempt a call");
}

#[test]
fn the_throttle_stops_retries_when_most_calls_fail() {
    let rt = runtime();
    let bad = Replica::start(&rt, true);
    // 4 tokens: retries allowed while more than 2 are left.
    let config =
        ServiceConfig::retry_all(unavailable_policy(5)).throttle(RetryThrottle::new(4, 0.1).unwrap());
    let channel = channel(&rt, &[&bad], Some(config), None);
    let outcomes = calls(&rt, &channel, 10, 10);
    assert_eq!(errors(&outcomes), [Code::Unavailable; 10]);
    // The first call: attempt 1 fails (3 tokens left, retry), attempt 2 fails (2 left, no
    // retry); every later call fails once and is not retried. 2 + 9 attempts.
    assert_eq!(bad.refused.load(SeqCst), 11);
}

#[test]
fn a_request_above_the_retry_buffer_is_sent_once() {
    let rt = runtime();
    let bad = Replica::start(&rt, true);
    let channel = channel(&rt, &[&bad], Some(ServiceConfig::retry_all(unavailable_policy(3))), Some(1024));
    let outcomes = calls(&rt, &channel, 3, 4096);
    assert_eq!(errors(&outcomes), [Code::Unavailable; 3]);
    assert_eq!(bad.refused.load(SeqCst), 3, "retried past the buffer");
    // A small one is retried.
    let outcomes = calls(&rt, &channel, 1, 10);
    assert_eq!(errors(&outcomes), [Code::Unavailable]);
    assert_eq!(bad.refused.load(SeqCst), 6);
}

#[test]
fn a_server_stopped_while_calls_go_on_costs_no_call_an_error() {
    let rt = runtime();
    let mut replicas: Vec<Replica> = (0..3).map(|_| Replica::start(&rt, false)).collect();
    let refs: Vec<&Replica> = replicas.iter().collect();
    let channel = channel(&rt, &refs, Some(ServiceConfig::retry_all(unavailable_policy(4))), None);
    let stop_at = Arc::new(AtomicUsize::new(0));
    let done = stop_at.clone();
    let background = {
        let channel = channel.clone();
        let mut client = TestServiceClient::new(channel);
        rt.spawn(move || {
            spindle::task::block_on(async move {
                let mut outcomes = Vec::new();
                for i in 0..600 {
                    done.store(i, SeqCst);
                    outcomes.push(client.empty_call(Empty {}).await.map(drop));
                }
                outcomes
            })
        })
    };
    while stop_at.load(SeqCst) < 100 {
        std::thread::sleep(Duration::from_millis(1));
    }
    replicas[1].serving.take().unwrap().shutdown(Duration::from_secs(1));
    let outcomes = background.join_timeout(HANG_GUARD).expect("hung").unwrap();
    assert_eq!(errors(&outcomes), [], "calls failed while a server stopped");
    assert!(replicas[0].served() > 0 && replicas[2].served() > 0);
}

#[test]
fn a_retry_never_waits_past_the_calls_deadline() {
    let rt = runtime();
    let bad = Replica::start(&rt, true);
    // Backoffs far longer than the deadline (and than the hang guard: a retry that waited for
    // one would fail the test).
    let slow =
        RetryPolicy::new(5, Duration::from_secs(1000), Duration::from_secs(2000), 2.0, [Code::Unavailable])
            .unwrap();
    let channel = channel(&rt, &[&bad], Some(ServiceConfig::retry_all(slow)), None);
    let mut client = TestServiceClient::new(channel);
    let outcome = run(&rt, async move {
        let mut request = tonic::Request::new(Empty {});
        request.set_timeout(Duration::from_millis(200));
        client.empty_call(request).await.map(drop)
    });
    let status = outcome.expect_err("a call to a failing replica");
    assert!(matches!(status.code(), Code::Unavailable | Code::DeadlineExceeded), "{status:?}");
}

#[test]
fn a_replica_whose_calls_keep_failing_is_ejected() {
    let rt = runtime();
    let (bad, good) = (Replica::start(&rt, true), Replica::start(&rt, false));
    let template = Endpoint::new("http://ignored").unwrap().handle(rt.handle());
    // No retry policy: without the ejection, about every other call would fail.
    let channel = BalancedChannel::builder(&format!("ipv4:{},{}", bad.addr, good.addr))
        .unwrap()
        .endpoint(template)
        .outlier_ejection(
            OutlierEjection::default()
                .consecutive_failures(3)
                .ejection_time(Duration::from_secs(600), Duration::from_secs(600))
                .max_ejection_percent(50),
        )
        .build()
        .unwrap();
    let outcomes = calls(&rt, &channel, 20, 10);
    let failed = errors(&outcomes);
    assert_eq!(failed, [Code::Unavailable; 3], "three failures eject the replica: {failed:?}");
    assert_eq!(bad.refused.load(SeqCst), 3);
    // From then on every call goes to the good one.
    let before = good.served();
    let outcomes = calls(&rt, &channel, 50, 10);
    assert!(errors(&outcomes).is_empty(), "{:?}", errors(&outcomes));
    assert_eq!(good.served() - before, 50);
    assert_eq!(bad.refused.load(SeqCst), 3);
}

#[test]
fn ejection_never_leaves_a_channel_without_servers() {
    let rt = runtime();
    let bad = Replica::start(&rt, true);
    let template = Endpoint::new("http://ignored").unwrap().handle(rt.handle());
    let channel = BalancedChannel::builder(&format!("ipv4:{}", bad.addr))
        .unwrap()
        .endpoint(template)
        .outlier_ejection(OutlierEjection::default().consecutive_failures(1))
        .build()
        .unwrap();
    // The only replica, ejected, still gets the calls (and answers them).
    let outcomes = calls(&rt, &channel, 5, 10);
    assert_eq!(errors(&outcomes), [Code::Unavailable; 5]);
    assert_eq!(bad.refused.load(SeqCst), 5);
}
