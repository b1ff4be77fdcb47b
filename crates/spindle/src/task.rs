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
//
// # Where a task runs
//
// A task spawned with [`spawn_async`] (a `Send` future) belongs to the runtime, not to a
// worker: it is polled by whichever worker takes it from a queue, on that worker thread's own
// stack, and may move between polls. A task spawned with [`spawn_local`] (or pinned by the
// runtime itself) has a *home* worker and is only ever polled, and dropped, there; its future
// need not be `Send`.
//
// # Ground rules
//
// 1. **One poller at a time.** The state word grants `RUNNING` to one party by
//    compare-exchange (`IDLE → SCHEDULED` by a waker, `SCHEDULED → RUNNING` by a worker,
//    `RUNNING → IDLE | NOTIFIED | DONE`); only the `RUNNING` holder touches the stage.
// 2. **One queue entry.** Whoever moves a task `IDLE → SCHEDULED` queues it, exactly once: on
//    the current worker's stealable queue or LIFO slot (a `Send` task woken on a worker), the
//    runtime's task injector (woken from elsewhere), or its home worker's local queue, LIFO
//    slot or inbox (a pinned task). The LIFO slot holds one task, touched only by its worker,
//    which polls it next (within a cap; `sched::worker`, invariant 9); it is not stealable.
//    Idle workers steal `SCHEDULED` tasks from other workers' stealable queues and from the
//    injector; a `RUNNING` task is in no queue, so it is never stolen mid-poll.
// 3. **Exactly one canceller.** A task that returned `Pending` once is registered in the live
//    list of the worker that polled it (a pinned task: of its home, at spawn). At shutdown each
//    worker cancels its live list and its queues: it claims each task (`IDLE | SCHEDULED →
//    RUNNING`, waiting while another worker's poll is under way), drops the future and
//    completes with [`Cancelled`]. The claim makes a second attempt (the same task reached
//    through a queue and a list) a no-op. Tasks left in the injector once every worker has
//    stopped are cancelled by `Runtime::drop`, and a task injected after that is cancelled by
//    its injector (module `sched`).
// 4. A pinned task's future is dropped on its home thread (by its poll, its abort, or its
//    home's shutdown); should a pinned future still be alive when the task is freed on another
//    thread (its home thread died by a panic), it is leaked rather than dropped there.

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
use crate::sched::RuntimeShared;

/// A task as the workers see it.
pub(crate) type TaskRef = Arc<dyn TaskRun>;

/// What a worker does with a queued task.
pub(crate) trait TaskRun: Send + Sync {
    /// Polls the task once (on a worker's own stack, in the scheduler context).
    fn run(self: Arc<Self>);
    /// Shutdown: claims the task (waiting for a poll under way on another worker), drops the
    /// future and completes with [`Cancelled`]. A no-op on a finished task.
    fn cancel(self: Arc<Self>);
    /// Whether the task has completed (output stored, or cancelled).
    fn is_done(&self) -> bool;
    /// Marks the task as registered in a worker's live list; true the first time only.
    fn register_once(&self) -> bool;
}

impl fmt::Debug for dyn TaskRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task").field("done", &self.is_done()).finish()
    }
}

/// Task scheduling state (ground rule 1). Transitions, all by compare-exchange:
/// `IDLE → SCHEDULED` by a waker (which then queues the task: exactly one queue entry);
/// `SCHEDULED → RUNNING` by a worker; `RUNNING → IDLE` after a `Pending` poll;
/// `RUNNING → NOTIFIED` by a waker during the poll (the worker then requeues it);
/// `IDLE | SCHEDULED → RUNNING` by a shutdown claim; `* → DONE` once the output (or the
/// cancellation) is stored.
const IDLE: u8 = 0;
const SCHEDULED: u8 = 1;
const RUNNING: u8 = 2;
const NOTIFIED: u8 = 3;
const DONE: u8 = 4;

/// Where a task may run.
pub(crate) enum Home {
    /// Any worker of this runtime (a `Send` future).
    Any(Arc<RuntimeShared>),
    /// Only this worker (ground rule 4).
    Pinned(Arc<WorkerShared>),
}

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
    /// Set once the task is in some worker's live list (ground rule 3).
    registered: AtomicBool,
    home: Home,
    /// Touched only by the holder of RUNNING (or before the first schedule), and by the
    /// joiner after completion (seen under `join`'s lock).
    stage: UnsafeCell<Stage<F>>,
    join: Mutex<Join>,
}

// SAFETY: `stage` follows ground rule 1: one party at a time holds RUNNING and touches it; the
// joiner reads the output only after completion was published under `join`'s lock. F and its
// output move between threads, hence the Send bounds (pinned `!Send` futures are wrapped in
// `Pinned`, whose own impl states why that is sound).
unsafe impl<F: Future + Send> Sync for Task<F> where F::Output: Send {}

