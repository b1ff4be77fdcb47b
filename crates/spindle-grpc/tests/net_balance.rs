//! spindle-grpc's load-balanced client, `BalancedChannel`, over three real servers on loopback
//! TCP: calls spread round robin, a stopped server skipped and taken back once it is restarted,
//! every server down failing at once with UNAVAILABLE, permits waited for across servers, and
//! the tower contract (a reservation is the call's, or released when its holder is dropped).
//!
//! Every wait is bounded: a condition is polled until a deadline, a client runs in a fiber
//! whose join is a hang guard (not a speed claim), so that a bug fails the test, never hangs it.

mod net;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use net::fleet::{all_ok, empty_calls, run, runtime, Replica, HANG_GUARD};
use net::wait_until;
use spindle_grpc::{BalancedChannel, Endpoint};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::*;
use spindle_grpc_interop::Counters;
use tonic::Code;

/// The bound of every wait for a condition.
const BOUND: Duration = Duration::from_secs(10);

fn replicas(rt: &spindle::Runtime, n: usize) -> Vec<Replica> {
    (0..n).map(|_| Replica::start(rt, "127.0.0.1:0".parse().unwrap())).collect()
}

/// A channel over `replicas`, each endpoint set up by `configure`, with a short reconnection
/// backoff.
fn balanced(
    rt: &spindle::Runtime,
    replicas: &[Replica],
    configure: impl Fn(Endpoint) -> Endpoint,
) -> BalancedChannel {
    let endpoints = replicas.iter().map(|r| {
        let endpoint = Endpoint::new(format!("http://{}", r.addr)).unwrap().handle(rt.handle());
        configure(endpoint.backoff(Duration::from_millis(10), Duration::from_millis(50)))
    });
    BalancedChannel::new(endpoints).unwrap()
}

fn served(replicas: &[Replica]) -> Vec<u64> {
    replicas.iter().map(Replica::served).collect()
}

/// The channel connects to every server before any call (the children start at once), then
/// 300 sequential calls go round robin: each server serves about a third.
#[test]
fn calls_are_spread_round_robin() {
    let rt = runtime();
    let replicas = replicas(&rt, 3);
    let channel = balanced(&rt, &replicas, |e| e);
    assert_eq!(channel.len(), 3);
    assert!(wait_until(BOUND, || channel.connected() == 3), "not connected to all three: {channel:?}");
    all_ok(empty_calls(&rt, &channel, 300));
    let served = served(&replicas);
    assert_eq!(served.iter().sum::<u64>(), 300, "{served:?}");
    assert!(served.iter().all(|&n| n >= 80), "not round robin: {served:?}");
    assert!(wait_until(BOUND, || channel.in_flight() == 0), "permits left: {channel:?}");
}

/// Calls go on from a fiber while `replicas[1]` stops, until the channel counts it lost. A call
/// caught by the shutdown may fail (no transparent retries), with UNAVAILABLE only.
fn stop_one_while_calling(rt: &spindle::Runtime, replicas: &mut [Replica], channel: &BalancedChannel) {
    let stop = Arc::new(AtomicBool::new(false));
    let background = {
        let (stop, mut client) = (stop.clone(), TestServiceClient::new(channel.clone()));
        rt.spawn(move || {
            let mut failures = Vec::new();
            while !stop.load(SeqCst) {
                if let Err(status) = spindle::task::block_on(client.empty_call(Empty {})) {
                    failures.push(status);
                }
            }
            failures
        })
    };
    // Some calls have gone to the one about to stop.
    assert!(wait_until(BOUND, || replicas[1].served() > 0), "{:?}", served(replicas));
    replicas[1].stop();
    assert!(wait_until(BOUND, || channel.connected() == 2), "the lost server is still counted: {channel:?}");
    stop.store(true, SeqCst);
    let failures = background
        .join_timeout(HANG_GUARD)
        .unwrap_or_else(|_| panic!("hung: background calls did not stop within {HANG_GUARD:?}"))
        .unwrap();
    // Calls caught by the shutdown (if any) fail as on a single channel: UNAVAILABLE.
    for status in failures {
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    }
}

/// A server stops while calls go on: once the channel has noticed, every call succeeds, on
/// the two live servers only, alternating between them.
#[test]
fn a_stopped_server_is_skipped() {
    let rt = runtime();
    let mut replicas = replicas(&rt, 3);
    let channel = balanced(&rt, &replicas, |e| e);
    assert!(wait_until(BOUND, || channel.connected() == 3), "{channel:?}");
    stop_one_while_calling(&rt, &mut replicas, &channel);
    let before = served(&replicas);
    all_ok(empty_calls(&rt, &channel, 100));
    let after = served(&replicas);
    assert_eq!(after[1], before[1], "a call went to the stopped server");
    let gained = [after[0] - before[0], after[2] - before[2]];
    assert_eq!(gained[0] + gained[1], 100, "{gained:?}");
    assert!(gained.iter().all(|&n| n >= 40), "not round robin over the live two: {gained:?}");
    assert!(wait_until(BOUND, || channel.in_flight() == 0), "permits left: {channel:?}");
}

