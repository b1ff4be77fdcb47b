//! Go's promise for code spindle did not write (feature `hook`): the libc calls that `std`
//! and sync crates make to wait — socket I/O, `connect`, `accept`, `poll`, `select`,
//! `epoll_wait`, the sleeps, and the file calls that may wait for the disk — park the calling
//! fiber instead of blocking its worker.
//!
//! spindle defines these functions itself (`#[no_mangle]`, the C names), so that the program's
//! own calls, and those of every Rust crate linked into it, reach spindle's definition
//! instead of glibc's; spindle's definition passes a call on to glibc's (found with
//! `dlsym(RTLD_NEXT)`, module `real`) unless it is made on a spindle fiber and would wait.
//!
//! # Rules
//!
//! - **Off a fiber, the call is glibc's.** On a plain thread, in an async task, in the
//!   blocking pool, in a signal handler: the call goes to glibc unchanged (one thread-local
//!   read and an indirect call more).
//! - **The descriptor's state is the caller's.** spindle never switches a socket to
//!   non-blocking mode behind the caller's back: a fiber's waiting call is made non-blocking
//!   for that one call (`MSG_DONTWAIT` on the `recv`/`send` family, which `read`/`write` on a
//!   socket become; `O_NONBLOCK` set and restored around a `connect` or an `accept`). So a
//!   plain thread using the same socket, and a child process that inherits it, see exactly
//!   the blocking or non-blocking state the program asked for.
//! - **Blocking semantics, parked.** A socket the program left blocking waits for readiness
//!   on spindle's reactor (module `reactor::registration`) and then retries; `SO_RCVTIMEO` /
//!   `SO_SNDTIMEO` bound the wait as the kernel's would (`EAGAIN` when they expire, the
//!   bytes moved so far when some were); a stream `send` returns once every byte went out,
//!   as a blocking one does; `errno` is the kernel's. A socket the program made non-blocking
//!   (`SOCK_NONBLOCK`, `O_NONBLOCK`, `FIONBIO`) gets `EAGAIN` as before.
//! - **Sockets and waits on the reactor.** `poll`, `select` and `epoll_wait` park on any
//!   descriptor the kernel can watch with epoll (an epoll descriptor among them: a crate that
//!   runs its own event loop on the calling thread, such as the sync `postgres` crate's tokio
//!   runtime, parks the fiber in it).
//! - **Files on the file pool.** Files have no readiness: a fiber's `open`, `stat`, `fsync`,
//!   and a read or write of a regular file or block device that would wait, run on the
//!   runtime's file pool while the fiber parks (module `file`; module `offload`, which holds
//!   the fiber in the call until the pool thread is done with the caller's memory, even when
//!   the fiber is cancelled meanwhile). Reads of cached pages up to a small size happen on the
//!   worker without waiting (`RWF_NOWAIT`).
//! - **Other descriptors pass through.** `read` and `write` on pipes, FIFOs, terminals and
//!   character devices are glibc's, and block the worker when they wait.
//! - **No unwinding into C.** A fiber cancelled while parked in one of these calls does not
//!   unwind through the C frame: the call fails with `ECANCELED` (a sleep returns as if it
//!   had slept), as does every later socket wait or sleep of that fiber, and the fiber
//!   unwinds at its next park in spindle's own code. Its file calls still run (module
//!   `offload`): they end on their own, and the destructors that run while it unwinds may
//!   need them.
//! - **Signals do not interrupt a parked call.** A fiber parked here is not woken by a signal
//!   delivered to its worker thread (spindle's `signal` module is the way to handle them).
//!
//! # What is not covered
//!
//! - Calls made as raw system calls (`syscall(2)`), and by C libraries linked as shared
//!   objects (they resolve glibc's symbols, unless the program exports spindle's with
//!   `-C link-arg=-rdynamic`); a statically linked libc (musl) is not interposed at all.
//! - Descriptors numbered past the table ([`fd::TABLE_SIZE`]) pass through.
//! - The descriptor table knows what the interposed calls tell it: a socket's non-blocking
//!   flag or timeouts changed through a raw system call, or a descriptor closed that way and
//!   reused, can make a fiber's call wait when the kernel would not (or the reverse).
//! - Pipes, FIFOs and terminals (`std::process`'s pipes among them: use `spindle::process`),
//!   `waitpid`, directory reads, std's `metadata` (a `statx` looked up dynamically, which
//!   finds glibc's), `copy_file_range`, `ftruncate` and `fallocate` block the worker: use
//!   `spindle::fs`, `spindle::process` or `spindle::spawn_blocking` for them.
//! - A started file call delays its runtime's shutdown until it returns (a thread cannot be
//!   interrupted), as it would delay a thread's exit.
//! - `std::sync` locks and any lock held across a park remain the program's rule to keep.
//! - Per-thread state of other libraries stays per thread. A sync crate that drives a tokio
//!   runtime of its own inside each call (the sync `postgres` crate: its `Client` calls that
//!   runtime's `block_on`) parks the fiber in that runtime's `epoll_wait`, but tokio records
//!   "inside a runtime" per thread: a second fiber of the worker that calls such a crate
//!   while the first is parked in it panics ("Cannot start a runtime from within a runtime").
//!   One such fiber per worker at a time works.
//! - `ppoll`, `pselect` and `epoll_pwait` with a signal mask pass through (a parked fiber
//!   cannot take a signal mask).

mod common;
mod fd;
mod file;
pub(crate) mod interposed;
mod iov;
mod offload;
mod poll;
mod real;
mod sleep;
mod socket;
mod transfer;
mod wait;
