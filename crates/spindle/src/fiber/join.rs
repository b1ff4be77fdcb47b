//! [`JoinHandle`]: waiting for a fiber and taking its result.
//!
//! The result lives in the fiber's control block (module `fiber::control`) and is handed over
//! through its completion (module `fiber::completion`, which holds the invariants): blocking,
//! timed and awaited joins are the three waits of module `park::completion`.

use std::fmt;
use std::marker::PhantomData;

use super::block::OutputRef;
use super::completion::Joiner;
use super::FiberId;
use crate::error::{CancelReason, JoinError};
use crate::sched::caller::{blocking_caller, Caller};

/// Owns the right to wait for a fiber and take its result, like `std::thread::JoinHandle`.
/// Dropping it detaches the fiber.
pub struct JoinHandle<T> {
    cell: OutputRef<T>,
    joiner: Joiner,
    _not_sync: PhantomData<*const ()>,
}

// SAFETY: the handle only reaches the result through the completion protocol (module
// `fiber::completion`), which is thread-safe; T: Send because the result moves to the joiner.
unsafe impl<T: Send> Send for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    pub(crate) fn new(cell: OutputRef<T>) -> JoinHandle<T> {
        JoinHandle { cell, joiner: Joiner::default(), _not_sync: PhantomData }
    }

    /// Takes the result; only once complete.
    fn take(&self) -> Result<T, JoinError> {
        self.cell.stage.take().map_err(JoinError::from_payload)
    }

    /// Waits for the fiber to finish and returns its result, or why there is none (it
    /// panicked, or was cancelled: [`JoinError`]). In a fiber this parks the fiber; on any
    /// other thread it blocks the thread.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker, even when the fiber has finished (so that the
    /// misuse shows the first time, not only when the join would wait): `.await` the handle
    /// there, or join from a fiber. In the fiber it would wait for (a fiber joining itself).
    #[track_caller]
    pub fn join(self) -> Result<T, JoinError> {
        let header = &self.cell.header;
        let caller = blocking_caller("join");
        if let Caller::Fiber(worker) = caller {
            refuse_self_join(worker, header);
        }
        match caller {
            // A fiber that can only run on the joiner's worker completes on this thread:
            // the cheaper wait (module `park::completion`, "a joiner at home").
            Caller::Fiber(worker) if worker.keeps_for_join(header) => {
                header.join.join_at_home(&self.joiner, worker, "join")
            }
            _ => header.join.join(&self.joiner, "join"),
        }
        self.take()
    }

    /// Waits at most `timeout` for the fiber: `Ok` with what [`join`](Self::join) gives, or,
    /// if it is still running, `Err` with the handle back (to join, await or cancel later,
    /// from anywhere).
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = spindle::Runtime::new().unwrap();
    /// rt.block_on(|| {
    ///     let slow = spindle::spawn(|| spindle::time::sleep(Duration::from_millis(50)));
    ///     let slow = slow.join_timeout(Duration::from_millis(1)).unwrap_err();
    ///     slow.join().unwrap();
    /// });
    /// ```
    #[track_caller]
    pub fn join_timeout(self, timeout: std::time::Duration) -> Result<Result<T, JoinError>, JoinHandle<T>> {
        match crate::sched::clock::deadline_in(timeout) {
            Some(deadline) => self.join_deadline(deadline),
            None => Ok(self.join()),
        }
    }

    /// Waits until `deadline` at the latest for the fiber; see [`join_timeout`](Self::join_timeout).
    #[track_caller]
    pub fn join_deadline(self, deadline: std::time::Instant) -> Result<Result<T, JoinError>, JoinHandle<T>> {
        if self.wait_until(deadline) {
            Ok(self.take())
        } else {
            Err(self)
        }
    }

    /// Aborts the fiber: it unwinds (running destructors) with a
    /// [`Cancelled`](crate::Cancelled) payload at its next suspension point (a park, yield,
    /// sleep, lock, channel or socket wait), or never starts if it has not yet. `join` then
    /// returns a cancelled [`JoinError`], unless the fiber finished first. Code that never
    /// suspends cannot be interrupted. Callable from any thread. The name of
    /// [`task::JoinHandle::abort`](crate::task::JoinHandle::abort) and tokio's.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// rt.block_on(|| {
    ///     let (_tx, rx) = spindle::sync::channel::<u32>(1);
    ///     let waiter = spindle::spawn(move || rx.recv());
    ///     waiter.abort();
    ///     assert!(waiter.join().unwrap_err().is_cancelled());
    /// });
    /// ```
    pub fn abort(&self) {
        let fiber = self.cell.stage.fiber_ref();
        fiber.header.set_cancelled(CancelReason::Handle);
        super::waiter::unpark(&fiber);
    }

    /// [`abort`](Self::abort) under the name fiber code has used (cancellation is what a
    /// fiber's abort is made of: [`Cancelled`](crate::Cancelled),
    /// [`JoinError::is_cancelled`]). Kept as an alias; new code says `abort`.
    pub fn cancel(&self) {
        self.abort();
    }

    /// Waits at most until `deadline` for the fiber to finish; true if it has.
    #[track_caller]
    pub(crate) fn wait_until(&self, deadline: std::time::Instant) -> bool {
        if let Caller::Fiber(worker) = blocking_caller("join (with timeout)") {
            refuse_self_join(worker, &self.cell.header);
        }
        self.cell.header.join.wait_until(&self.joiner, deadline, "join (with timeout)")
    }

    /// Whether the fiber has finished (its result is ready).
    pub fn is_finished(&self) -> bool {
        self.cell.header.is_complete()
    }

    pub fn id(&self) -> FiberId {
        FiberId(self.cell.header.id)
    }

    pub fn name(&self) -> Option<&str> {
        self.cell.header.name.as_deref()
    }
}

/// Awaiting a fiber's handle (from an async task, or in `select!`) gives what
/// [`JoinHandle::join`] gives, without blocking the worker.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let fiber = rt.spawn(|| 6 * 7);
/// let task = rt.spawn_async(async move { fiber.await.unwrap() });
/// assert_eq!(task.join().unwrap(), 42);
/// ```
impl<T> std::future::Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    /// Inlined into the awaiting future's poll (a handler awaiting the fiber it started).
    #[inline]
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(worker) = crate::sched::worker::current() {
            refuse_self_join(worker, &this.cell.header);
        }
        match this.cell.header.join.poll(&this.joiner, cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(this.take()),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.cell.header.id).field("name", &self.name()).finish()
    }
}

/// A fiber waiting for itself would wait forever: panic at once instead, naming it. One
/// comparison of addresses (the running fiber's cell starts with its header).
#[inline]
#[track_caller]
fn refuse_self_join(worker: &crate::sched::worker::Worker, header: &crate::fiber::control::Header) {
    let me = worker.current_fiber_ptr().map(|p| p.cast::<crate::fiber::control::Header>());
    if me.is_some_and(|me| std::ptr::eq(me, header)) {
        self_join(header);
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn self_join(header: &crate::fiber::control::Header) -> ! {
    panic!(
        "spindle: fiber {} ({}, spawned at {}) joined itself: it would wait for its own end forever",
        header.id,
        header.display_name(),
        header.site
    )
}
