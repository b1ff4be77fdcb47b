//! [`LocalExec`]: hyper's executor for HTTP/2 connections, spawning each stream's future as a
//! spindle task pinned to the connection's worker.
//!
//! Invariant: **a connection and its streams share one worker.** hyper's HTTP/2 server calls
//! the executor from the connection future, which the connection fiber polls; the stream
//! futures (the handler's response future and the response body) are spawned with
//! `spindle::task::spawn_local`, so they need not be `Send` (an async handler's future is
//! `!Send`, and the per-connection counters are `Rc`s) and never leave that worker.

use std::future::Future;

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
