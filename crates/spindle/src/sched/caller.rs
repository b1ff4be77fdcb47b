//! Who is making a blocking-style call: a fiber (it parks), a plain thread (it blocks), or
//! code on a worker outside any fiber, that is an async task or the loop itself.
//!
//! Invariant: **a blocking-style call never blocks a worker.** From a fiber it parks the
//! fiber; from a plain thread it blocks that thread; from an async task it panics (at the
//! caller's line, through `#[track_caller]`) with a message that names the async alternative,
//! because blocking there would stall every fiber and task of the worker. Every blocking-style
//! entry point (`time::sleep`, socket reads and writes, file system calls, child waits, joins,
//! channel and lock waits) asks [`blocking_caller`] first; `park::park_on` asks it for the rest.
//! The waits whose fast path takes no park (channels, locks, wait groups, semaphores, ...)
//! ask [`check_entry`] on entry, which checks in builds with debug assertions.

use super::worker::{self, Worker};

/// Where a blocking-style call runs.
pub(crate) enum Caller {
    /// In a fiber on this worker: park the fiber.
    Fiber(&'static Worker),
    /// On a thread that is not a spindle worker: block the thread.
    Thread,
}

/// Classifies the caller of the blocking-style call `call`.
///
/// # Panics
///
/// On a spindle worker outside a fiber (an async task), naming the async alternative.
///
/// Inlined (every join, park and blocking wait asks), the panic out of line.
#[inline]
#[track_caller]
pub(crate) fn blocking_caller(call: &str) -> Caller {
    match worker::current() {
        Some(w) if w.in_fiber() => Caller::Fiber(w),
        Some(_) => from_a_task(call),
        None => Caller::Thread,
    }
}

/// The check at the entry of a blocking-style wait that looks only when it would park
/// (channels, locks, wait groups, ...): in builds with debug assertions, a call from an async
/// task panics at once, whether or not it would have waited (so that the misuse shows on the
/// first run, not only under contention); release builds check only when the call parks.
#[inline(always)]
#[track_caller]
pub(crate) fn check_entry(call: &str) {
    if cfg!(debug_assertions) {
        let _ = blocking_caller(call);
    }
}

/// The panic of [`blocking_caller`] in an async task.
#[cold]
#[inline(never)]
#[track_caller]
fn from_a_task(call: &str) -> ! {
    panic!(
        "spindle: `{call}` is a blocking-style call and was made from an async task on a spindle worker, \
         where it would stall every fiber and task of that worker; use {} instead",
        async_alternative(call)
    )
}

/// The async counterpart of a blocking-style call, for the panic message.
fn async_alternative(call: &str) -> &'static str {
    match call.trim_end_matches(" (with timeout)") {
        "sleep" => "`spindle::time::sleep_future(duration).await` (or `sleep_until_future`)",
        "socket read" | "socket write" => {
            "the socket's async I/O: `futures::AsyncReadExt::read` / `AsyncWriteExt::write_all` \
             (spindle sockets implement futures-io's AsyncRead and AsyncWrite), or hyper's rt traits"
        }
        "join" | "join (with timeout)" | "task join" | "spawn_blocking join" => {
            "`handle.await` (join handles are futures), with `spindle::time::timeout` for a deadline"
        }
        "select!" => "`spindle::select_async!` (the same branches, awaited)",
        "timeout_fiber" => "`spindle::time::timeout(duration, future).await`",
        "DNS lookup" => {
            "`Resolver::lookup_async(host).await` or `spindle::net::lookup_host_async(addr).await`"
        }
        "signal recv" => "`Signal::recv_async().await`",
        "shutdown" | "shutdown drain" => "`ShutdownToken::triggered().await`",
        "tokio bridge wait" => "`.await` on the `Bridged` future (`spindle::compat::spawn(future).await`)",
        "block_on (future pending)" => "`.await` on the future itself",
        "fs::read_dir" => "`spindle::fs::read_dir_async(path).await` and `ReadDir::next_entry_async().await`",
        "fs::File read" | "fs::File write" | "fs::File seek" | "fs::File flush" => {
            "`spindle::fs::File`'s futures-io traits (`AsyncRead`, `AsyncWrite`, `AsyncSeek`: \
             `futures::AsyncReadExt::read`, `AsyncWriteExt::write_all`, …)"
        }
        c if c.starts_with("fs::") => {
            "the `_async` form of the same `spindle::fs` call (`spindle::fs::read_async(path).await`, \
             `File::open_async(path).await`, `file.sync_all_async().await`, …)"
        }
        "child wait" => "`Child::wait_async().await` (or `wait_with_output_async`, `Command::status_async`)",
        "pipe read" | "pipe write" => {
            "the pipe's async I/O: `futures::AsyncReadExt::read` / `AsyncWriteExt::write_all` \
             (spindle's `ChildStdin`, `ChildStdout` and `ChildStderr` implement futures-io's \
             AsyncRead and AsyncWrite)"
        }
        "channel recv" | "channel send" | "oneshot recv" | "mutex lock" | "wait group"
        | "semaphore acquire" | "rwlock read" | "rwlock write" | "notify" | "barrier" | "broadcast recv"
        | "watch changed" | "condvar" => {
            "the primitive's async form (`recv_async`, `send_async`, `.await` on a oneshot receiver, \
             `lock_async`, `read_async`/`write_async`, `acquire_async`, `notified`, `wait_async`, \
             `changed_async`; `spindle::select_async!`), or move the blocking code into a fiber \
             (`spindle::spawn`)"
        }
        _ => "a future and `.await`, or move the blocking code into a fiber (`spindle::spawn`)",
    }
}
