//! [`JoinHandle`] of an async task: a future of its result, a blocking join, and abort.
//!
//! The output lives in the task (module `task::raw`) and is handed over through its
//! completion (module `fiber::completion`, which holds the invariants; the waits are module
//! `park::completion`'s).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread;

use super::raw::Task;
use crate::error::JoinError;
use crate::park::completion::{Completion, Joiner};

/// The handle of an async task: a future of its result, and a way to abort it. Dropping it
/// detaches the task (it keeps running).
pub struct JoinHandle<T> {
    task: Arc<dyn TaskOutput<T>>,
    joiner: Joiner,
}

/// The join handle's view of a task, whatever its future.
trait TaskOutput<T>: Send + Sync {
    fn completion(&self) -> &Completion;
    /// Only after completion, once.
    fn take_output(&self) -> thread::Result<T>;
    fn abort(&self);
}

impl<F> TaskOutput<F::Output> for Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn completion(&self) -> &Completion {
        &self.completion
    }

    fn take_output(&self) -> thread::Result<F::Output> {
        Task::take_output(self)
    }

    fn abort(&self) {
        // Rebuild an Arc from &self to queue the task.
        let ptr = self as *const Task<F>;
        // SAFETY: `self` lives in an Arc (tasks are only created by `Task::new`) that the
        // JoinHandle keeps alive, so the count is at least 1 while we add one.
        unsafe { Arc::increment_strong_count(ptr) };
        // SAFETY: re-owns the count added just above.
        let task = unsafe { Arc::from_raw(ptr) };
        task.abort();
    }
}

impl<T> JoinHandle<T> {
    pub(super) fn new<F>(task: Arc<Task<F>>) -> JoinHandle<T>
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        JoinHandle { task, joiner: Joiner::default() }
    }

    fn take(&self) -> Result<T, JoinError> {
        self.task.take_output().map_err(JoinError::from_payload)
    }

    /// Cancels the task: its future is dropped at the next opportunity (a pinned task's on
    /// its home worker), and the handle resolves to a cancelled [`JoinError`] (unless it
    /// finished first).
    pub fn abort(&self) {
        self.task.abort();
    }

    pub fn is_finished(&self) -> bool {
        self.task.completion().is_complete()
    }

    /// Waits for the task from blocking-style code (parks a fiber, blocks a thread).
    #[track_caller]
    pub fn join(self) -> Result<T, JoinError> {
        crate::sched::caller::blocking_caller("task join");
        self.task.completion().join(&self.joiner, "task join");
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
        if self.task.completion().wait_until(&self.joiner, deadline, "task join (with timeout)") {
            Ok(self.take())
        } else {
            Err(self)
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, JoinError>> {
        match self.task.completion().poll(&self.joiner, cx) {
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
