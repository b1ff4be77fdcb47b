//! Shared by the fleet tests (balancing, resolution, retries, health checks): replicas of the
//! conformance service on loopback addresses, client code run in a fiber under a hang guard,
//! and calls through a balanced channel.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

use spindle_grpc::{BalancedChannel, Channel, Serving};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::Empty;
use spindle_grpc_interop::Counters;

/// How long client code may run before the test calls it hung.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// One replica: a spindle-grpc server with the conformance service, counting the calls it
/// served.
pub struct Replica {
    pub serving: Option<Serving>,
    pub counters: Arc<Counters>,
    pub addr: SocketAddr,
}

impl Replica {
    /// Serves on `addr` (port 0: any free port) on `rt`.
    pub fn start(rt: &spindle::Runtime, addr: SocketAddr) -> Replica {
        Replica::start_with(rt, addr, |channel| channel)
    }

    /// [`Replica::start`] with more services added to its channel by `add`.
    pub fn start_with(
        rt: &spindle::Runtime,
        addr: SocketAddr,
        add: impl FnOnce(Channel) -> Channel + Send + 'static,
    ) -> Replica {
        let service = spindle_grpc_interop::Server::new(super::spindle_sleep);
        let counters = service.counters.clone();
        let channel =
            add(Channel::new().with_handle(rt.handle()).add_service(TestServiceServer::new(service)));
        let serving = rt.block_on(move || {
            let listener =
                spindle::net::TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
            spindle_grpc::Server::new(channel).serve_tcp(listener).unwrap()
        });
        let addr = serving.local_addr().unwrap();
        Replica { serving: Some(serving), counters, addr }
    }

    /// Calls this server has served (handlers started).
    pub fn served(&self) -> u64 {
        self.counters.started.load(SeqCst)
    }

    /// Stops the server (graceful, waiting until its connections have ended).
    pub fn stop(&mut self) {
        self.serving.take().expect("a running replica").shutdown(Duration::from_secs(1));
    }
}

/// The runtime the fleet tests run on: two workers.
pub fn runtime() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(2).build().unwrap()
}

/// Runs `f` in a fiber on `rt`, failing the test if it has not returned within the hang guard.
pub fn run<T: Send + 'static>(rt: &spindle::Runtime, f: impl Future<Output = T> + Send + 'static) -> T {
    rt.spawn(move || spindle::task::block_on(f))
        .join_timeout(HANG_GUARD)
        .unwrap_or_else(|_| panic!("hung: the client fiber did not return within {HANG_GUARD:?}"))
        .unwrap()
}

/// `n` empty calls one after another through `channel`; their outcomes.
pub fn empty_calls(
    rt: &spindle::Runtime,
    channel: &BalancedChannel,
    n: usize,
) -> Vec<Result<(), tonic::Status>> {
    let mut client = TestServiceClient::new(channel.clone());
    run(rt, async move {
        let mut outcomes = Vec::with_capacity(n);
        for _ in 0..n {
            outcomes.push(client.empty_call(Empty {}).await.map(drop));
        }
        outcomes
    })
}

/// Panics on the first failed outcome.
pub fn all_ok(outcomes: Vec<Result<(), tonic::Status>>) {
    for outcome in outcomes {
        outcome.unwrap();
    }
}
