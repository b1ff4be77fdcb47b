//! The blocking suite's tokio and OS-thread competitors (`harness.rs` has the contract).
//!
//! `blocking-peer --mode tokio|thread [--quick] [--case NAME]`:
//!
//! - `thread`: each client an OS thread running the sync crates (`sync_clients.rs`):
//!   `postgres::Client` (a tokio current-thread runtime inside each), `redis::Connection`,
//!   one shared `ureq::Agent`;
//! - `tokio`: each client a task on tokio's default multi-thread runtime (a worker per core):
//!   `tokio_postgres` (its connection a task of its own), the `redis` crate's multiplexed
//!   async connection (one per client), one shared `reqwest::Client`.

mod harness;
mod sync_clients;
mod tokio_clients;

use std::sync::Arc;

fn main() {
    let args = harness::args();
    let mode = args.all.iter().position(|a| a == "--mode").and_then(|i| args.all.get(i + 1).cloned());
    match mode.as_deref() {
        Some("thread") => harness::main("rust-thread", &args, |case| {
            harness::run_case("rust-thread", case, |case, shared| {
                let common = sync_clients::common(case);
                let threads: Vec<_> = (0..case.clients)
                    .map(|i| std::thread::spawn(sync_clients::client(case, i, &common, shared.clone())))
                    .collect();
                for t in threads {
                    let _ = t.join();
                }
            })
        }),
        Some("tokio") => harness::main("tokio", &args, |case| {
            harness::run_case("tokio", case, |case, shared| tokio_clients::run(case, Arc::clone(&shared)))
        }),
        _ => {
            eprintln!("usage: blocking-peer --mode tokio|thread [--quick] [--case NAME]");
            std::process::exit(2);
        }
    }
}