/// A server that stops and whose port then answers TCP but never HTTP/2 (a silent listener):
/// its child stays connecting (up to its connect timeout), and calls do not wait for it while
/// the other two are connected: all succeed at once, on those two.
#[test]
fn a_connecting_server_is_not_waited_for() {
    let rt = runtime();
    let mut replicas = replicas(&rt, 3);
    let channel = balanced(&rt, &replicas, |e| e.connect_timeout(Duration::from_secs(30)));
    assert!(wait_until(BOUND, || channel.connected() == 3), "{channel:?}");
    replicas[1].stop();
    let silent = std::net::TcpListener::bind(replicas[1].addr).unwrap();
    assert!(wait_until(BOUND, || channel.connected() == 2), "{channel:?}");
    let before = served(&replicas);
    // Within the hang guard (60 s): a call that waited for the silent server would fail after
    // the connect timeout (30 s) instead.
    all_ok(empty_calls(&rt, &channel, 100));
    let after = served(&replicas);
    let gained = [after[0] - before[0], after[2] - before[2]];
    assert_eq!(after[1], before[1]);
    assert!(gained[0] + gained[1] == 100 && gained.iter().all(|&n| n >= 40), "{before:?} -> {after:?}");
    drop(silent);
}

/// The stopped server is started again on the same port: the channel connects to it again
/// (its pick asked the idle child to reconnect, and the child retries on its backoff) and
/// sends it its share of the calls.
#[test]
fn a_restarted_server_rejoins() {
    let rt = runtime();
    let mut replicas = replicas(&rt, 3);
    let channel = balanced(&rt, &replicas, |e| e);
    assert!(wait_until(BOUND, || channel.connected() == 3), "{channel:?}");
    stop_one_while_calling(&rt, &mut replicas, &channel);
    all_ok(empty_calls(&rt, &channel, 10));
    replicas[1] = Replica::start(&rt, replicas[1].addr);
    // Calls go on meanwhile (they succeed, on the other two).
    let back = wait_until(BOUND, || {
        all_ok(empty_calls(&rt, &channel, 1));
        channel.connected() == 3
    });
    assert!(back, "the restarted server was not connected again: {channel:?}");
    let before = served(&replicas);
    all_ok(empty_calls(&rt, &channel, 90));
    let after = served(&replicas);
    let gained: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert!(gained.iter().all(|&n| n >= 20), "the restarted server gets no share: {gained:?}");
}

/// Every server down: calls fail at once with UNAVAILABLE, and once every child's last
/// attempt has failed (a long backoff keeps them down), the status names each server's error.
#[test]
fn all_servers_down_fail_promptly_with_unavailable() {
    let rt = runtime();
    let mut replicas = replicas(&rt, 3);
    let channel = balanced(&rt, &replicas, |e| e.backoff(Duration::from_secs(10), Duration::from_secs(10)));
    assert!(wait_until(BOUND, || channel.connected() == 3), "{channel:?}");
    for replica in &mut replicas {
        replica.stop();
    }
    assert!(wait_until(BOUND, || channel.connected() == 0), "{channel:?}");
    let addrs: Vec<String> = replicas.iter().map(|r| r.addr.to_string()).collect();
    let mut client = TestServiceClient::new(channel.clone());
    // A hang guard of 10 s for all of them: they fail at once.
    let statuses = rt
        .spawn(move || {
            let mut statuses = Vec::new();
            loop {
                let status = spindle::task::block_on(client.empty_call(Empty {})).unwrap_err();
                let every = addrs.iter().all(|a| status.message().contains(a.as_str()));
                statuses.push(status);
                if every {
                    return statuses;
                }
            }
        })
        .join_timeout(BOUND)
        .unwrap_or_else(|_| panic!("hung: calls with every server down did not all fail within {BOUND:?}"))
        .unwrap();
    for status in &statuses {
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    }
    let last = statuses.last().unwrap();
    assert!(last.message().contains("refused"), "{last:?}");
    assert_eq!(channel.in_flight(), 0);
}

