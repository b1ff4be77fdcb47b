//! Graceful shutdown: a [`ShutdownToken`] that the runtime, servers and user loops share.
//! Triggering it tells everyone to stop taking new work; work that should be allowed to finish
//! holds an [`InFlight`] guard, and [`Runtime::shutdown_timeout`](crate::Runtime::shutdown_timeout)
//! waits for those guards up to a deadline before it cancels everything that is left.
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = spindle::Runtime::new().unwrap();
//! let token = rt.shutdown_token();
//! let worker_loop = rt.spawn(move || {
//!     let token = spindle::shutdown::token();
//!     let mut jobs = 0;
//!     while !token.is_triggered() {
//!         let _busy = token.track(); // this job is drained, not cancelled
//!         spindle::time::sleep(Duration::from_millis(1));
//!         jobs += 1;
//!     }
//!     jobs
//! });
//! // …later, on SIGTERM say (`token.trigger_on_signals(…)`):
//! token.trigger();
//! assert!(rt.shutdown_timeout(Duration::from_secs(5)), "everything finished in time");
//! assert!(worker_loop.join().is_ok());
//! ```

// # Invariants
//
// - **One-way.** A token goes from running to triggered once and never back; every waiter
//   ([`wait`](ShutdownToken::wait), [`triggered`](ShutdownToken::triggered)) is woken by the
//   transition, and a wait that starts after it returns at once. The trigger then cancels
//   the token's own `CancellationToken`, the parent of its child tokens.
// - **Counted in-flight work.** `in_flight` is the number of live [`InFlight`] guards; a
//   drain waiter is woken by the drop that brings it to zero. Guards can be taken after the
//   trigger (a request already accepted still completes).
// - **Bounded waiters.** A task's waker is kept under its `Triggered` future's key (replaced
//   on re-poll, removed when the future drops), so a server that makes one such future per
//   connection holds wakers only for live connections.
// - **No lost wake-up.** Waiters check the condition and queue themselves under the token's
//   lock; `trigger` and the last guard's drop change the state before they take the waiters
//   under that same lock.
// - **Untracked work is cancelled, not drained.** The runtime's shutdown waits only for
//   guards; then dropping the runtime cancels every fiber (it unwinds at its next suspension
//   point, running destructors) and drops every task. An accept loop needs no guard: it is
//   cancelled once the connections it started have drained.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use crate::lock::lock;
use crate::park::waker_set::WakerSet;
use crate::park::{self, WaitList, WaitNode};
use crate::sched::caller::{blocking_caller, Caller};
use crate::sched::worker;
use crate::signal::SignalKind;
use crate::sync::CancellationToken;

/// A shutdown signal shared by a runtime and everything running on it. Cloning shares it.
#[derive(Clone, Default)]
pub struct ShutdownToken {
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    triggered: AtomicBool,
    in_flight: AtomicUsize,
    waiters: Mutex<Waiters>,
    /// Cancelled by the trigger: the parent of [`ShutdownToken::child_token`]'s tokens.
    cancel: CancellationToken,
}

#[derive(Default)]
struct Waiters {
    /// Fibers and threads waiting for the trigger.
    trigger: WaitList,
    /// Tasks waiting for the trigger, one waker per `Triggered` future.
    trigger_wakers: WakerSet,
    /// Fibers and threads waiting for `in_flight` to reach zero.
    drained: WaitList,
}

impl fmt::Debug for ShutdownToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownToken")
            .field("triggered", &self.is_triggered())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

/// The shutdown token of the runtime the caller runs on.
///
/// # Panics
///
/// Outside a spindle worker; use [`Runtime::shutdown_token`](crate::Runtime::shutdown_token)
/// there.
pub fn token() -> ShutdownToken {
    try_token()
        .expect("spindle::shutdown::token called outside a spindle runtime; use Runtime::shutdown_token")
}

/// The shutdown token of the runtime the caller runs on, if any.
pub fn try_token() -> Option<ShutdownToken> {
    CURRENT.with(|c| c.borrow().clone())
}

