//! hyper's executors for HTTP/2 connections: each stream's future becomes a spindle task.
//!
//! - [`TaskExec`] (the server): a `Send` task, which any idle worker may poll. The server's
//!   connection is itself a `Send` task that moves between workers; its streams go wherever
//!   a worker is free, so that one busy stream does not hold up the others.
//! - [`LocalExec`] (the client): a task pinned to the current worker. Invariant: **a client
//!   connection and its streams share one worker.** The client's connection future is a
//!   pinned task (`spawn_local`), and hyper calls the executor from it, so its stream futures
//!   need not be `Send`.

use std::future::Future;

/// Spawns hyper's per-stream futures as `Send` tasks of the current runtime.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TaskExec;

impl<F> hyper::rt::Executor<F> for TaskExec
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        drop(spindle::task::spawn_async(future));
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
