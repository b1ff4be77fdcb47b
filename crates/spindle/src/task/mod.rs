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

// Rooms: `raw` (the task cell: header, vtable, waker, future, home, output), `spawn` (the
// spawn functions), `join` (the [`JoinHandle`]), `yield_now` (`block_on` is
// `park::block_on`, re-exported here),
// `join_set` ([`JoinSet`]), `join_macros` (`join!` and friends), `local` (`task_local!`;
// its macros in `local_macros`). The state word (lifecycle, join bits, abort and
// registration flags, reference count) is module `sched::task_state`, loom-checked, and the
// header and counted reference module `sched::task_ref`: the scheduler sees tasks only as
// `TaskRef`s.
//
// # Invariants
//
// - **One poller at a time** and **one queue entry**: module `sched::task_state`. Whoever moves a
//   task `IDLE → SCHEDULED` queues it, exactly once: on the current worker's stealable queue
//   or LIFO slot (a `Send` task woken on a worker), the runtime's task injector (woken from
//   elsewhere), or its home worker's local queue, LIFO slot or inbox (a pinned task). The
//   LIFO slot is not stealable (module `sched::worker`, "LIFO slots").
// - **Exactly one canceller.** A task that returned `Pending` once is registered in the live
//   list of the worker that polled it (a pinned task: of its home, at spawn). At shutdown each
//   worker cancels its live list and its queues: it claims each task (`sched::task_state`'s claim,
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

mod builder;
mod join;
/// What the join macros expand to; not a public API.
#[doc(hidden)]
pub mod join_macros;
mod join_set;
mod local;
mod local_macros;
mod raw;
pub(crate) mod spawn;
pub(crate) mod yield_now;

pub use crate::park::block_on::block_on;
pub use builder::Builder;
pub use join::{JoinHandle, Payload};
pub use join_set::{JoinNext, JoinSet};
pub use local::{AccessError, LocalKey, TaskLocalFuture};
pub use spawn::{spawn_async, spawn_eager, spawn_local};
pub use yield_now::{yield_now, YieldNow};
