//! A hang guard for tests whose regression would be a hang rather than a wrong answer.
//! Included with `#[path]` (this directory is not a test target of its own).
//!
//! It is not a speed claim: the limit is far above anything the guarded code needs, a pass says
//! nothing about how fast it ran, and a failure says "hung", not "slow". The body runs on a
//! thread of its own, so a body stuck forever (a worker blocked in a sleep, a call that never
//! returns) is left behind instead of stalling the test, and the runtime it owns is never
//! dropped (dropping it would wait for that stuck worker).

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// How long a guarded body may take before the test fails as hung.
pub const HANG_LIMIT: Duration = Duration::from_secs(60);

/// Runs `body` and returns its result; fails the test with "hung: {what} did not return
/// within 60 s" if it has not returned by then. A panic in `body` resumes here, with its own
/// message.
pub fn returns_within_hang_limit<T: Send + 'static>(
    what: &str,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let body = std::thread::spawn(move || {
        let out = body();
        let _ = done_tx.send(());
        out
    });
    match done_rx.recv_timeout(HANG_LIMIT) {
        // Returned, or panicked (the sender dropped while unwinding).
        Ok(()) | Err(RecvTimeoutError::Disconnected) => {
            body.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }
        Err(RecvTimeoutError::Timeout) => panic!("hung: {what} did not return within {HANG_LIMIT:?}"),
    }
}
