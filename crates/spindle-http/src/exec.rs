//! hyper's executors for HTTP/2 connections: each stream's future becomes a spindle task.
//!
//! - [`TaskExec`] (the server): a `Send` task, which any idle worker may poll. The server's
//!   connection is itself a `Send` task that moves between workers; its streams go wherever
//!   a worker is free, so that one busy stream does not hold up the others. On a runtime of
//!   one worker, where no other worker could take a stream, its first poll happens at once
//!   inside the connection's poll (`spindle::task::spawn_eager`): a handler that answers at
//!   once has its response queued while the connection is still being polled, which writes
//!   it in the same pass instead of being woken for it (h2c hello, callgrind: 31,277 ->
//!   30,550 instructions a request).
//! - [`LocalExec`] (the client): a task pinned to the current worker. Invariant: **a client
//!   connection and its streams share one worker.** The client's connection future is a
//!   pinned task (`spawn_local`), and hyper calls the executor from it, so its stream futures
//!   need not be `Send`.

use std::future::Future;

/// Spawns hyper's per-stream futures as `Send` tasks of the current runtime, eagerly
/// (`spindle::task::spawn_eager`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TaskExec;

impl<F> hyper::rt::Executor<F> for TaskExec
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        drop(spindle::task::spawn_eager(future));
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
