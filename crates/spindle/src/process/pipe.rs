//! A child's piped standard streams on the parent's side: [`ChildStdin`], [`ChildStdout`] and
//! [`ChildStderr`], non-blocking pipe ends that wait on the reactor as sockets do.
//!
//! # Invariants
//!
//! - **Only the parent's end is non-blocking.** std's `Command` makes each pipe with
//!   `pipe2(O_CLOEXEC)` and hands the child its own end; `O_NONBLOCK` is then set on the
//!   parent's end alone. The two ends are separate open file descriptions, so the child's
//!   stays blocking. An end given to another child ([`Stdio`] from one of these types) is
//!   switched back to blocking mode first (`into_owned_fd`).
//! - The end is an `IoSource` (module `net::source`): registered with the reactor at the first
//!   call that would block, waited on by parking the fiber or by the task's waker, and by
//!   `poll(2)` on a plain thread. Reads and writes are plain `read(2)`/`write(2)`.
//! - A write to a pipe whose reader has gone fails with `BrokenPipe` if `SIGPIPE` is ignored
//!   (Rust programs ignore it by default) and raises `SIGPIPE` otherwise, as std's does.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::process::Stdio;
use std::task::{Context, Poll};

use socket2::Socket;

use crate::net::IoSource;
use crate::reactor::io::Direction;
use crate::sched::caller::blocking_caller;
use crate::sys::nocancel;

/// The parent's end of a pipe, switched to non-blocking mode.
fn pipe_end(fd: OwnedFd) -> io::Result<IoSource> {
    IoSource::new(Socket::from(fd), false)
}

/// The descriptor of `source` in blocking mode, for a child to inherit: a duplicate
/// (close-on-exec, as std wants it), made blocking before this end deregisters and closes.
fn into_blocking_fd(source: IoSource) -> io::Result<OwnedFd> {
    let dup = source.socket().try_clone()?;
    // The flag belongs to the open file description, which the duplicate shares.
    dup.set_nonblocking(false)?;
    drop(source);
    Ok(OwnedFd::from(dup))
}

/// A blocking-style read: parks the fiber until the pipe has data or is closed.
#[track_caller]
fn read(source: &IoSource, buf: &mut [u8]) -> io::Result<usize> {
    blocking_caller("pipe read");
    source.blocking(Direction::Read, None, |s| nocancel::read(s.as_raw_fd(), buf))
}

fn poll_read(source: &IoSource, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
    source.poll_io(cx, Direction::Read, |s| nocancel::read(s.as_raw_fd(), buf))
}

/// Reads the rest of the pipe into `out` (the future side of `read_to_end`): `Ready(Ok)` at
/// end of stream. What was read before a `Pending` stays in `out`.
pub(super) fn poll_read_to_end(
    source: &IoSource,
    cx: &mut Context<'_>,
    out: &mut Vec<u8>,
) -> Poll<io::Result<()>> {
    loop {
        if out.capacity() - out.len() < 4096 {
            out.reserve(32 * 1024);
        }
        let start = out.len();
        out.resize(out.capacity(), 0);
        let polled = poll_read(source, cx, &mut out[start..]);
        let n = match &polled {
            Poll::Ready(Ok(n)) => *n,
            _ => 0,
        };
        out.truncate(start + n);
        match polled {
            Poll::Ready(Ok(0)) => return Poll::Ready(Ok(())),
            Poll::Ready(Ok(_)) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
    }
}

/// The write end of the child's standard input. `Write` parks the fiber while the pipe is
/// full; tasks use `futures-io`'s `AsyncWrite`. Dropping it closes the pipe: the child reads
/// end of file.
#[derive(Debug)]
pub struct ChildStdin {
    source: IoSource,
}

/// The read end of the child's standard output. `Read` parks the fiber while the pipe is
/// empty; tasks use `futures-io`'s `AsyncRead`.
#[derive(Debug)]
pub struct ChildStdout {
    pub(super) source: IoSource,
}

/// The read end of the child's standard error, as [`ChildStdout`].
#[derive(Debug)]
pub struct ChildStderr {
    pub(super) source: IoSource,
}

impl ChildStdin {
    /// Takes over std's pipe end (switching it to non-blocking mode).
    pub fn from_std(stdin: std::process::ChildStdin) -> io::Result<ChildStdin> {
        Ok(ChildStdin { source: pipe_end(stdin.into())? })
    }

    /// The descriptor, in blocking mode again (to hand to a child or to std).
    pub fn into_owned_fd(self) -> io::Result<OwnedFd> {
        into_blocking_fd(self.source)
    }
}

impl ChildStdout {
    /// Takes over std's pipe end (switching it to non-blocking mode).
    pub fn from_std(stdout: std::process::ChildStdout) -> io::Result<ChildStdout> {
        Ok(ChildStdout { source: pipe_end(stdout.into())? })
    }

    /// The descriptor, in blocking mode again (to hand to a child or to std).
    pub fn into_owned_fd(self) -> io::Result<OwnedFd> {
        into_blocking_fd(self.source)
    }
}

impl ChildStderr {
    /// Takes over std's pipe end (switching it to non-blocking mode).
    pub fn from_std(stderr: std::process::ChildStderr) -> io::Result<ChildStderr> {
        Ok(ChildStderr { source: pipe_end(stderr.into())? })
    }

    /// The descriptor, in blocking mode again (to hand to a child or to std).
    pub fn into_owned_fd(self) -> io::Result<OwnedFd> {
        into_blocking_fd(self.source)
    }
}

crate::net::impl_as_fd!(ChildStdin, ChildStdout, ChildStderr);

/// A pipe end as the standard stream of another child (`a | b`): in blocking mode, as the
/// child expects it.
impl TryFrom<ChildStdout> for Stdio {
    type Error = io::Error;
    fn try_from(stdout: ChildStdout) -> io::Result<Stdio> {
        stdout.into_owned_fd().map(Stdio::from)
    }
}

/// See the `ChildStdout` conversion.
impl TryFrom<ChildStderr> for Stdio {
    type Error = io::Error;
    fn try_from(stderr: ChildStderr) -> io::Result<Stdio> {
        stderr.into_owned_fd().map(Stdio::from)
    }
}

/// See the `ChildStdout` conversion.
impl TryFrom<ChildStdin> for Stdio {
    type Error = io::Error;
    fn try_from(stdin: ChildStdin) -> io::Result<Stdio> {
        stdin.into_owned_fd().map(Stdio::from)
    }
}

impl io::Write for ChildStdin {
    /// Writes what the pipe takes now, parking the fiber while it is full.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use `futures-io`'s `AsyncWrite` there.
    #[track_caller]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        blocking_caller("pipe write");
        self.source.blocking(Direction::Write, None, |s| nocancel::write(s.as_raw_fd(), buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl io::Read for ChildStdout {
    /// Reads what the pipe holds, parking the fiber while it is empty; `Ok(0)` once the child
    /// closed its end (usually: exited).
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use `futures-io`'s `AsyncRead` there.
    #[track_caller]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read(&self.source, buf)
    }
}

impl io::Read for ChildStderr {
    /// As [`ChildStdout`]'s.
    #[track_caller]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read(&self.source, buf)
    }
}

impl futures_io::AsyncWrite for ChildStdin {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.source.poll_io(cx, Direction::Write, |s| nocancel::write(s.as_raw_fd(), buf))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Nothing to do: the pipe closes when the `ChildStdin` is dropped.
    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl futures_io::AsyncRead for ChildStdout {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        poll_read(&self.source, cx, buf)
    }
}

impl futures_io::AsyncRead for ChildStderr {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        poll_read(&self.source, cx, buf)
    }
}
