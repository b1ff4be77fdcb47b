//! The blocking suite's spindle competitor: the sync crates' clients of the thread mode
//! (`blocking/src/sync_clients.rs`), each in a spindle fiber of a two-worker runtime, built
//! with spindle's `hook` feature and nothing else: plain `postgres::Client`,
//! `redis::Connection` and `ureq::Agent`, whose blocking libc calls park the fiber.
//!
//! `blocking-spindle [--quick] [--case NAME]` (the contract: `blocking/src/harness.rs`).

#[path = "../../blocking/src/harness.rs"]
mod harness;
#[path = "../../blocking/src/sync_clients.rs"]
mod sync_clients;

/// spindle's workers: one per core of the 2-core machine the suite runs on, as tokio's
/// default runtime and Go's default GOMAXPROCS there.
const WORKERS: usize = 2;

fn main() {
    let args = harness::args();
    harness::main("spindle", &args, |case| {
        harness::run_case("spindle", case, |case, shared| {
            let rt = spindle::Builder::new().worker_threads(WORKERS).build().expect("a spindle runtime");
            let case = case.clone();
            rt.block_on(move || {
                let common = sync_clients::common(&case);
                let fibers: Vec<_> = (0..case.clients)
                    .map(|i| spindle::spawn(sync_clients::client(&case, i, &common, shared.clone())))
                    .collect();
                for f in fibers {
                    if let Err(e) = f.join() {
                        shared.fail(format!("a client fiber failed: {e}"));
                    }
                }
            });
        })
    });
}
