//! [`park_until`]: a park with a deadline.
//!
//! # Invariant
//!
//! **A timed park cleans up.** [`park_until`]'s timer on the worker's wheel is cancelled on
//! every way out (return, spurious wake-up, unwinding), so no stale timer wakes the fiber
//! in a later park.

use std::thread;
use std::time::Instant;

use super::wakers::fiber_waker;
use crate::sched::api::{self, blocking_caller, park as park_on, Caller, TimerHandle};

/// Like [`park_on`], but returns by `deadline` at the latest (`None`: no deadline). A fiber
/// arms a timer on its worker's wheel for the park (cancelled on every way out); a thread uses
/// `std::thread::park_timeout`. May return spuriously: callers re-check their condition and
/// the clock.
#[track_caller]
pub(crate) fn park_until(deadline: Option<Instant>, reason: &'static str) {
    let Some(deadline) = deadline else { return park_on(reason) };
    crate::fiber::check_no_park(reason);
    let caller = blocking_caller(reason);
    // The runtime's clock, as the deadline (module `sched::clock`); a thread's is the real one.
    let now = api::now();
    if now >= deadline {
        return;
    }
    match caller {
        Caller::Fiber(w) => {
            struct CancelTimer(TimerHandle);
            impl Drop for CancelTimer {
                fn drop(&mut self) {
                    if let Some(w) = api::current_worker() {
                        w.cancel_timer(self.0);
                    }
                }
            }
            let _timer = CancelTimer(w.add_timer(deadline, fiber_waker(w)));
            w.park_current(reason);
        }
        Caller::Thread => thread::park_timeout(deadline - now),
    }
}
