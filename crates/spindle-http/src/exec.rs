//! hyper's executors for HTTP/2 connections: each stream's future becomes a spindle task.
//!
//! - [`TaskExec`] (the server): a `Send` task, which any idle worker may poll. The server's
//!   connection is itself a `Send` task that moves between workers; its streams go wherever
//!   a worker is free, so that one busy stream does not hold up the others. On a runtime of
//!   one worker, where no other worker could take a stream, and with no other task queued,
//!   its first poll happens at once inside the connection's poll (eager): a handler that
//!   answers at once has its response queued while the connection is still being polled,
//!   which writes it in the same pass instead of being woken for it (`docs/perf/http.md`,
//!   "HTTP/2: eager first polls").
//! - **Batched streams and connections.** Stream tasks, like the connection tasks
//!   (`accept`), are batched (`spindle::task::Builder::batched`): their wake-ups go to the
//!   back of the worker's queue, not the LIFO slot. Under load (many connections ready at
//!   once) the worker then runs its queue in phases (the connections' polls, then the
//!   streams', then the connections' again) instead of each request's whole path in turn,
//!   and each phase's code stays in the instruction cache (`docs/decisions/008-batched-tasks.md`;
//!   figures in `docs/perf/scheduler.md`, "Batched tasks").
//! - [`LocalExec`] (the client): a task pinned to the current worker. Invariant: **a client
//!   connection and its streams share one worker.** The client's connection future is a
//!   pinned task (`spawn_local`), and hyper calls the executor from it, so its stream futures
//!   need not be `Send`.

use std::future::Future;

/// Spawns hyper's per-stream futures as `Send` tasks of the current runtime, eager and
/// batched (module doc).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TaskExec;

impl<F> hyper::rt::Executor<F> for TaskExec
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        drop(spindle::task::Builder::new().eager(true).batched(true).spawn(future));
    }
}

/// Spawns hyper's per-stream futures as tasks on the current spindle worker.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LocalExec;

impl<F> hyper::rt::Executor<F> for LocalExec
where
    F: Future<Output = ()> + 'static,
{
    fn execute(&self, future: F) {
        drop(spindle::task::spawn_local(future));
    }
}
