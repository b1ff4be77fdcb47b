//! The hop to the runtime's file pool that every file operation makes (module `fs`'s
//! invariants "never on a worker", "a started operation completes" and "shutdown"):
//! blocking-style on a fiber, as a future in an async task, inline off a worker.

use std::io;

use crate::error::JoinError;
use crate::sched::caller::{blocking_caller, Caller};

/// Runs `job` blocking-style for the call named `call`: on the file pool while the fiber
/// parks, or on the calling thread off a worker.
///
/// # Panics
///
/// In an async task on a spindle worker, naming the async form.
#[track_caller]
pub(crate) fn offload<T, F>(call: &'static str, job: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    match blocking_caller(call) {
        Caller::Thread => job(),
        Caller::Fiber(_) => match crate::services::services() {
            Some(services) => joined(services.files.spawn(job).join()),
            None => job(),
        },
    }
}

/// The future-side [`offload`]: the job starts on the file pool at the first poll on a
/// spindle worker, and runs inline at the first poll anywhere else.
pub(crate) async fn offload_async<T, F>(job: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    match on_worker_pool() {
        Some(services) => joined(services.files.spawn(job).await),
        None => job(),
    }
}

/// The runtime services whose file pool takes jobs from the caller: `Some` on a spindle
/// worker, `None` on a plain thread (whose jobs run inline).
pub(super) fn on_worker_pool() -> Option<std::sync::Arc<crate::services::Services>> {
    crate::sched::worker::current()?;
    crate::services::services()
}

/// A pool job's outcome as an I/O result: a panic in the job resumes in the caller; a job
/// cancelled by the runtime's shutdown is an error.
pub(super) fn joined<T>(result: Result<io::Result<T>, JoinError>) -> io::Result<T> {
    match result {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(shut_down()),
    }
}

/// The error of an operation that never ran because its runtime shut down.
pub(super) fn shut_down() -> io::Error {
    io::Error::other("the spindle runtime shut down before the file operation ran")
}
