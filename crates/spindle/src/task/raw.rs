//! The raw task: a future, its state word, where it may run, and its output.
//!
//! See the module `task` doc for where a task runs and the invariants; the state machine is
//! module `task::state` (loom-checked).

use std::cell::UnsafeCell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;

use super::state::{AfterPoll, Claim, TaskState};
use crate::error::Cancelled;
use crate::park::completion::Completion;
use crate::sched::task_ref::{TaskRef, TaskRun};
use crate::sched::worker::{self, Queued, WorkerShared};
use crate::sched::RuntimeShared;

/// Where a task may run.
pub(crate) enum Home {
    /// Any worker of this runtime (a `Send` future).
    Any(Arc<RuntimeShared>),
    /// Only this worker ("pinned futures stay home").
    Pinned(Arc<WorkerShared>),
}

pub(super) enum Stage<F: Future> {
    Pending(F),
    Done(thread::Result<F::Output>),
    Taken,
}

pub(crate) struct Task<F: Future> {
    pub(super) state: TaskState,
    /// Set once the task is in some worker's live list ("exactly one canceller").
    registered: AtomicBool,
    /// Wake-ups go to the back of the queue, never the LIFO slot (module `sched::worker`,
    /// "batched tasks").
    batched: bool,
    home: Home,
    /// Touched only by the holder of RUNNING (or before the first schedule), and by the
    /// joiner after completion.
    stage: UnsafeCell<Stage<F>>,
    pub(super) completion: Completion,
}

// SAFETY: `stage` is touched by one party at a time ("one poller at a time": the RUNNING
// holder); the joiner reads the output only after completion was published (module
// `fiber::completion`). F and its output move between threads, hence the Send bounds (pinned
// `!Send` futures are wrapped in `Pinned`, whose own impl states why that is sound).
unsafe impl<F: Future + Send> Sync for Task<F> where F::Output: Send {}

impl<F> Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    pub(super) fn new(home: Home, future: F, registered: bool, batched: bool) -> Arc<Task<F>> {
        let task = Arc::new(Task {
            state: TaskState::new(),
            registered: AtomicBool::new(registered),
            batched,
            home,
            stage: UnsafeCell::new(Stage::Pending(future)),
            completion: Completion::new(),
        });
        // Tasks have no id of their own: the address names one while it lives.
        crate::trace::task_spawned(Arc::as_ptr(&task) as *const () as u64);
        task
    }

    /// Queues the task, which the caller has just moved to SCHEDULED ("one queue entry"):
    /// `Back` for a spawn, an abort, or a task that woke itself during its poll (a yield must
    /// not run again before the others); `Woken` for a wake-up, which on its worker goes to
    /// the LIFO slot (a batched task's goes to the back: `wake_task`).
    pub(super) fn queue(self: &Arc<Self>, how: Queued) {
        let me: TaskRef = self.clone();
        let current = worker::current();
        match &self.home {
            Home::Any(rt) => match current {
                Some(w) if Arc::ptr_eq(&w.rt, rt) => w.queue_task(me, false, how),
                _ => rt.inject_task(me),
            },
            Home::Pinned(home) => match current {
                Some(w) if Arc::ptr_eq(&w.shared, home) => w.queue_task(me, true, how),
                _ => home.send_task(me),
            },
        }
    }

    fn wake_task(self: &Arc<Self>) {
        if self.state.wake() {
            self.queue(if self.batched { Queued::Back } else { Queued::Woken });
        }
    }

    fn complete(&self, result: thread::Result<F::Output>) {
        // SAFETY: we hold RUNNING ("one poller at a time"): nobody else touches the stage
        // until completion is published below.
        unsafe { *self.stage.get() = Stage::Done(result) };
        self.state.set_done();
        self.completion.complete();
    }

    /// Drops the future in place and completes as cancelled. The caller holds RUNNING.
    fn drop_future_and_complete(&self, why: Cancelled) {
        // SAFETY: the caller holds RUNNING ("one poller at a time").
        unsafe { *self.stage.get() = Stage::Taken };
        self.complete(Err(Box::new(why)));
    }

    /// Takes the output; only by the single joiner, after completion.
    pub(super) fn take_output(&self) -> thread::Result<F::Output> {
        // SAFETY: completion was observed (acquire), after which only the single joiner (the
        // JoinHandle, not Clone) touches the stage.
        match std::mem::replace(unsafe { &mut *self.stage.get() }, Stage::Taken) {
            Stage::Done(r) => r,
            _ => panic!("spindle task output taken twice"),
        }
    }

    /// The handle's abort: mark it, and queue it if idle so that a worker drops the future
    /// promptly.
    pub(super) fn abort(self: &Arc<Self>) {
        crate::trace::task_cancelled(Arc::as_ptr(self) as *const () as u64);
        self.state.set_aborted();
        if self.state.schedule_idle() {
            self.queue(Queued::Back);
        }
    }
}

