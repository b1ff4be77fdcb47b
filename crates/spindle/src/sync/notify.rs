//! Notify: wake one waiting fiber or task, or store one permit for the next waiter (tokio's
//! `Notify`), from fibers, threads and async tasks.
//!
//! Invariants (under the lock):
//! - `permit` is set only while no waiter is queued: `notify_one` hands its notification to
//!   the oldest queued waiter (dequeuing it is the hand-off) and stores the permit only when
//!   none waits. At most one permit is stored.
//! - A waiter completes when it finds itself dequeued by a notifier (`woken`) or takes the
//!   permit. One that leaves after a hand-off (timeout, dropped future, cancellation) passes
//!   it to the next waiter, or stores it as the permit: no `notify_one` is lost.
//! - `notify_waiters` wakes every waiter queued at that moment and stores no permit.

use std::fmt;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::lock::lock;
use crate::park::wait::{deadline_in, Wait, Wakes};
use crate::park::{self, WaitList};

/// Wakes waiters without carrying data; see the module docs for the permit rule.
///
/// ```
/// use std::sync::Arc;
/// use spindle::sync::Notify;
///
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let ready = Arc::new(Notify::new());
///     let r = ready.clone();
///     let h = spindle::spawn(move || r.wait());
///     ready.notify_one();
///     h.join().unwrap();
/// });
/// ```
#[derive(Default)]
pub struct Notify {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    permit: bool,
    waiters: WaitList,
}

fn list(s: &mut State) -> &mut WaitList {
    &mut s.waiters
}

fn pass_on(s: &mut State) -> Wakes {
    match s.waiters.pop() {
        Some(next) => vec![next],
        None => {
            s.permit = true;
            Vec::new()
        }
    }
}

fn take(s: &mut State, woken: bool) -> Option<()> {
    if woken || std::mem::take(&mut s.permit) {
        Some(())
    } else {
        None
    }
}

impl Notify {
    pub fn new() -> Notify {
        Notify::default()
    }

    /// Wakes the oldest waiter, or, if none waits, lets the next `wait` return at once.
    pub fn notify_one(&self) {
        let mut state = lock(&self.state);
        let next = state.waiters.pop();
        if next.is_none() {
            state.permit = true;
        }
        drop(state);
        if let Some(n) = next {
            park::wake(n);
        }
    }

    /// Wakes every current waiter; stores no permit.
    pub fn notify_waiters(&self) {
        let all = lock(&self.state).waiters.take_all();
        all.into_iter().for_each(park::wake);
    }

    /// Waits for a notification (parks the fiber, or blocks the thread).
    #[track_caller]
    pub fn wait(&self) {
        crate::sched::api::check_entry("notify");
        Wait::new(&self.state, list, pass_on).block(None, "notify", take);
    }

    /// Waits at most `timeout`; true if notified.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        Wait::new(&self.state, list, pass_on)
            .block(deadline_in(timeout), "notify (with timeout)", take)
            .is_some()
    }

    /// Waits until `deadline` at the latest; true if notified.
    pub fn wait_deadline(&self, deadline: Instant) -> bool {
        Wait::new(&self.state, list, pass_on).block(Some(deadline), "notify (with timeout)", take).is_some()
    }

    /// A future of the next notification, for async code. It joins the queue when first
    /// polled (`notify_waiters` reaches it from then on).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let rt = spindle::Runtime::new().unwrap();
    /// let notify = Arc::new(spindle::sync::Notify::new());
    /// let n = notify.clone();
    /// let h = rt.spawn_async(async move { n.notified().await });
    /// notify.notify_one();
    /// h.join().unwrap();
    /// ```
    pub fn notified(&self) -> impl Future<Output = ()> + Send + '_ {
        let mut wait = Wait::new(&self.state, list, pass_on);
        std::future::poll_fn(move |cx| wait.poll(cx, take))
    }
}

impl fmt::Debug for Notify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notify").field("permit", &lock(&self.state).permit).finish()
    }
}