impl<F> Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn new(home: Home, future: F, registered: bool) -> Arc<Task<F>> {
        Arc::new(Task {
            state: AtomicU8::new(SCHEDULED),
            aborted: AtomicBool::new(false),
            registered: AtomicBool::new(registered),
            home,
            stage: UnsafeCell::new(Stage::Pending(future)),
            join: Mutex::new(Join { complete: false, waker: None, waiter: None }),
        })
    }

    /// Queues the task, which the caller has just moved to SCHEDULED (ground rule 2), at the
    /// back of its queue: a spawn, an abort, or a task that woke itself during its poll (a
    /// yield must not run again before the others).
    fn schedule(self: &Arc<Self>) {
        self.place(false);
    }

    /// Queues the task that a waker has just moved `IDLE → SCHEDULED`: on a worker, into
    /// its LIFO slot (module `sched::worker`, invariant 9), so that it runs next.
    fn schedule_woken(self: &Arc<Self>) {
        self.place(true);
    }

    fn place(self: &Arc<Self>, woken: bool) {
        let me: TaskRef = self.clone();
        let current = worker::current();
        match &self.home {
            Home::Any(rt) => match current {
                Some(w) if Arc::ptr_eq(&w.rt, rt) => w.schedule_task_local(me, woken),
                _ => rt.inject_task(me),
            },
            Home::Pinned(home) => match current {
                Some(w) if Arc::ptr_eq(&w.shared, home) => w.schedule_pinned_local(me, woken),
                _ => home.schedule_task_remote(me),
            },
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
                Ok(_) if state == IDLE => return self.schedule_woken(),
                Ok(_) => return,
                Err(actual) => state = actual,
            }
        }
    }

    fn complete(&self, result: thread::Result<F::Output>) {
        // SAFETY: we hold RUNNING (ground rule 1): nobody else touches the stage until
        // completion is published below.
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

    /// Drops the future in place and completes with `Cancelled`. The caller holds RUNNING.
    fn drop_future_and_complete(&self) {
        // SAFETY: the caller holds RUNNING (ground rule 1).
        unsafe { *self.stage.get() = Stage::Taken };
        self.complete(Err(Box::new(Cancelled)));
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
        if self.state.compare_exchange(SCHEDULED, RUNNING, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return; // finished (cancelled) meanwhile
        }
        if self.aborted.load(Ordering::Acquire) {
            return self.drop_future_and_complete();
        }
        // A waker borrowed from `self` for the poll: no allocation and no reference count
        // traffic (a future that keeps the waker clones it, which counts a reference).
        // SAFETY: `Arc::from_raw` of our own live Arc's pointer makes a second owner that is
        // never dropped (ManuallyDrop), so the count stays balanced; `self` outlives `waker`.
        let waker = std::mem::ManuallyDrop::new(Waker::from(unsafe { Arc::from_raw(Arc::as_ptr(&self)) }));
        let mut cx = Context::from_waker(&waker);
        // SAFETY: RUNNING grants us the stage (ground rule 1).
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
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            match state {
                DONE => return,
                IDLE | SCHEDULED => {
                    match self.state.compare_exchange(state, RUNNING, Ordering::AcqRel, Ordering::Acquire) {
                        Ok(_) => return self.drop_future_and_complete(),
                        Err(actual) => state = actual,
                    }
                }
                _ => {
                    // Another worker is polling it (it has not seen the shutdown yet): the
                    // poll ends soon, then the claim succeeds.
                    thread::yield_now();
                    state = self.state.load(Ordering::Acquire);
                }
            }
        }
    }

    fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
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
                    // Ground rule 4: a pinned future is never dropped off its home thread.
                    std::mem::forget(future);
                }
            }
        }
    }
}

/// A pinned task's future, which need not be `Send`.
struct Pinned<F>(F);

// SAFETY: a `Pinned` future lives in a task whose home is one worker (`Home::Pinned`): it is
// created on that worker's thread (`spawn_local` checks), polled only there (pinned tasks are
// queued only on their home, ground rule 2, and never stolen), and dropped only there (ground
// rule 4: by its poll, its home's shutdown, or leaked by `Task::drop` elsewhere). So the
// future never crosses threads; only the task's `Arc` and its `Send` output do.
unsafe impl<F> Send for Pinned<F> {}

impl<F: Future> Future for Pinned<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: structural pinning: the inner future is never moved out of `Pinned`.
        unsafe { self.map_unchecked_mut(|p| &mut p.0) }.poll(cx)
    }
}

