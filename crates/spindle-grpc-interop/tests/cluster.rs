//! A cluster of real server processes (`interop_server`) on 127.0.0.1 to 127.0.0.4, one port,
//! behind a name that a test-controlled lookup (spindle's `Resolver` hook) resolves, and one
//! client process (this test) making a steady stream of unary calls through
//! `BalancedChannel::builder("dns:///cluster.test:PORT")` with a retry policy for
//! UNAVAILABLE and outlier ejection. While the calls go on, one server is killed (SIGKILL, its
//! calls in flight cut), a fourth server is started and the name's records changed to it, and
//! one server starts answering every call with UNAVAILABLE. The client sees no failed call;
//! the calls spread over the live servers (each response names its server), reach the new one
//! once the records change, and leave the failing one.
//!
//! Every wait is bounded (a condition polled until a deadline, the caller under a hang
//! guard); nothing asserts a speed.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spindle::net::dns::Resolver;
use spindle_grpc::{BalancedChannel, Endpoint, OutlierEjection, RetryPolicy, ServiceConfig};
use spindle_grpc_interop::grpc_testing::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::grpc_testing::pb::SimpleRequest;
use tonic::Code;

const NAME: &str = "cluster.test";
const BOUND: Duration = Duration::from_secs(20);
/// Each call's deadline.
const DEADLINE: Duration = Duration::from_secs(2);

fn ip(last: u8) -> IpAddr {
    [127, 0, 0, last].into()
}

/// One `interop_server` process.
struct Server {
    child: Child,
}

impl Server {
    fn start(last: u8, port: u16, unavailable: &std::path::Path) -> Server {
        let child = Command::new(env!("CARGO_BIN_EXE_interop_server"))
            .args(["--host", &ip(last).to_string(), "--port", &port.to_string()])
            .args(["--server_id", &format!("s{last}"), "--unavailable_file"])
            .arg(unavailable)
            .stderr(Stdio::null())
            .spawn()
            .expect("interop_server starts");
        let addr = SocketAddr::new(ip(last), port);
        assert!(
            wait_until(BOUND, || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()),
            "interop_server on {addr} did not listen"
        );
        Server { child }
    }

