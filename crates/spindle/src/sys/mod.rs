//! Thin, safe wrappers over the Linux system calls the reactor needs (epoll, eventfd), and
//! the hot socket calls without glibc's cancellation wrappers (`nocancel`).
//! Everything platform-specific lives here; the reactor above it is plain Rust.

pub(crate) mod coarse_clock;
pub(crate) mod epoll;
pub(crate) mod malloc;
pub(crate) mod nocancel;
