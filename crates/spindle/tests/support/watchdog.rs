//! A watchdog for tests against misbehaving peers (spindle-http's and spindle-grpc's broken
//! server tests), whose regression would be a hang. Included with `#[path]` (this directory is
//! not a test target of its own).
//!
//! Unlike `hang_guard`, it runs nothing itself: armed at the start of a case, it aborts the
//! whole test binary with "hung: <case> ..." if it is not dropped within 30 s. An abort, not a
//! panic: a panic on the watchdog's thread would not fail the test, and the hung thread could
//! not be unwound anyway. Not a speed claim: a pass says nothing about how fast the case ran.

use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

/// Aborts the process if it is not dropped within 30 s.
pub struct Watchdog(Option<mpsc::Sender<()>>);

impl Watchdog {
    pub fn arm(case: &'static str) -> Watchdog {
        let (done, wait) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(Duration::from_secs(30)) {
                // Straight to the file: the test harness would keep an `eprintln!` in its
                // capture, lost with the process.
                let _ = writeln!(std::io::stderr(), "hung: {case} did not finish within 30 s");
                std::process::abort();
            }
        });
        Watchdog(Some(done))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            let _ = done.send(());
        }
    }
}
