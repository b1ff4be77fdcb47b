//! Futures on spindle.
//!
//! [`block_on`] runs a future to completion from blocking-style code: in a fiber it parks the
//! fiber between polls (its worker runs other fibers meanwhile) and the future's waker unparks
//! it; on a plain thread it parks the thread. Spindle's sockets and timers register with the
//! worker that polls them, so async libraries (anything written against `futures-io`) run on
//! a fiber unchanged.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::sched::worker;

struct ThreadWake(std::thread::Thread);

impl Wake for ThreadWake {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` to completion, parking the calling fiber (or thread) while it is pending.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = match worker::current().filter(|w| w.current_fiber().is_some()) {
        Some(worker) => worker.current_waker(),
        None => Waker::from(Arc::new(ThreadWake(std::thread::current()))),
    };
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        crate::sync::waiter::park_on("block_on (future pending)");
    }
}

// ---------------------------------------------------------------------------------------
// Async tasks.
// ---------------------------------------------------------------------------------------

use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Mutex;
use std::thread;

use crate::fiber::Cancelled;
use crate::sched::worker::WorkerShared;

/// A task as its worker sees it.
pub(crate) type TaskRef = Arc<dyn TaskRun>;

/// What a worker does with a queued task.
pub(crate) trait TaskRun: Send + Sync {
    /// Polls the task once (on its worker's own stack, in the scheduler context).
    fn run(self: Arc<Self>);
    /// Drops the future without polling it again and completes with [`Cancelled`].
    fn cancel(self: Arc<Self>);
    /// Whether the task has completed (output stored, or cancelled).
    fn is_done(&self) -> bool;
}

impl fmt::Debug for dyn TaskRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task").field("done", &self.is_done()).finish()
    }
}

/// Task scheduling state. Transitions (all by compare-exchange):
/// `IDLE → SCHEDULED` by a waker (which then queues the task: exactly one queue entry);
/// `SCHEDULED → RUNNING` by the worker; `RUNNING → IDLE` after a `Pending` poll;
/// `RUNNING → NOTIFIED` by a waker during the poll (the worker then requeues it);
/// `* → DONE` once the output (or the cancellation) is stored.
const IDLE: u8 = 0;
const SCHEDULED: u8 = 1;
const RUNNING: u8 = 2;
const NOTIFIED: u8 = 3;
const DONE: u8 = 4;

enum Stage<F: Future> {
    Pending(F),
    Done(thread::Result<F::Output>),
    Taken,
}

struct Join {
    complete: bool,
    waker: Option<Waker>,
    /// A thread or fiber blocked in `JoinHandle::join`.
    waiter: Option<crate::sync::waiter::Waiter>,
}

struct Task<F: Future> {
    state: AtomicU8,
    aborted: AtomicBool,
    owner: Arc<WorkerShared>,
    /// Touched only by the owner worker while the state is RUNNING (or before the first
    /// schedule), and by the joiner after completion (seen under `join`'s lock).
    stage: UnsafeCell<Stage<F>>,
    join: Mutex<Join>,
}

// SAFETY: `stage` follows the protocol on its field doc: the owner worker polls it (one
// thread at a time, the state machine grants RUNNING to one party), the joiner reads the
// output only after completion was published under `join`'s lock. F and its output move
// between threads, hence the Send bounds.
unsafe impl<F: Future + Send> Sync for Task<F> where F::Output: Send {}

impl<F> Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn schedule(self: &Arc<Self>) {
        let me: TaskRef = self.clone();
        match worker::current() {
            Some(w) if Arc::ptr_eq(&w.shared, &self.owner) => w.schedule_task_local(me),
            _ => self.owner.schedule_task_remote(me),
        }
    }

    fn wake_task(self: &Arc<Self>) {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let next = match state {
                IDLE => SCHEDULED,
                RUNNING => NOTIFIED,
                _ => return, // already queued, already notified, or finished
            };
            match self.state.compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) if state == IDLE => return self.schedule(),
                Ok(_) => return,
                Err(actual) => state = actual,
            }
        }
    }

    fn complete(&self, result: thread::Result<F::Output>) {
        // SAFETY: we hold RUNNING (or are cancelling at shutdown on the owner thread): nobody
        // else touches the stage until completion is published below.
        unsafe { *self.stage.get() = Stage::Done(result) };
        self.state.store(DONE, Ordering::Release);
        let (waker, waiter) = {
            let mut join = crate::sync::lock(&self.join);
            join.complete = true;
            (join.waker.take(), join.waiter.take())
        };
        if let Some(w) = waker {
            w.wake();
        }
        if let Some(w) = waiter {
            w.wake();
        }
    }

    /// Drops the future (in place, so that its destructor runs on the owner worker) and
    /// completes with `Cancelled`.
    fn drop_future_and_complete(&self) {
        // SAFETY: as in `complete`.
        unsafe { *self.stage.get() = Stage::Taken };
        self.complete(Err(Box::new(Cancelled)));
    }
}

struct TaskWaker<F: Future>(Arc<Task<F>>);

impl<F> Wake for TaskWaker<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn wake(self: Arc<Self>) {
        self.0.wake_task();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.wake_task();
    }
}

impl<F> TaskRun for Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn run(self: Arc<Self>) {
        if self.state.compare_exchange(SCHEDULED, RUNNING, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return; // finished (cancelled) meanwhile
        }
        if self.aborted.load(Ordering::Acquire) {
            return self.drop_future_and_complete();
        }
        let waker = Waker::from(Arc::new(TaskWaker(self.clone())));
        let mut cx = Context::from_waker(&waker);
        // SAFETY: RUNNING grants us the stage; the future is never moved once pinned here
        // (it lives in the Arc'd task until dropped in place).
        let stage = unsafe { &mut *self.stage.get() };
        let Stage::Pending(future) = stage else { return };
        // SAFETY: the future stays at this address until it is dropped in place.
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
            Ok(Poll::Pending) => {
                if self.state.compare_exchange(RUNNING, IDLE, Ordering::AcqRel, Ordering::Acquire).is_err() {
                    // Woken during the poll (NOTIFIED): run again later.
                    self.state.store(SCHEDULED, Ordering::Release);
                    self.schedule();
                } else if self.aborted.load(Ordering::Acquire) {
                    // Aborted during the poll: its scheduling attempt saw RUNNING and gave up.
                    self.wake_task();
                }
            }
        }
    }

    fn cancel(self: Arc<Self>) {
        if self.state.load(Ordering::Acquire) != DONE {
            self.drop_future_and_complete();
        }
    }

    fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }
}

/// Spawns `future` as a task on the current worker (or, outside a worker, fails: use
/// [`crate::Runtime::spawn_async`]). Tasks are polled by the worker's event loop on the
/// worker thread's own stack; their wakers may be called from any thread.
///
/// # Panics
///
/// Outside a spindle runtime.
pub fn spawn_async<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let worker = worker::current().expect("spindle::task::spawn_async called outside a spindle runtime");
    spawn_on(worker.shared.clone(), future)
}

pub(crate) fn spawn_on<F>(owner: Arc<WorkerShared>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let task = Arc::new(Task {
        state: AtomicU8::new(SCHEDULED),
        aborted: AtomicBool::new(false),
        owner,
        stage: UnsafeCell::new(Stage::Pending(future)),
        join: Mutex::new(Join { complete: false, waker: None, waiter: None }),
    });
    task.schedule();
    JoinHandle { task }
}

/// The handle of an async task: a future of its result, and a way to abort it. Dropping it
/// detaches the task (it keeps running).
pub struct JoinHandle<T> {
    task: Arc<dyn TaskOutput<T>>,
}

trait TaskOutput<T>: Send + Sync {
    fn poll_join(&self, cx: &mut Context<'_>) -> Poll<thread::Result<T>>;
    fn join_blocking(&self) -> thread::Result<T>;
    fn abort(&self);
    fn is_finished(&self) -> bool;
}

impl<F> Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn take_output(&self) -> thread::Result<F::Output> {
        // SAFETY: completion was observed under `join`'s lock, after which only the single
        // joiner (the JoinHandle, not Clone) touches the stage.
        match std::mem::replace(unsafe { &mut *self.stage.get() }, Stage::Taken) {
            Stage::Done(r) => r,
            _ => panic!("spindle task output taken twice"),
        }
    }
}

impl<F> TaskOutput<F::Output> for Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn poll_join(&self, cx: &mut Context<'_>) -> Poll<thread::Result<F::Output>> {
        {
            let mut join = crate::sync::lock(&self.join);
            if !join.complete {
                join.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
        }
        Poll::Ready(self.take_output())
    }

    fn join_blocking(&self) -> thread::Result<F::Output> {
        loop {
            {
                let mut join = crate::sync::lock(&self.join);
                if join.complete {
                    break;
                }
                join.waiter = Some(crate::sync::waiter::Waiter::current());
            }
            crate::sync::waiter::park_on("task join");
        }
        self.take_output()
    }

    fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        // Schedule it so that its worker drops the future promptly.
        if self.state.compare_exchange(IDLE, SCHEDULED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            let me: TaskRef = self.owner_task();
            match worker::current() {
                Some(w) if Arc::ptr_eq(&w.shared, &self.owner) => w.schedule_task_local(me),
                _ => self.owner.schedule_task_remote(me),
            }
        }
    }

    fn is_finished(&self) -> bool {
        crate::sync::lock(&self.join).complete
    }
}

impl<F> Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn owner_task(&self) -> TaskRef {
        // Rebuild an Arc from &self: the JoinHandle holds one, so the count is at least 1.
        let ptr = self as *const Task<F>;
        // SAFETY: `self` lives in an Arc (tasks are only created by `spawn_on`) that the
        // JoinHandle keeps alive; incrementing then re-owning one count is balanced.
        unsafe {
            Arc::increment_strong_count(ptr);
            Arc::from_raw(ptr)
        }
    }
}

impl<T> JoinHandle<T> {
    /// Cancels the task: its future is dropped on its worker at the next opportunity, and the
    /// handle resolves to `Err` with a [`Cancelled`] payload (unless it finished first).
    pub fn abort(&self) {
        self.task.abort();
    }

    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Waits for the task from blocking-style code (parks a fiber, blocks a thread).
    pub fn join(self) -> thread::Result<T> {
        self.task.join_blocking()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = thread::Result<T>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<thread::Result<T>> {
        self.task.poll_join(cx)
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("task::JoinHandle").field("finished", &self.is_finished()).finish()
    }
}

/// The payload type of a task that panicked or was cancelled, for `downcast`.
pub type Payload = Box<dyn Any + Send>;
