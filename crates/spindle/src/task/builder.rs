//! [`Builder`]: how a `Send` task is spawned: whether its first poll may happen at once
//! (eager) and whether its wake-ups skip the LIFO slot (batched).
//!
//! Invariants: the module `task` doc's "eager first polls take nothing from anyone" and the
//! module `sched::worker` doc's "LIFO slots" and "batched tasks".

use std::future::Future;

use super::join::JoinHandle;
use super::raw::{Home, Task};
use crate::sched::worker::{self, Queued};

/// Options for spawning a `Send` task on the current runtime; [`spawn_async`](super::spawn_async)
/// and [`spawn_eager`](super::spawn_eager) are its two common settings.
///
/// ```
/// let rt = spindle::runtime::Builder::new().worker_threads(1).build().unwrap();
/// let n = rt.spawn_async(async {
///     // A task that gathers what others produce (a connection writing its streams'
///     // frames) does more per poll when it runs after the tasks already queued.
///     let writer = spindle::task::Builder::new().batched(true).spawn(async { 2 });
///     writer.await.unwrap() * 21
/// });
/// assert_eq!(n.join().unwrap(), 42);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Builder {
    eager: bool,
    batched: bool,
}

impl Builder {
    /// A plain task: queued at spawn, woken into its worker's LIFO slot.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Whether the first poll may happen at once, inside the calling task's poll, when that
    /// takes nothing from anyone (see [`spawn_eager`](super::spawn_eager) for when).
    pub fn eager(mut self, eager: bool) -> Builder {
        self.eager = eager;
        self
    }

    /// Whether the task's wake-ups go to the back of its worker's queue instead of the LIFO
    /// slot, so that it runs after the tasks already waiting, as on a FIFO scheduler. For
    /// tasks that gather work from others: a connection woken by each of its streams then
    /// writes their frames together, and under load a worker runs its queue in phases
    /// (every connection, then every stream), which keeps each phase's code in the
    /// instruction cache. A message's receiver should not be batched: behind busy tasks it
    /// answers later.
    pub fn batched(mut self, batched: bool) -> Builder {
        self.batched = batched;
        self
    }

    /// Spawns `future` as a task that any worker of the current runtime may poll (the future
    /// must be `Send`, as for [`spawn_async`](super::spawn_async)).
    ///
    /// # Panics
    ///
    /// Outside a spindle runtime (use [`crate::Runtime::spawn_async`] there).
    #[track_caller]
    pub fn spawn<F>(self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let worker =
            worker::current().expect("spindle::task::Builder::spawn called outside a spindle runtime");
        let task = Task::allocate(Home::Any(worker.rt.clone()), future, false, self.batched);
        if !(self.eager && worker.poll_eager(&task)) {
            task.schedule(Queued::Back);
        }
        JoinHandle::new(task)
    }
}
