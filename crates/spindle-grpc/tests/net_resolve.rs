//! `BalancedChannel::from_target` / `builder` over a name whose addresses change: real servers
//! on several loopback addresses (127.0.0.1, .2, .3, .4) on one port, behind a name that a
//! test-controlled lookup function (spindle's `Resolver` hook) resolves. Calls spread over
//! every address; records added and removed are followed within the re-resolution interval;
//! a name without an address fails calls with UNAVAILABLE naming the lookup's error, then
//! works once it has one; `pick_first` keeps to the first live address; `ipv4:` lists and
//! `unix:` targets; the resolver's fiber ends with the channel.
//!
//! Every wait is bounded (a condition polled until a deadline; client fibers under a hang
//! guard): a bug fails the test, never hangs it. No assertion is about speed.

mod net;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use net::fleet::{all_ok, empty_calls, runtime, Replica, HANG_GUARD};
use net::wait_until;
use spindle::net::dns::Resolver;
use spindle_grpc::{BalancedChannel, Channel, Endpoint, LoadBalancing, Server};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::*;
use tonic::Code;

const BOUND: Duration = Duration::from_secs(10);
/// The name the test's lookup answers (`.test` is reserved: the system never resolves it).
const NAME: &str = "replicas.test";

/// Servers on 127.0.0.1..=127.0.0.n, all on one port (the first one's, free on the others).
fn replicas(rt: &spindle::Runtime, n: u8) -> (Vec<Replica>, u16) {
    let first = Replica::start(rt, "127.0.0.1:0".parse().unwrap());
    let port = first.serving.as_ref().unwrap().local_addr().unwrap().port();
    let mut all = vec![first];
    for i in 2..=n {
        all.push(Replica::start(rt, SocketAddr::new([127, 0, 0, i].into(), port)));
    }
    (all, port)
}

/// The name's records, as the test sets them, and how many lookups were made.
#[derive(Clone)]
struct Records {
    ips: Arc<Mutex<Result<Vec<IpAddr>, String>>>,
    lookups: Arc<AtomicUsize>,
}

impl Default for Records {
    fn default() -> Records {
        Records { ips: Arc::new(Mutex::new(Ok(Vec::new()))), lookups: Arc::default() }
    }
}

impl Records {
    fn set(&self, ips: &[IpAddr]) {
        *self.ips.lock().unwrap() = Ok(ips.to_vec());
    }

    fn fail(&self, why: &str) {
        *self.ips.lock().unwrap() = Err(why.to_string());
    }

    /// A resolver answering from the records, caching nothing.
    fn resolver(&self) -> Resolver {
        let records = self.clone();
        Resolver::with_lookup(move |host| {
            records.lookups.fetch_add(1, SeqCst);
            assert_eq!(host, NAME);
            records
                .ips
                .lock()
                .unwrap()
                .clone()
                .map_err(|why| std::io::Error::new(std::io::ErrorKind::NotFound, why))
        })
        .ttl(Duration::ZERO)
    }
}

/// A channel over `NAME`, re-resolved every 50 ms (on demand every 10 ms at most).
fn channel(rt: &spindle::Runtime, port: u16, records: &Records, policy: LoadBalancing) -> BalancedChannel {
    let template = Endpoint::new("http://ignored")
        .unwrap()
        .handle(rt.handle())
        .backoff(Duration::from_millis(10), Duration::from_millis(50));
    BalancedChannel::builder(&format!("dns:///{NAME}:{port}"))
        .unwrap()
        .endpoint(template)
        .policy(policy)
        .resolver(records.resolver())
        .re_resolution(Duration::from_millis(10), Duration::from_millis(50))
        .build()
        .unwrap()
}

/// Calls each replica served since `before`.
fn served_since(replicas: &[Replica], before: &HashMap<IpAddr, u64>) -> HashMap<IpAddr, u64> {
    replicas
        .iter()
        .map(|r| (r.addr.ip(), r.served() - before.get(&r.addr.ip()).copied().unwrap_or(0)))
        .collect()
}

fn snapshot(replicas: &[Replica]) -> HashMap<IpAddr, u64> {
    replicas.iter().map(|r| (r.addr.ip(), r.served())).collect()
}

fn ip(last: u8) -> IpAddr {
    [127, 0, 0, last].into()
}