std::thread_local! {
    /// The token of the runtime whose worker this thread is (set when the worker starts).
    static CURRENT: std::cell::RefCell<Option<ShutdownToken>> = const { std::cell::RefCell::new(None) };
}

/// Makes `token` the current thread's (a worker thread, when it starts).
pub(crate) fn enter_worker(token: ShutdownToken) {
    CURRENT.with(|c| *c.borrow_mut() = Some(token));
}

/// Makes `token` the current thread's and returns the one it had (a local runtime's thread,
/// around its `block_on`).
pub(crate) fn swap_current(token: Option<ShutdownToken>) -> Option<ShutdownToken> {
    CURRENT.with(|c| c.replace(token))
}

impl ShutdownToken {
    /// A token of its own, not tied to a runtime (each runtime has one: see
    /// [`Runtime::shutdown_token`](crate::Runtime::shutdown_token)).
    pub fn new() -> ShutdownToken {
        ShutdownToken::default()
    }

    /// Whether shutdown has begun.
    pub fn is_triggered(&self) -> bool {
        self.state.triggered.load(Ordering::Acquire)
    }

    /// Begins shutdown: wakes every waiter. Later calls do nothing.
    pub fn trigger(&self) {
        if self.state.triggered.swap(true, Ordering::AcqRel) {
            return;
        }
        let (parked, wakers) = {
            let mut w = lock(&self.state.waiters);
            (w.trigger.take_all(), w.trigger_wakers.take_all())
        };
        for node in parked {
            park::wake(node);
        }
        for waker in wakers {
            waker.wake();
        }
        self.state.cancel.cancel();
    }

    /// A [`CancellationToken`] that is cancelled when this token triggers (at once if it has):
    /// the root of a tree of cancellation for the work the runtime runs, each request or job
    /// cancelling its own children without touching the shutdown.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// let shutdown = rt.shutdown_token();
    /// let request = shutdown.child_token();
    /// let step = request.child_token();
    /// step.cancel(); // the step alone
    /// assert!(!request.is_cancelled() && !shutdown.is_triggered());
    /// shutdown.trigger(); // everything
    /// assert!(request.is_cancelled());
    /// ```
    pub fn child_token(&self) -> CancellationToken {
        self.state.cancel.child_token()
    }

    /// Triggers this token when the process receives any of `signals` (SIGTERM and SIGINT,
    /// typically). The handlers stay installed for the rest of the process (module
    /// [`signal`](crate::signal)).
    pub fn trigger_on_signals(&self, signals: &[SignalKind]) -> io::Result<()> {
        for &kind in signals {
            let token = self.clone();
            crate::signal::on_signal(kind, move || token.trigger())?;
        }
        Ok(())
    }

    /// Waits until shutdown begins: parks a fiber, or blocks a plain thread.
    ///
    /// # Panics
    ///
    /// In an async task polled by a spindle worker: await [`triggered`](Self::triggered).
    #[track_caller]
    pub fn wait(&self) {
        self.park_until("shutdown", |w| &mut w.trigger, || self.is_triggered());
    }

    /// A future that completes when shutdown begins.
    pub fn triggered(&self) -> Triggered {
        Triggered { token: self.clone(), key: None }
    }

    /// Marks a piece of work as in flight until the guard drops: shutdown drains it (waits
    /// for it, up to the deadline) instead of cancelling it at once.
    pub fn track(&self) -> InFlight {
        self.state.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight { token: self.clone() }
    }

    /// The number of live [`InFlight`] guards.
    pub fn in_flight(&self) -> usize {
        self.state.in_flight.load(Ordering::Acquire)
    }

    /// Waits until no [`InFlight`] guard is left or `deadline` passes; true if drained.
    /// Parks a fiber, blocks a plain thread.
    #[track_caller]
    pub fn wait_drained(&self, deadline: Option<Instant>) -> bool {
        if let Some(deadline) = deadline {
            // In a fiber a timer wakes the waiter at the deadline; a thread parks with a
            // timeout.
            return self.wait_drained_until(deadline);
        }
        self.park_until("shutdown drain", |w| &mut w.drained, || self.in_flight() == 0);
        true
    }

