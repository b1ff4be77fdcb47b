//! Spawning tasks: on the runtime ([`spawn_async`], [`spawn_eager`]), on the current worker
//! ([`spawn_local`]), and from inside the crate on a given runtime or worker.

use std::future::Future;
use std::sync::Arc;

use super::builder::Builder;
use super::join::JoinHandle;
use super::raw::{Home, Pinned, Task};
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
    let task = Task::allocate(home, Pinned(future), true, false);
    worker.register_task(task.clone());
    task.schedule(Queued::Back);
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
    let task = Task::allocate(Home::Any(rt), future, false, false);
    task.schedule(Queued::Back);
    JoinHandle::new(task)
}

/// Spawns a `Send` task that only `home` runs (from any thread).
pub(crate) fn spawn_pinned<F>(home: Arc<WorkerShared>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let task = Task::allocate(Home::Pinned(home), future, false, false);
    task.schedule(Queued::Back);
    JoinHandle::new(task)
}