/// Spawns `future` as a task on the current runtime. Tasks are polled by the workers' event
/// loops on the worker threads' own stacks; a task may be polled by another worker than the
/// one that spawned it (an idle worker steals runnable tasks from busy ones), which is why the
/// future must be `Send`. Its wakers may be called from any thread. [`spawn_local`] keeps a
/// task on the current worker.
///
/// # Panics
///
/// Outside a spindle runtime (use [`crate::Runtime::spawn_async`] there).
pub fn spawn_async<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let worker = worker::current().expect("spindle::task::spawn_async called outside a spindle runtime");
    spawn_on(worker.rt.clone(), future)
}

/// Yields the current task: the first poll wakes the task and returns `Pending`, so that it
/// goes to the back of its worker's queue (never the LIFO slot: a task that wakes itself while
/// it runs is a yield) and every other queued task and fiber runs before it continues.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let h = rt.spawn_async(async {
///     for _ in 0..3 {
///         spindle::task::yield_now().await;
///     }
///     7
/// });
/// assert_eq!(h.join().unwrap(), 7);
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future of [`yield_now`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Spawns `future` as a task that runs only on the current worker: it is never stolen by
/// another worker, so the future need not be `Send` (it may hold `Rc`s, `RefCell`s,
/// thread-locals' references). The output still goes to the joiner, which may be anywhere.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let n = rt.block_on(|| {
///     let shared = std::rc::Rc::new(std::cell::Cell::new(41));
///     let s = shared.clone();
///     let h = spindle::task::spawn_local(async move { s.set(s.get() + 1); s.get() });
///     h.join().unwrap()
/// });
/// assert_eq!(n, 42);
/// ```
///
/// # Panics
///
/// Outside a spindle worker thread.
pub fn spawn_local<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: Send + 'static,
{
    let worker = worker::current().expect("spindle::task::spawn_local called outside a spindle worker");
    let home = Home::Pinned(worker.shared.clone());
    // Registered in the home's live list at once (ground rule 3), so that shutdown drops the
    // future on this thread whatever happens to it.
    let task = Task::new(home, Pinned(future), true);
    worker.register_task(task.clone());
    task.schedule();
    JoinHandle { task }
}

/// Spawns a `Send` task that any worker of `rt` may run.
pub(crate) fn spawn_on<F>(rt: Arc<RuntimeShared>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let task = Task::new(Home::Any(rt), future, false);
    task.schedule();
    JoinHandle { task }
}

/// Spawns a `Send` task that only `home` runs (from any thread).
pub(crate) fn spawn_pinned<F>(home: Arc<WorkerShared>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let task = Task::new(Home::Pinned(home), future, false);
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
    /// Waits until completion or `deadline`; true if complete.
    fn wait_until(&self, deadline: std::time::Instant) -> bool;
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

    fn wait_until(&self, deadline: std::time::Instant) -> bool {
        loop {
            {
                let mut join = crate::sync::lock(&self.join);
                if join.complete {
                    return true;
                }
                if std::time::Instant::now() >= deadline {
                    join.waiter = None;
                    return false;
                }
                join.waiter = Some(crate::sync::waiter::Waiter::current());
            }
            crate::sync::waiter::park_until(Some(deadline), "task join (with timeout)");
        }
    }

    fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        // Schedule it so that a worker drops the future promptly.
        if self.state.compare_exchange(IDLE, SCHEDULED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            self.owner_task().schedule();
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
    fn owner_task(&self) -> Arc<Task<F>> {
        // Rebuild an Arc from &self: the JoinHandle holds one, so the count is at least 1.
        let ptr = self as *const Task<F>;
        // SAFETY: `self` lives in an Arc (tasks are only created by `Task::new`) that the
        // JoinHandle keeps alive, so the count is at least 1 while we add one.
        unsafe { Arc::increment_strong_count(ptr) };
        // SAFETY: re-owns the count added just above.
        unsafe { Arc::from_raw(ptr) }
    }
}

impl<T> JoinHandle<T> {
    /// Cancels the task: its future is dropped at the next opportunity (a pinned task's on
    /// its home worker), and the handle resolves to `Err` with a [`Cancelled`] payload (unless
    /// it finished first).
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
    pub fn join_timeout(self, timeout: std::time::Duration) -> Result<thread::Result<T>, JoinHandle<T>> {
        match crate::sync::wait::deadline_in(timeout) {
            Some(deadline) => self.join_deadline(deadline),
            None => Ok(self.join()),
        }
    }

    /// Waits until `deadline` at the latest; see [`join_timeout`](Self::join_timeout).
    pub fn join_deadline(self, deadline: std::time::Instant) -> Result<thread::Result<T>, JoinHandle<T>> {
        if self.task.wait_until(deadline) {
            Ok(self.join())
        } else {
            Err(self)
        }
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