    #[track_caller]
    fn wait_drained_until(&self, deadline: Instant) -> bool {
        let (in_fiber, timer) = match blocking_caller("shutdown drain") {
            Caller::Fiber(w) => (true, Some(w.add_timer(deadline, crate::park::fiber_waker(w)))),
            Caller::Thread => (false, None),
        };
        let node = WaitNode::new();
        let _leave = Leave { state: &self.state, node: &node, which: |w| &mut w.drained };
        let drained = loop {
            {
                let mut w = lock(&self.state.waiters);
                if self.in_flight() == 0 {
                    break true;
                }
                if crate::sched::clock::now() >= deadline {
                    break false;
                }
                w.drained.push(&node);
            }
            if in_fiber {
                park::park_on("shutdown drain");
            } else {
                std::thread::park_timeout(deadline.saturating_duration_since(Instant::now()));
            }
        };
        if let (Some(key), Some(w)) = (timer, worker::current()) {
            w.cancel_timer(key);
        }
        drained
    }

    /// Parks until `done()` holds, queued on the list `which` picks.
    #[track_caller]
    fn park_until(
        &self,
        reason: &'static str,
        which: fn(&mut Waiters) -> &mut WaitList,
        done: impl Fn() -> bool,
    ) {
        let _ = blocking_caller(reason);
        let node = WaitNode::new();
        let _leave = Leave { state: &self.state, node: &node, which };
        loop {
            {
                let mut w = lock(&self.state.waiters);
                if done() {
                    return;
                }
                which(&mut w).push(&node);
            }
            park::park_on(reason);
        }
    }
}

/// Dequeues a waiter's node on every way out (a cancelled fiber unwinds from its park).
struct Leave<'a> {
    state: &'a State,
    node: &'a Arc<WaitNode>,
    which: fn(&mut Waiters) -> &mut WaitList,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut w = lock(&self.state.waiters);
        (self.which)(&mut w).remove(self.node);
    }
}

/// A piece of work that shutdown drains rather than cancels; from [`ShutdownToken::track`].
#[must_use = "the work counts as in flight only while the guard lives"]
pub struct InFlight {
    token: ShutdownToken,
}

impl fmt::Debug for InFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlight").finish_non_exhaustive()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let state = &self.token.state;
        if state.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            let drained = lock(&state.waiters).drained.take_all();
            for node in drained {
                park::wake(node);
            }
        }
    }
}

/// A future that completes when shutdown begins; from [`ShutdownToken::triggered`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Triggered {
    token: ShutdownToken,
    /// This future's entry in the token's task wakers, once it has polled.
    key: Option<u64>,
}

impl Drop for Triggered {
    fn drop(&mut self) {
        if self.key.is_some() {
            lock(&self.token.state.waiters).trigger_wakers.remove(self.key);
        }
    }
}

impl Future for Triggered {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if this.token.is_triggered() {
            return Poll::Ready(());
        }
        let mut w = lock(&this.token.state.waiters);
        if this.token.is_triggered() {
            return Poll::Ready(());
        }
        w.trigger_wakers.register(&mut this.key, cx.waker());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use crate::shutdown::*;
    use std::task::Wake;

    struct Nop;
    impl Wake for Nop {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn dropped_triggered_futures_leave_no_waker_behind() {
        let token = ShutdownToken::new();
        let waker = std::task::Waker::from(Arc::new(Nop));
        let mut cx = Context::from_waker(&waker);
        for _ in 0..100 {
            let mut fut = token.triggered();
            assert!(Pin::new(&mut fut).poll(&mut cx).is_pending());
            assert!(Pin::new(&mut fut).poll(&mut cx).is_pending());
        }
        assert_eq!(lock(&token.state.waiters).trigger_wakers.len(), 0);
        let mut kept = token.triggered();
        assert!(Pin::new(&mut kept).poll(&mut cx).is_pending());
        assert_eq!(lock(&token.state.waiters).trigger_wakers.len(), 1);
        token.trigger();
        assert!(Pin::new(&mut kept).poll(&mut cx).is_ready());
    }
}
