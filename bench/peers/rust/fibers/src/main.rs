//! The `fibers` suite for the Rust competitors: `rust-thread` (std::thread), `tokio`
//! (tasks on a current_thread runtime) and `spindle` (fibers on one worker, behind the
//! cargo feature `spindle`).
//!
//! Usage: `fibers-peer --competitor rust-thread|tokio|spindle [--quick]`
//!
//! Prints one JSON line per measurement (see bench/peers/README.md). The four cases are
//! the same for every language of the suite (shapes of seed 003):
//! - `alloc`: N units, each switching twice (yield) and then suspended on a release signal.
//!   Timed: creation until the last one has suspended, plus release until all are joined.
//!   Memory: resident set with all N suspended minus the resident set before creating them.
//! - `switch`: 2 units, each yielding `switches` times: every yield hands control to the
//!   other one (2 × `switches` switches in all).
//! - `warm`: `repeats` rounds of N units that yield once and finish, joined: the first
//!   round against the last one (per unit).
//! - `throughput`: `repeats` rounds of `units` units that each yield `switches` times,
//!   joined; the fastest round counts.

#[cfg(feature = "spindle")]
mod spindle_impl;
mod thread_impl;
mod tokio_impl;

mod harness;

pub use harness::*;

fn usage() -> ! {
    eprintln!("usage: fibers-peer --competitor rust-thread|tokio|spindle [--quick]");
    std::process::exit(2);
}

fn main() {
    let mut competitor = None;
    let mut sizes = Sizes::FULL;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--competitor" => competitor = Some(args.next().unwrap_or_else(|| usage())),
            "--quick" => sizes = Sizes::QUICK,
            _ => usage(),
        }
    }
    match competitor.as_deref() {
        Some("rust-thread") => run(thread_impl::Threads, sizes),
        Some("tokio") => run(tokio_impl::Tokio::new(), sizes),
        #[cfg(feature = "spindle")]
        Some("spindle") => run(spindle_impl::Spindle::new(), sizes),
        #[cfg(not(feature = "spindle"))]
        Some("spindle") => {
            eprintln!("fibers-peer was built without the `spindle` feature");
            std::process::exit(2);
        }
        _ => usage(),
    }
}
