//! The network client resolves names with spindle's resolver, off the workers: a name only
//! the process's default resolver knows reaches the server, and the lookup runs on the
//! blocking pool, never on the manager fiber's worker thread.
//!
//! Its own test binary: the default resolver is process-wide and set once.

mod net;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle::net::dns::Resolver;
use spindle_grpc::Endpoint;
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::*;

/// The name the test's resolver knows (`.test` is reserved: the system never resolves it).
const NAME: &str = "grpc-backend.test";

#[test]
fn names_resolve_through_spindles_resolver_off_the_workers() {
    // The threads the lookups ran on.
    let threads = Arc::new(Mutex::new(Vec::new()));
    let seen = threads.clone();
    let resolver = Resolver::with_lookup(move |host| {
        seen.lock().unwrap().push(std::thread::current().name().unwrap_or("").to_owned());
        if host == NAME {
            Ok(vec![std::net::Ipv4Addr::LOCALHOST.into()])
        } else {
            Err(std::io::Error::new(std::io::ErrorKind::NotFound, format!("{host}: unknown to the test")))
        }
    });
    assert!(spindle::net::dns::set_default(resolver).is_ok(), "the default resolver was already set");

    let net = net::start(|s| s);
    let port = net.addr.port();
    let endpoint = Endpoint::new(format!("http://{NAME}:{port}")).unwrap().handle(net.rt.handle());
    let reply = net.rt.block_on(move || {
        spindle::task::block_on(async move {
            let channel = endpoint.connect().await?;
            let reply = TestServiceClient::new(channel)
                .unary_call(SimpleRequest { response_size: 3, ..Default::default() })
                .await
                .map_err(std::io::Error::other)?;
            Ok::<_, std::io::Error>(reply.into_inner())
        })
    });
    let reply = reply.unwrap_or_else(|e| panic!("a call to {NAME} failed: {e}"));
    assert_eq!(reply.payload.map(|p| p.body.len()), Some(3));

    let threads = threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 1, "one lookup of {NAME}: {threads:?}");
    // Workers are `spindle-worker-<n>`; the blocking pool's threads `spindle-worker-blocking`.
    let on_worker = threads[0].strip_prefix("spindle-worker-").is_some_and(|n| n.parse::<usize>().is_ok());
    assert!(!on_worker, "the lookup ran on a worker thread ({:?}), stalling its fibers", threads[0]);
    assert_eq!(threads[0], "spindle-worker-blocking");

    // A name the resolver does not know is a failed connect naming it, not a hang.
    let endpoint = Endpoint::new(format!("http://unknown.test:{port}"))
        .unwrap()
        .handle(net.rt.handle())
        .connect_timeout(Duration::from_secs(5));
    let err = net.rt.block_on(move || spindle::task::block_on(endpoint.connect())).unwrap_err();
    assert!(err.to_string().contains("unknown to the test"), "{err}");
}
