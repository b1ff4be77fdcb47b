//! Files and directories for fibers and tasks: the `std::fs` surface (and `tokio::fs`'s), with
//! every system call run on the runtime's file pool while the caller parks.
//!
//! Linux offers no readiness for regular files (epoll refuses them, and a read of a cold page
//! waits for the disk whatever `O_NONBLOCK` says), so a file operation cannot wait on the
//! reactor as a socket does: it runs as a job on the runtime's file pool, a pool of threads
//! like [`spawn_blocking`](crate::spawn_blocking)'s but smaller
//! ([`Builder::max_file_threads`](crate::Builder::max_file_threads)).
//!
//! - **Fibers** call the blocking-style functions ([`read`], [`write()`], [`File::open`],
//!   `Read`/`Write`/`Seek` on [`File`], iteration of [`ReadDir`], …): the fiber parks while
//!   the job runs, and its worker runs other fibers and tasks meanwhile.
//! - **Async tasks** use the `*_async` forms ([`read_async`], [`File::open_async`],
//!   [`ReadDir::next_entry_async`], …) and `futures-io`'s `AsyncRead`, `AsyncWrite` and
//!   `AsyncSeek` on [`File`].
//!
//! ```
//! let dir = std::env::temp_dir().join(format!("spindle-fs-doc-{}", std::process::id()));
//! let rt = spindle::Runtime::new().unwrap();
//! let text = rt.block_on(move || {
//!     spindle::fs::create_dir_all(&dir)?;
//!     spindle::fs::write(dir.join("greeting"), "hello")?;
//!     let text = spindle::fs::read_to_string(dir.join("greeting"))?;
//!     spindle::fs::remove_dir_all(&dir)?;
//!     std::io::Result::Ok(text)
//! });
//! assert_eq!(text.unwrap(), "hello");
//! ```

// # Invariants
//
// - **Never on a worker.** On a spindle worker every file system call runs on the runtime's
//   file pool (module `blocking`'s pool, sized by `Builder::max_file_threads`), never on the
//   worker thread. Off a worker (a plain thread, which stalls nobody) the calls
//   run on the calling thread, as std's do.
// - **A blocking-style call from an async task panics** at the caller's line, naming the
//   async form (module `sched::caller`): it would stall every fiber and task of the worker.
// - **Errors are std's.** Each job calls the `std::fs` function of the same name, so results
//   and `io::ErrorKind`s are exactly std's.
// - **One hop per call**, not per byte or per entry: [`read`] of a large file is one job, and
//   [`ReadDir`] reads entries in batches of [`READ_DIR_BATCH`] per job.
// - **A [`File`]'s operations run one at a time, in the order they were started** (module
//   `file`): a `File` shared by two fibers, or an async operation abandoned half-way, never
//   reorders or interleaves its reads, writes and seeks.
// - **A started operation completes.** A thread cannot be interrupted, so a job that began
//   runs to its end even if the fiber that waits for it is cancelled or the future that
//   started it is dropped; its result is then discarded.
// - **Shutdown.** A job still queued when its runtime shuts down does not run; its caller gets
//   an error (`io::ErrorKind::Other`, "runtime shut down").

mod dir;
mod file;
mod ops;
mod queue;

pub use dir::{read_dir, read_dir_async, DirEntry, ReadDir, READ_DIR_BATCH};
pub use file::{File, OpenOptions, MAX_IO_BYTES};
pub use ops::*;
pub use std::fs::{FileType, Metadata, Permissions};

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
        Caller::Fiber(_) => match crate::runtime::services() {
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
fn on_worker_pool() -> Option<std::sync::Arc<crate::runtime::Services>> {
    crate::sched::worker::current()?;
    crate::runtime::services()
}

/// A pool job's outcome as an I/O result: a panic in the job resumes in the caller; a job
/// cancelled by the runtime's shutdown is an error.
fn joined<T>(result: Result<io::Result<T>, JoinError>) -> io::Result<T> {
    match result {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(shut_down()),
    }
}

/// The error of an operation that never ran because its runtime shut down.
fn shut_down() -> io::Error {
    io::Error::other("the spindle runtime shut down before the file operation ran")
}
