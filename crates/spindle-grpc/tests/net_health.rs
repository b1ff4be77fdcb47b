//! Client-side health checking (`BalancedBuilder::health_check`): two replicas serving
//! tonic-health's `grpc.health.v1.Health` beside the interop service; a replica that reports
//! NOT_SERVING is left out of the picks until it reports SERVING again; a replica without the
//! health service is served as healthy; every replica not serving leaves the picks to ignore
//! health rather than fail every call.
//!
//! Every wait is bounded (a condition polled until a deadline; client fibers under a hang
//! guard); nothing asserts a speed.

mod net;

use std::net::SocketAddr;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

use net::fleet::run;
use net::wait_until;
use spindle_grpc::{BalancedChannel, Channel, Endpoint, Server, Serving};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::*;
use spindle_grpc_interop::Counters;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

const BOUND: Duration = Duration::from_secs(10);
const SERVICE: &str = "spindle.interop.TestService";

struct Replica {
    _serving: Serving,
    counters: Arc<Counters>,
    reporter: Option<HealthReporter>,
    addr: SocketAddr,
}

impl Replica {
    /// A replica, with tonic-health's service reporting SERVICE as serving, or without it.
    fn start(rt: &spindle::Runtime, with_health: bool) -> Replica {
        let service = spindle_grpc_interop::Server::new(net::spindle_sleep);
        let counters = service.counters.clone();
        let mut channel =
            Channel::new().with_handle(rt.handle()).add_service(TestServiceServer::new(service));
        let mut reporter = None;
        if with_health {
            let (health_reporter, health_service) = tonic_health::server::health_reporter();
            channel = channel.add_service(health_service);
            reporter = Some(health_reporter);
        }
        let replica_reporter = reporter.clone();
        let serving = rt.block_on(move || {
            if let Some(reporter) = &replica_reporter {
                spindle::task::block_on(reporter.set_service_status(SERVICE, ServingStatus::Serving));
            }
            let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
            Server::new(channel).serve_tcp(listener).unwrap()
        });
        let addr = serving.local_addr().unwrap();
        Replica { _serving: serving, counters, reporter, addr }
    }

    fn served(&self) -> u64 {
        self.counters.started.load(SeqCst)
    }

    fn report(&self, rt: &spindle::Runtime, status: ServingStatus) {
        let reporter = self.reporter.clone().expect("a replica with the health service");
        rt.block_on(move || spindle::task::block_on(reporter.set_service_status(SERVICE, status)));
    }
}

fn channel(rt: &spindle::Runtime, replicas: &[&Replica]) -> BalancedChannel {
    let list: Vec<String> = replicas.iter().map(|r| r.addr.to_string()).collect();
    let template = Endpoint::new("http://ignored").unwrap().handle(rt.handle());
    BalancedChannel::builder(&format!("ipv4:{}", list.join(",")))
        .unwrap()
        .endpoint(template)
        .health_check(SERVICE)
        .build()
        .unwrap()
}

/// `n` calls; panics on a failed one.
fn calls(rt: &spindle::Runtime, channel: &BalancedChannel, n: usize) {
    let mut client = TestServiceClient::new(channel.clone());
    run(rt, async move {
        for _ in 0..n {
            client.empty_call(Empty {}).await.expect("a call");
        }
    })
}

/// Calls until `cond` holds (bounded); whether it did.
fn calls_until(rt: &spindle::Runtime, channel: &BalancedChannel, cond: impl Fn() -> bool) -> bool {
    wait_until(BOUND, || {
        calls(rt, channel, 10);
        cond()
    })
}

#[test]
fn a_replica_not_serving_is_left_out_until_it_serves_again() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let (a, b) = (Replica::start(&rt, true), Replica::start(&rt, true));
    let channel = channel(&rt, &[&a, &b]);
    assert!(calls_until(&rt, &channel, || a.served() > 0 && b.served() > 0), "not spread over both");

    a.report(&rt, ServingStatus::NotServing);
    // Once the report has reached the client, `a` gets nothing more.
    let quiet = |before: u64| a.served() == before;
    assert!(
        wait_until(BOUND, || {
            let before = a.served();
            calls(&rt, &channel, 20);
            quiet(before)
        }),
        "a replica reporting NOT_SERVING still got calls"
    );
    let (a_before, b_before) = (a.served(), b.served());
    calls(&rt, &channel, 50);
    assert_eq!(a.served(), a_before, "a replica reporting NOT_SERVING got calls");
    assert_eq!(b.served() - b_before, 50);

    a.report(&rt, ServingStatus::Serving);
    let a_back = a.served();
    assert!(calls_until(&rt, &channel, || a.served() > a_back), "a replica serving again got no call");
}

#[test]
fn a_replica_without_the_health_service_is_served_and_all_not_serving_is_not_a_failure() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let (plain, checked) = (Replica::start(&rt, false), Replica::start(&rt, true));
    let channel = channel(&rt, &[&plain, &checked]);
    // UNIMPLEMENTED from `plain`'s health check: it is served as healthy.
    assert!(calls_until(&rt, &channel, || plain.served() > 0 && checked.served() > 0), "not spread");

    // One replica alone, not serving: the picks ignore health rather than fail every call.
    let only = Replica::start(&rt, true);
    let alone = channel_of(&rt, &only);
    calls(&rt, &alone, 5);
    only.report(&rt, ServingStatus::NotServing);
    let before = only.served();
    calls(&rt, &alone, 20);
    assert_eq!(only.served() - before, 20);
}

fn channel_of(rt: &spindle::Runtime, replica: &Replica) -> BalancedChannel {
    channel(rt, &[replica])
}
