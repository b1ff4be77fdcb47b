//! What the tests of sync clients in fibers share: a runtime under the hang guard, and a
//! counter of calls in flight that remembers its highest value.
//!
//! "Parks the fiber, not the worker" is shown by counts and order, never by time: the calls
//! in flight at once are counted by the fibers themselves, and where a test needs every
//! fiber waiting before it goes on, it waits for that count (or for the server's own count of
//! waiting clients), which a worker blocked in one call could never let happen. The test then
//! fails as hung at a generous limit instead of hanging.

#![allow(dead_code)] // each test program uses a part

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[path = "../../../../crates/spindle/tests/support/hang_guard.rs"]
pub mod hang_guard;

/// Worker threads of the runtimes under test.
pub const WORKERS: usize = 2;

/// Runs `f` in a fiber of a fresh runtime of `workers` workers, under the hang guard.
pub fn on_runtime<T: Send + 'static>(workers: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    hang_guard::returns_within_hang_limit("the test's runtime", move || {
        let rt = spindle::Builder::new().worker_threads(workers).build().expect("a spindle runtime");
        let out = rt.block_on(f);
        rt.shutdown_timeout(Duration::from_secs(5));
        out
    })
}

/// Calls in flight: entered, left, and the most at once.
#[derive(Default)]
pub struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl InFlight {
    /// A call starts; the guard ends it when dropped.
    pub fn enter(&self) -> Entered<'_> {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        Entered(self)
    }

    /// Calls in flight now.
    pub fn now(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }

    /// The most calls that were in flight at once.
    pub fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

/// One call in flight (see [`InFlight::enter`]).
pub struct Entered<'a>(&'a InFlight);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Parks the calling fiber (spindle's own sleep) until `done` holds, checking every
/// millisecond: a wait on a condition, not a time.
pub fn wait_until(mut done: impl FnMut() -> bool) {
    while !done() {
        spindle::time::sleep(Duration::from_millis(1));
    }
}