/// The task is its own waker: waking it schedules it (`wake_task`), and a poll lends the
/// waker without touching the reference count (see `run`).
impl<F> Wake for Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn wake(self: Arc<Self>) {
        self.wake_task();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_task();
    }
}

impl<F> TaskRun for Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn run(self: Arc<Self>) {
        if !self.state.start_poll() {
            return; // finished (cancelled) meanwhile
        }
        if self.state.is_aborted() {
            return self.drop_future_and_complete(Cancelled::HANDLE);
        }
        // A waker borrowed from `self` for the poll: no allocation and no reference count
        // traffic (a future that keeps the waker clones it, which counts a reference).
        // SAFETY: `Arc::from_raw` of our own live Arc's pointer makes a second owner that is
        // never dropped (ManuallyDrop), so the count stays balanced; `self` outlives `waker`.
        let waker = std::mem::ManuallyDrop::new(Waker::from(unsafe { Arc::from_raw(Arc::as_ptr(&self)) }));
        let mut cx = Context::from_waker(&waker);
        // SAFETY: RUNNING grants us the stage ("one poller at a time").
        let stage = unsafe { &mut *self.stage.get() };
        let Stage::Pending(future) = stage else { return };
        // SAFETY: the future stays at this address (inside the Arc'd task) until it is
        // dropped in place.
        let future = unsafe { Pin::new_unchecked(future) };
        match catch_unwind(AssertUnwindSafe(|| future.poll(&mut cx))) {
            Ok(Poll::Ready(v)) => {
                // SAFETY: still RUNNING; drop the future in place before storing the output.
                unsafe { *self.stage.get() = Stage::Taken };
                self.complete(Ok(v));
            }
            Err(payload) => {
                // SAFETY: as above.
                unsafe { *self.stage.get() = Stage::Taken };
                self.complete(Err(payload));
            }
            Ok(Poll::Pending) => match self.state.end_poll() {
                // Woken during the poll: run again, after the others.
                AfterPoll::Requeue => self.queue(Queued::Back),
                AfterPoll::Wait => {
                    if self.state.is_aborted() {
                        // Aborted during the poll: its scheduling attempt saw RUNNING.
                        self.wake_task();
                    }
                }
            },
        }
    }

    fn cancel(self: Arc<Self>) {
        loop {
            match self.state.claim() {
                Claim::Claimed => return self.drop_future_and_complete(Cancelled::SHUTDOWN),
                Claim::Done => return,
                // Another worker is polling it (it has not seen the shutdown yet): the poll
                // ends soon, then the claim succeeds.
                Claim::Busy => thread::yield_now(),
            }
        }
    }

    fn is_done(&self) -> bool {
        self.state.is_done()
    }

    fn register_once(&self) -> bool {
        !self.registered.swap(true, Ordering::Relaxed)
    }
}

impl<F: Future> Drop for Task<F> {
    fn drop(&mut self) {
        if let Home::Pinned(home) = &self.home {
            if !home.is_current_thread() {
                if let Stage::Pending(future) = std::mem::replace(self.stage.get_mut(), Stage::Taken) {
                    // "Pinned futures stay home": never dropped off their home thread.
                    std::mem::forget(future);
                }
            }
        }
    }
}

/// A pinned task's future, which need not be `Send`.
pub(super) struct Pinned<F>(pub(super) F);

// SAFETY: a `Pinned` future lives in a task whose home is one worker (`Home::Pinned`): it is
// created on that worker's thread (`spawn_local` checks), polled only there (pinned tasks are
// queued only on their home and never stolen), and dropped only there ("pinned futures stay
// home": by its poll, its home's shutdown, or leaked by `Task::drop` elsewhere). So the
// future never crosses threads; only the task's `Arc` and its `Send` output do.
unsafe impl<F> Send for Pinned<F> {}

impl<F: Future> Future for Pinned<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: structural pinning: the inner future is never moved out of `Pinned`.
        unsafe { self.map_unchecked_mut(|p| &mut p.0) }.poll(cx)
    }
}