    fn kill(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// A port free on 127.0.0.1 to 127.0.0.4.
fn free_port() -> u16 {
    for _ in 0..50 {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if (1..=4).all(|last| TcpListener::bind(SocketAddr::new(ip(last), port)).is_ok()) {
            return port;
        }
    }
    panic!("no port free on the four loopback addresses");
}

/// What each call ended with: the server that answered, or the error's code.
type Outcomes = Arc<Mutex<Vec<Result<String, Code>>>>;

fn servers_in(outcomes: &[Result<String, Code>]) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for id in outcomes.iter().flatten() {
        *seen.entry(id.clone()).or_insert(0) += 1;
    }
    seen
}

#[test]
fn a_client_rides_through_a_killed_server_changed_records_and_an_unavailable_one() {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("spindle-cluster-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let flag = |last: u8| -> PathBuf { dir.join(format!("unavailable-s{last}")) };
    let mut servers: BTreeMap<u8, Server> =
        (1..=3).map(|last| (last, Server::start(last, port, &flag(last)))).collect();

    // The name's records, as the test sets them.
    let records = Arc::new(Mutex::new(vec![ip(1), ip(2), ip(3)]));
    let lookup = records.clone();
    let resolver = Resolver::with_lookup(move |host| {
        assert_eq!(host, NAME);
        Ok(lookup.lock().unwrap().clone())
    })
    .ttl(Duration::ZERO);

    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let policy =
        RetryPolicy::new(5, Duration::from_millis(10), Duration::from_millis(100), 2.0, [Code::Unavailable])
            .unwrap();
    let template = Endpoint::new(format!("http://{NAME}"))
        .unwrap()
        .handle(rt.handle())
        .connect_timeout(Duration::from_secs(1))
        .backoff(Duration::from_millis(10), Duration::from_millis(100));
    let channel = BalancedChannel::builder(&format!("dns:///{NAME}:{port}"))
        .unwrap()
        .endpoint(template)
        .resolver(resolver)
        .re_resolution(Duration::from_millis(10), Duration::from_millis(100))
        .service_config(ServiceConfig::retry_all(policy))
        .outlier_ejection(
            OutlierEjection::default()
                .consecutive_failures(3)
                .ejection_time(Duration::from_secs(60), Duration::from_secs(60))
                .max_ejection_percent(50),
        )
        .build()
        .unwrap();

    // The steady stream of calls.
    let outcomes: Outcomes = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let caller = {
        let (outcomes, stop) = (outcomes.clone(), stop.clone());
        let mut client = TestServiceClient::new(channel.clone());
        rt.spawn(move || {
            spindle::task::block_on(async move {
                while !stop.load(SeqCst) {
                    let mut request =
                        tonic::Request::new(SimpleRequest { response_size: 1, ..Default::default() });
                    request.set_timeout(DEADLINE);
                    let outcome = match client.unary_call(request).await {
                        Ok(response) => Ok(response
                            .metadata()
                            .get("x-server-id")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("?")
                            .to_string()),
                        Err(status) => Err(status.code()),
                    };
                    outcomes.lock().unwrap().push(outcome);
                }
            })
        })
    };
    let calls = || outcomes.lock().unwrap().len();
    let since = |mark: usize| outcomes.lock().unwrap()[mark..].to_vec();
    let wait_calls = |n: usize| {
        let target = calls() + n;
        assert!(wait_until(BOUND, || calls() >= target), "the calls stalled at {}", calls());
    };

    // All three serve.
    let spread = |mark: usize| servers_in(&since(mark)).keys().cloned().collect::<BTreeSet<_>>();
    assert!(wait_until(BOUND, || spread(0).len() == 3), "not spread over three: {:?}", servers_in(&since(0)));

    // s2 dies with calls in flight; its address stays in the records.
    servers.get_mut(&2).unwrap().kill();
    let killed = calls();
    wait_calls(300);
    let after_kill = since(killed + 50);
    assert!(
        !servers_in(&after_kill).contains_key("s2"),
        "a dead server answered: {:?}",
        servers_in(&after_kill)
    );

    // s4 starts and the records change to s1, s3, s4.
    servers.insert(4, Server::start(4, port, &flag(4)));
    *records.lock().unwrap() = vec![ip(1), ip(3), ip(4)];
    let changed = calls();
    assert!(
        wait_until(BOUND, || spread(changed).contains("s4")),
        "the new server got no call: {:?}",
        servers_in(&since(changed))
    );

    // s1 answers UNAVAILABLE from now on: its calls are retried elsewhere, and it is ejected.
    std::fs::write(flag(1), b"").unwrap();
    let failing = calls();
    wait_calls(300);
    let tail = since(failing + 50);
    let tail_servers = servers_in(&tail);
    assert!(!tail_servers.contains_key("s1"), "an UNAVAILABLE server answered: {tail_servers:?}");
    assert!(tail_servers.contains_key("s3") && tail_servers.contains_key("s4"), "{tail_servers:?}");

    stop.store(true, SeqCst);
    caller.join_timeout(Duration::from_secs(60)).expect("the caller hung").unwrap();
    let all = outcomes.lock().unwrap().clone();
    // The summary perf/grpc-cluster-go prints for grpc-go, for comparison (--nocapture).
    eprintln!(
        "calls {}, after s2 killed {:?}, after the records changed {:?}, while s1 answers UNAVAILABLE {:?}",
        all.len(),
        servers_in(&all[killed + 50..changed]),
        servers_in(&all[changed..failing]),
        servers_in(&all[failing + 50..])
    );
    let failed: Vec<&Code> = all.iter().filter_map(|o| o.as_ref().err()).collect();
    assert!(failed.is_empty(), "{} of {} calls failed: {failed:?}", failed.len(), all.len());
    drop(channel);
    drop(servers);
    let _ = std::fs::remove_dir_all(&dir);
}