#[test]
fn an_empty_list_is_an_error() {
    let err = BalancedChannel::new(Vec::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    // An endpoint the channel cannot use is the error it is for a RemoteChannel: here, no
    // runtime to connect on.
    let err = BalancedChannel::new([Endpoint::new("http://127.0.0.1:1").unwrap()]).unwrap_err();
    assert!(err.to_string().contains("Endpoint::handle"), "{err}");
}

/// 200 calls at once, 100 from tasks and 100 from fibers, with at most 2 in flight per server:
/// every call completes (each waited for a permit on whichever server released one first), the
/// limits hold throughout, and every server serves some.
#[test]
fn concurrent_calls_wait_for_permits_across_servers() {
    let rt = runtime();
    let replicas = replicas(&rt, 3);
    let channel = balanced(&rt, &replicas, |e| e.concurrency_limit(2));
    assert!(wait_until(BOUND, || channel.connected() == 3), "{channel:?}");
    // Watches the limits while the calls run: never more than 2 per server, 6 in all.
    let (done, most) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let watcher = {
        let (channel, done, most) = (channel.clone(), done.clone(), most.clone());
        let live: Vec<Arc<Counters>> = replicas.iter().map(|r| r.counters.clone()).collect();
        std::thread::spawn(move || {
            while !done.load(SeqCst) {
                most.fetch_max(channel.in_flight(), SeqCst);
                for counters in &live {
                    let handlers = counters.live_handlers.load(SeqCst);
                    assert!(handlers <= 2, "a server runs {handlers} calls at once");
                }
                std::thread::yield_now();
            }
        })
    };
    let call = |channel: BalancedChannel, i: u64| async move {
        let request = SimpleRequest { response_size: 1, sleep_ms: (i % 3) as i64, ..Default::default() };
        TestServiceClient::new(channel).unary_call(request).await.map(drop)
    };
    let tasks: Vec<_> = (0..100).map(|i| rt.spawn_async(call(channel.clone(), i))).collect();
    let fibers: Vec<_> = (100..200)
        .map(|i| {
            let call = call(channel.clone(), i);
            rt.spawn(move || spindle::task::block_on(call))
        })
        .collect();
    for task in tasks {
        task.join_timeout(HANG_GUARD).unwrap_or_else(|_| panic!("hung: a task's call")).unwrap().unwrap();
    }
    for fiber in fibers {
        fiber.join_timeout(HANG_GUARD).unwrap_or_else(|_| panic!("hung: a fiber's call")).unwrap().unwrap();
    }
    done.store(true, SeqCst);
    watcher.join().unwrap();
    assert!(most.load(SeqCst) <= 6, "{} permits held at once, past 3 × 2", most.load(SeqCst));
    let served = served(&replicas);
    assert_eq!(served.iter().sum::<u64>(), 200, "{served:?}");
    assert!(served.iter().all(|&n| n > 0), "{served:?}");
    assert!(wait_until(BOUND, || channel.in_flight() == 0), "permits left: {channel:?}");
}

/// Counts its wake-ups.
#[derive(Default)]
struct Flag(AtomicUsize);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn poll_ready(channel: &mut BalancedChannel, waker: &Waker) -> Poll<()> {
    tower_service::Service::poll_ready(channel, &mut Context::from_waker(waker)).map(|r| r.unwrap())
}

/// The tower contract: `poll_ready` reserves a permit on one server, the next call uses that
/// very reservation, and dropping a channel that holds one releases it (waking a clone that
/// waits).
#[test]
fn a_reservation_is_the_calls_or_released_on_drop() {
    let rt = runtime();
    let replicas = replicas(&rt, 2);
    let channel = balanced(&rt, &replicas, |e| e.concurrency_limit(1));
    assert!(wait_until(BOUND, || channel.connected() == 2), "{channel:?}");
    let noop = Waker::noop();
    let (mut a, mut b, mut c) = (channel.clone(), channel.clone(), channel.clone());
    assert!(poll_ready(&mut a, noop).is_ready());
    assert!(poll_ready(&mut b, noop).is_ready());
    assert_eq!(channel.in_flight(), 2);
    // Both servers full: c waits, and the release of a's permit wakes it.
    let flag = Arc::new(Flag::default());
    let waker = Waker::from(flag.clone());
    assert!(poll_ready(&mut c, &waker).is_pending());
    drop(a);
    assert!(flag.0.load(SeqCst) > 0, "dropping a reservation did not wake the waiting clone");
    assert_eq!(channel.in_flight(), 1);
    assert!(poll_ready(&mut c, &waker).is_ready());
    assert_eq!(channel.in_flight(), 2);
    // Each call goes to the server its clone reserved (its Debug names it), on that permit.
    let mut holders = Vec::new();
    for holder in [b, c] {
        let debug = format!("{holder:?}");
        let reserved = debug.split("reserved").nth(1).unwrap();
        let target = replicas.iter().position(|r| reserved.contains(&r.addr.to_string()));
        let target = target.unwrap_or_else(|| panic!("no reserved server in {debug}"));
        let before = served(&replicas);
        let mut client = TestServiceClient::new(holder);
        // The client (and the channel in it) comes back, to be kept.
        holders.push(run(&rt, async move {
            client.empty_call(Empty {}).await.unwrap();
            client
        }));
        let after = served(&replicas);
        assert_eq!(after[target], before[target] + 1, "{debug}: {before:?} -> {after:?}");
    }
    // The reservations were spent by the calls, not kept beside them (their holders live on).
    assert!(wait_until(BOUND, || channel.in_flight() == 0), "permits left: {channel:?}");
    drop(holders);
}