#[test]
fn calls_spread_over_every_address_and_follow_the_records() {
    let rt = runtime();
    let (replicas, port) = replicas(&rt, 4);
    let records = Records::default();
    records.set(&[ip(1), ip(2), ip(3)]);
    let channel = channel(&rt, port, &records, LoadBalancing::RoundRobin);

    // The first calls wait for the first answer, then go round robin over the three.
    all_ok(empty_calls(&rt, &channel, 300));
    let addrs: Vec<IpAddr> = channel.addresses().iter().map(SocketAddr::ip).collect();
    assert_eq!(addrs, [ip(1), ip(2), ip(3)]);
    let served = served_since(&replicas, &HashMap::new());
    assert_eq!(served.values().sum::<u64>(), 300, "{served:?}");
    for i in 1..=3 {
        assert!(served[&ip(i)] >= 50, "127.0.0.{i} had too few calls: {served:?}");
    }
    assert_eq!(served[&ip(4)], 0);

    // 127.0.0.3 leaves the name and 127.0.0.4 joins: within the re-resolution interval the
    // channel has the new list, and calls go to .1, .2 and .4 only.
    records.set(&[ip(1), ip(2), ip(4)]);
    assert!(
        wait_until(BOUND, || channel.addresses().iter().map(SocketAddr::ip).eq([ip(1), ip(2), ip(4)])),
        "the channel did not follow the records: {:?}",
        channel.addresses()
    );
    let before = snapshot(&replicas);
    all_ok(empty_calls(&rt, &channel, 300));
    let served = served_since(&replicas, &before);
    assert_eq!(served[&ip(3)], 0, "a removed address still had calls: {served:?}");
    for i in [1, 2, 4] {
        assert!(served[&ip(i)] >= 50, "127.0.0.{i} had too few calls: {served:?}");
    }
    assert!(wait_until(BOUND, || channel.in_flight() == 0), "permits left: {channel:?}");
}

#[test]
fn a_failed_lookup_keeps_the_servers_and_a_name_without_address_fails_fast() {
    let rt = runtime();
    let (replicas, port) = replicas(&rt, 2);
    let records = Records::default();
    records.fail("no such name (the test's records)");
    let channel = channel(&rt, port, &records, LoadBalancing::RoundRobin);

    // No address: calls fail at once with UNAVAILABLE naming the lookup's error.
    let outcomes = empty_calls(&rt, &channel, 3);
    for outcome in outcomes {
        let status = outcome.expect_err("a call to a name without address");
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert!(status.message().contains("no such name (the test's records)"), "{status:?}");
        assert!(status.message().contains(NAME), "{status:?}");
    }
    assert!(channel.is_empty());

    // The records appear: the failing calls asked for new lookups, and the channel comes up.
    records.set(&[ip(1), ip(2)]);
    assert!(wait_until(BOUND, || channel.len() == 2), "the channel did not pick up the records: {channel:?}");
    all_ok(empty_calls(&rt, &channel, 20));

    // A later lookup that fails keeps the servers the channel has.
    records.fail("the DNS server is down");
    let lookups = records.lookups.load(SeqCst);
    assert!(wait_until(BOUND, || records.lookups.load(SeqCst) >= lookups + 2), "no new lookup");
    assert_eq!(channel.len(), 2);
    all_ok(empty_calls(&rt, &channel, 20));
    assert_eq!(replicas.iter().map(Replica::served).sum::<u64>(), 40);
}

#[test]
fn the_first_calls_wait_for_the_first_answer() {
    let rt = runtime();
    let (replicas, port) = replicas(&rt, 1);
    // A lookup that answers only once the test lets it.
    let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let open = gate.clone();
    let resolver = Resolver::with_lookup(move |_| {
        let (lock, cond) = &*open;
        let mut ready = lock.lock().unwrap();
        while !*ready {
            ready = cond.wait(ready).unwrap();
        }
        Ok(vec![ip(1)])
    })
    .ttl(Duration::ZERO);
    let channel = BalancedChannel::builder(&format!("dns:///{NAME}:{port}"))
        .unwrap()
        .endpoint(Endpoint::new("http://ignored").unwrap().handle(rt.handle()))
        .resolver(resolver)
        .build()
        .unwrap();
    assert!(channel.is_empty());
    let mut client = TestServiceClient::new(channel.clone());
    let call = rt.spawn(move || spindle::task::block_on(client.empty_call(Empty {})).map(drop));
    // The call waits (not failing) while the lookup has not answered.
    std::thread::sleep(Duration::from_millis(50));
    assert!(!call.is_finished(), "the call ended before the name resolved");
    let (lock, cond) = &*gate;
    *lock.lock().unwrap() = true;
    cond.notify_all();
    call.join_timeout(HANG_GUARD).expect("hung").unwrap().unwrap();
    assert_eq!(replicas[0].served(), 1);
}

