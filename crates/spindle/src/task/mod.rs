//! Async tasks: futures polled by the workers' event loops, on the same loop as fibers.
//!
//! - [`spawn_async`] (a `Send` future) makes a task that belongs to the runtime, not to a
//!   worker: it is polled by whichever worker takes it from a queue, on that worker thread's
//!   own stack, and may move between polls (idle workers steal runnable tasks).
//! - [`spawn_local`] (or a task the runtime pins itself) has a *home* worker and is only ever
//!   polled, and dropped, there; its future need not be `Send`.
//! - [`spawn_eager`] is [`spawn_async`] whose first poll may happen at once, inside the
//!   spawning task's poll.
//! - [`block_on`] runs a future from blocking-style code (a fiber or a thread).
//! - [`JoinSet`] joins fibers and tasks in the order they finish; [`join!`](crate::join) and
//!   [`try_join!`](crate::try_join) await several futures at once (and
//!   [`join_fibers!`](crate::join_fibers) runs closures on fibers and joins them);
//!   [`task_local!`](crate::task_local) keeps a value for a task's scope.

// Rooms: `state` (the state word, loom-checked), `raw` (the task: future, home, output),
// `join` (the [`JoinHandle`]), `block_on`, `join_set` ([`JoinSet`]), `join_macros` (`join!`
// and friends), `local` (`task_local!`). The scheduler sees tasks only as
// `sched::task_ref::TaskRef`.
//
// # Invariants
//
// - **One poller at a time** and **one queue entry**: module `task::state`. Whoever moves a
//   task `IDLE → SCHEDULED` queues it, exactly once: on the current worker's stealable queue
//   or LIFO slot (a `Send` task woken on a worker), the runtime's task injector (woken from
//   elsewhere), or its home worker's local queue, LIFO slot or inbox (a pinned task). The
//   LIFO slot is not stealable (module `sched::worker`, "LIFO slots").
// - **Exactly one canceller.** A task that returned `Pending` once is registered in the live
//   list of the worker that polled it (a pinned task: of its home, at spawn). At shutdown each
//   worker cancels its live list and its queues: it claims each task (`task::state`'s claim,
//   waiting while another worker's poll is under way), drops the future and completes it as
//   cancelled. The claim makes a second attempt (the same task reached through a queue and a
//   list) a no-op. Tasks left in the injector once every worker has stopped are cancelled by
//   `Runtime::drop`, and a task injected after that is cancelled by its injector (module
//   `sched`).
// - **Eager first polls take nothing from anyone.** A task's poll runs while its task holds
//   `RUNNING`, wherever it is called from: an eager first poll (`spawn_eager`) is the new
//   task's own `run`, on the spawner's worker, inside the spawner's poll, and leaves the task
//   where a queued poll would (done, waiting and in the live list, or queued again). It is
//   taken only when no other worker could have run the task sooner (a runtime of one
//   worker) and no other task waits on this one (it would overtake them: module
//   `sched::worker`, "batched tasks"), from a task's poll (a fiber's spawn is queued: its
//   budget is the fiber's, not a poll's), with a unit of that poll's I/O budget, never
//   inside another eager poll, and never once its worker is shutting down (a spawn from a
//   destructor then is cancelled unpolled, as any): so the spawner's poll stays bounded and
//   the worker's stack holds at most two polls.
// - **Pinned futures stay home.** A pinned task's future is dropped on its home thread (by its
//   poll, its abort, or its home's shutdown); should a pinned future still be alive when the
//   task is freed on another thread (its home thread died by a panic), it is leaked rather
//   than dropped there.

mod block_on;
mod builder;
mod join;
/// What the join macros expand to; not a public API.
#[doc(hidden)]
pub mod join_macros;
mod join_set;
mod local;
mod raw;
mod state;

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub use block_on::block_on;
pub use builder::Builder;
pub use join::JoinHandle;
pub use join_set::{JoinNext, JoinSet};
pub use local::{AccessError, LocalKey, TaskLocalFuture};
use raw::{Home, Pinned, Task};

use crate::sched::worker::{self, Queued, WorkerShared};
use crate::sched::RuntimeShared;

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
    // Registered in the home's live list at once ("exactly one canceller"), so that shutdown
    // drops the future on this thread whatever happens to it.
    let task = Task::new(home, Pinned(future), true, false);
    worker.register_task(task.clone());
    task.queue(Queued::Back);
    JoinHandle::new(task)
}

/// Spawns `future` as [`spawn_async`] does, and, when that takes nothing from anyone, polls
/// it once before returning, inside the calling task's poll, instead of queueing that first
/// poll behind the others. A task whose first poll gets far (a request handler that answers
/// at once) then has its effects happen within its spawner's poll: no trip through the
/// queue, and its spawner sees them before it returns (spindle-http's HTTP/2 streams: the
/// response is queued on the connection while the connection is still being polled, and
/// goes out in the same pass).
///
/// The first poll happens at once only when the caller is a task's poll on a runtime of one
/// worker (with more, an idle worker could take the queued task and run it in parallel:
/// the task is queued), with no other task queued on it (the new task would overtake the
/// waiting ones: it goes behind them), while that poll's I/O budget lasts (the eager poll
/// takes a unit, and the eager task's socket operations spend the same budget, so a poll
/// that spawns eagerly in a loop ends up queueing), and not inside another eager first
/// poll. Otherwise, and from a fiber, this is [`spawn_async`]. Either way the task's later
/// polls are queued as any task's, and its output goes to the [`JoinHandle`].
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let rt = spindle::runtime::Builder::new().worker_threads(1).build().unwrap();
/// let h = rt.spawn_async(async {
///     let ran = Arc::new(AtomicBool::new(false));
///     let r = ran.clone();
///     let inner = spindle::task::spawn_eager(async move { r.store(true, Ordering::Relaxed) });
///     let polled_at_once = ran.load(Ordering::Relaxed);
///     inner.await.unwrap();
///     polled_at_once
/// });
/// assert!(h.join().unwrap(), "one worker, from a task: the first poll happened at once");
/// ```
///
/// # Panics
///
/// Outside a spindle runtime (use [`crate::Runtime::spawn_async`] there).
pub fn spawn_eager<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    worker::current().expect("spindle::task::spawn_eager called outside a spindle runtime");
    Builder::new().eager(true).spawn(future)
}

/// Spawns a `Send` task that any worker of `rt` may run.
pub(crate) fn spawn_on<F>(rt: Arc<RuntimeShared>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let task = Task::new(Home::Any(rt), future, false, false);
    task.queue(Queued::Back);
    JoinHandle::new(task)
}

/// Spawns a `Send` task that only `home` runs (from any thread).
pub(crate) fn spawn_pinned<F>(home: Arc<WorkerShared>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let task = Task::new(Home::Pinned(home), future, false, false);
    task.queue(Queued::Back);
    JoinHandle::new(task)
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

/// A panic's payload (what [`JoinError::into_panic`](crate::JoinError::into_panic) gives).
pub type Payload = Box<dyn Any + Send>;
