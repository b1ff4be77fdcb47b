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
mod pool;
mod queue;

pub use dir::{read_dir, read_dir_async, DirEntry, ReadDir, READ_DIR_BATCH};
pub use file::{File, OpenOptions, MAX_IO_BYTES};
pub use ops::*;
pub use std::fs::{FileType, Metadata, Permissions};
