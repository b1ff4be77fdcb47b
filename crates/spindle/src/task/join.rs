//! [`JoinHandle`] of an async task: a future of its result, a blocking join, and abort.
//!
//! The handle holds a counted reference to the task cell (module `task::raw`). The output
//! lives in the cell and is handed over through the join bits of the task's state word
//! (module `sched::task_state`, "the join bits follow the join cell's rules"; the join cell's
//! invariants are module `fiber::completion`'s, the waits module `park::completion`'s), and
//! read out through the cell's vtable.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::thread;

use crate::error::JoinError;
use crate::park::completion::{Completion, Joiner};
use crate::sched::task_ref::TaskRef;

/// The handle of an async task: a future of its result, and a way to abort it. Dropping it
/// detaches the task (it keeps running).
pub struct JoinHandle<T> {
    /// The handle's reference to a task cell whose output is `T` (module `task::raw`).
    task: TaskRef,
    joiner: Joiner,
    /// The output's type; the handle itself holds no `T`, whatever `T`'s auto traits.
    _output: PhantomData<fn() -> T>,
}

impl<T> JoinHandle<T> {
    /// The handle of the task `task`, which must be a cell whose output is `T` (the spawn
    /// functions make both from one future).
    pub(super) fn new(task: TaskRef) -> JoinHandle<T> {
        JoinHandle { task, joiner: Joiner::default(), _output: PhantomData }
    }

    fn completion(&self) -> &Completion {
        self.task.header().state.completion()
    }

    /// Only after completion, once (the joiner's waits consume or exclusively borrow the
    /// handle).
    fn take(&self) -> Result<T, JoinError> {
        let mut out = MaybeUninit::<thread::Result<T>>::uninit();
        let header = self.task.as_raw();
        // SAFETY: the handle's reference keeps the cell alive; its output type is `T` (`new`),
        // so `out` is the slot `read_output` writes; completion was observed by the caller.
        unsafe { (self.task.header().vtable.read_output)(header, out.as_mut_ptr().cast()) };
        // SAFETY: `read_output` wrote the slot (or panicked, never returning here).
        unsafe { out.assume_init() }.map_err(JoinError::from_payload)
    }

    /// Cancels the task: its future is dropped at the next opportunity (a pinned task's on
    /// its home worker), and the handle resolves to a cancelled [`JoinError`] (unless it
    /// finished first).
    pub fn abort(&self) {
        super::raw::abort(&self.task);
    }

    pub fn is_finished(&self) -> bool {
        self.completion().is_complete()
    }

    /// Waits for the task from blocking-style code (parks a fiber, blocks a thread).
    #[track_caller]
    pub fn join(self) -> Result<T, JoinError> {
        crate::sched::caller::blocking_caller("task join");
        self.completion().join(&self.joiner, "task join");
        self.take()
    }

    /// Waits at most `timeout` for the task from blocking-style code: `Ok` with what
    /// [`join`](Self::join) gives, or `Err` with the handle back if it is still running.
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = spindle::Runtime::new().unwrap();
    /// let h = rt.spawn_async(spindle::time::sleep_future(Duration::from_millis(50)));
    /// let h = h.join_timeout(Duration::from_millis(1)).unwrap_err();
    /// h.join().unwrap();
    /// ```
    #[track_caller]
    pub fn join_timeout(self, timeout: std::time::Duration) -> Result<Result<T, JoinError>, JoinHandle<T>> {
        match crate::park::wait::deadline_in(timeout) {
            Some(deadline) => self.join_deadline(deadline),
            None => Ok(self.join()),
        }
    }

    /// Waits until `deadline` at the latest; see [`join_timeout`](Self::join_timeout).
    #[track_caller]
    pub fn join_deadline(self, deadline: std::time::Instant) -> Result<Result<T, JoinError>, JoinHandle<T>> {
        crate::sched::caller::blocking_caller("task join (with timeout)");
        if self.completion().wait_until(&self.joiner, deadline, "task join (with timeout)") {
            Ok(self.take())
        } else {
            Err(self)
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, JoinError>> {
        match self.completion().poll(&self.joiner, cx) {
            Poll::Ready(()) => Poll::Ready(self.take()),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("task::JoinHandle").field("finished", &self.is_finished()).finish()
    }
}

/// A panic's payload (what [`JoinError::into_panic`](crate::JoinError::into_panic) gives).
pub type Payload = Box<dyn std::any::Any + Send>;