#[test]
fn pick_first_keeps_to_the_first_live_address() {
    let rt = runtime();
    let (mut replicas, port) = replicas(&rt, 3);
    let records = Records::default();
    records.set(&[ip(2), ip(1), ip(3)]);
    let channel = channel(&rt, port, &records, LoadBalancing::PickFirst);
    all_ok(empty_calls(&rt, &channel, 50));
    let served = served_since(&replicas, &HashMap::new());
    assert_eq!((served[&ip(2)], served[&ip(1)], served[&ip(3)]), (50, 0, 0), "{served:?}");

    // The first one stops: calls go to the next in the resolver's order, once the channel
    // has seen it down (a call caught by the stop may fail: no retries here).
    replicas[1].stop();
    assert!(
        wait_until(BOUND, || empty_calls(&rt, &channel, 1)[0].is_ok()),
        "no call got through: {channel:?}"
    );
    let before = snapshot(&replicas);
    all_ok(empty_calls(&rt, &channel, 20));
    let served = served_since(&replicas, &before);
    assert_eq!(served[&ip(3)], 0, "pick_first spread its calls: {served:?}");
    assert!(served[&ip(1)] >= 20, "{served:?}");
}

#[test]
fn ipv4_lists_and_unix_targets() {
    let rt = runtime();
    let (replicas, port) = replicas(&rt, 2);
    let template = Endpoint::new("http://ignored").unwrap().handle(rt.handle());
    let channel = BalancedChannel::builder(&format!("ipv4:127.0.0.1:{port},127.0.0.2:{port}"))
        .unwrap()
        .endpoint(template.clone())
        .build()
        .unwrap();
    assert_eq!(channel.len(), 2);
    all_ok(empty_calls(&rt, &channel, 40));
    assert!(
        replicas.iter().all(|r| r.served() >= 10),
        "{:?}",
        replicas.iter().map(Replica::served).collect::<Vec<_>>()
    );

    // One server on a Unix socket.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grpc.sock");
    let service = spindle_grpc_interop::Server::new(net::spindle_sleep);
    let counters = service.counters.clone();
    let served_channel = Channel::new().with_handle(rt.handle()).add_service(TestServiceServer::new(service));
    let listen = path.clone();
    let _serving = rt.block_on(move || {
        let listener = spindle::net::UnixListener::bind(&listen).unwrap();
        Server::new(served_channel).serve_unix(listener).unwrap()
    });
    let channel = BalancedChannel::builder(&format!("unix://{}", path.display()))
        .unwrap()
        .endpoint(template)
        .build()
        .unwrap();
    all_ok(empty_calls(&rt, &channel, 5));
    assert_eq!(counters.started.load(SeqCst), 5);
}

#[test]
fn the_resolver_fiber_ends_with_the_channel() {
    let rt = runtime();
    let (_replicas, port) = replicas(&rt, 1);
    let records = Records::default();
    records.set(&[ip(1)]);
    let baseline = rt.dump_fibers().len();
    let channel = channel(&rt, port, &records, LoadBalancing::RoundRobin);
    all_ok(empty_calls(&rt, &channel, 1));
    assert!(rt.dump_fibers().len() > baseline, "no resolver fiber");
    drop(channel);
    assert!(
        wait_until(BOUND, || rt.dump_fibers().len() == baseline),
        "fibers left after the channel was dropped: {:#?}",
        rt.dump_fibers()
    );
    // And no lookup after that.
    let lookups = records.lookups.load(SeqCst);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(records.lookups.load(SeqCst), lookups);
}

#[test]
fn bad_targets_are_refused_with_the_reason() {
    for (target, why) in
        [("dns://1.1.1.1/x:1", "authority"), ("http://x:1", "not a gRPC target"), ("unix:rel", "absolute")]
    {
        let err = BalancedChannel::from_target(target).expect_err(target);
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains(why), "{target}: {err}");
    }
}
