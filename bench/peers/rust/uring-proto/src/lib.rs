//! **PROTOTYPE, not part of spindle** (issue 17 item 4, "io_uring, measured"): a minimal
//! fiber runtime with two interchangeable I/O backends, so that what io_uring batching would
//! gain a spindle-shaped runtime can be measured on the same code.
//!
//! - [`rt`]: stackful fibers (corosensei, 256 KiB stacks reused), one run queue and one I/O
//!   driver per thread, run in passes: resume the ready fibers, then one driver turn.
//! - `epoll`: readiness as spindle's reactor does it (try the syscall, on `EAGAIN` register
//!   edge-triggered once and park).
//! - `uring`: completions; every operation is a submission entry and one `io_uring_enter` per
//!   pass submits them all (and waits when no fiber is ready); optional multishot accept and
//!   multishot recv from a provided buffer ring (`bufring`); `SINGLE_ISSUER | DEFER_TASKRUN`
//!   optional.
//! - [`net`]: blocking-style `TcpListener` / `TcpStream` for fibers on either driver.
//!
//! Left out on purpose (see docs/ARCHITECTURE.md): timers, cancellation of a single
//! operation (a timed-out read), several threads sharing work, IPv6.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod bufring;
mod epoll;
pub mod net;
pub mod rt;
mod uring;

pub use rt::{block_on, spawn, Backend, JoinHandle};
pub use uring::nobufs_fallbacks;
