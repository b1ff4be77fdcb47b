//! Thin, safe wrappers over the Linux system calls the reactor needs (epoll, eventfd).
//! Everything platform-specific lives here; the reactor above it is plain Rust.

pub(crate) mod epoll;
pub(crate) mod malloc;
