//! `IoSource`: a non-blocking socket plus its (lazy) reactor registration, and the two ways
//! to wait on it: parking the fiber (blocking-style calls) or registering a `Waker` (futures).
//!
//! The descriptor need not be a socket: module `process` wraps a child's pipe ends and its
//! pidfd the same way (held as a `socket2::Socket`, which owns any descriptor and closes it
//! on drop), and reaches them only through the descriptor-generic paths here (`blocking`,
//! `poll_io`, `wait_ready`), never the socket calls (`read_stream`, `recv`, `send`).
//!
//! # Invariants
//!
//! - The socket is always in non-blocking mode; a call that would block returns `WouldBlock`
//!   to this module, never blocks the worker.
//! - A socket is registered with a reactor only when a call first returns `WouldBlock` (a
//!   listener that is bound and dropped costs no `epoll_ctl`), or when a worker has connected
//!   it (`expect_first_read_event`: its first read is then known to wait). The registration
//!   and its homes follow module `reactor::registration`'s invariants ("never a wait on a
//!   dead home", "forgotten before the close": `IoSource`'s drop deregisters).
//! - Outside a spindle worker (a plain thread) a blocking-style call waits with `poll(2)` on
//!   the descriptor, so the types work everywhere.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use socket2::Socket;

use super::drain::Drain;
use super::uninit::as_uninit;
use crate::reactor::io::Direction;
use crate::reactor::registration::Registration;
use crate::sched::caller::{blocking_caller, Caller};
use crate::sched::worker;
use crate::sys::nocancel;

/// A non-blocking socket and its reactor registration.
pub(crate) struct IoSource {
    socket: Socket,
    registration: OnceLock<Registration>,
    /// Read and write timeouts in nanoseconds; `u64::MAX` = none.
    read_timeout: AtomicU64,
    write_timeout: AtomicU64,
    /// Per direction, `BLOCKED | seq` when the last attempt returned `WouldBlock` with that
    /// readiness sequence number: until it moves (a new readiness event), another attempt would return
    /// `WouldBlock` again, so the call waits without making the system call.
    read_blocked: AtomicU32,
    write_blocked: AtomicU32,
    /// Whether a full read can ask the kernel if it drained the socket (module `drain`).
    drain: Drain,
}

/// Marks a valid entry of `read_blocked` / `write_blocked` (sequence numbers have 31 bits).
const BLOCKED: u32 = 1 << 31;

const NO_TIMEOUT: u64 = u64::MAX;

impl std::fmt::Debug for IoSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoSource").field("fd", &self.socket.as_raw_fd()).finish()
    }
}

impl IoSource {
    /// Wraps a socket, switching it to non-blocking mode if `already_nonblocking` is false.
    pub(crate) fn new(socket: Socket, already_nonblocking: bool) -> io::Result<IoSource> {
        if !already_nonblocking {
            socket.set_nonblocking(true)?;
        }
        Ok(IoSource {
            socket,
            registration: OnceLock::new(),
            read_timeout: AtomicU64::new(NO_TIMEOUT),
            write_timeout: AtomicU64::new(NO_TIMEOUT),
            read_blocked: AtomicU32::new(0),
            write_blocked: AtomicU32::new(0),
            drain: Drain::default(),
        })
    }

    pub(crate) fn socket(&self) -> &Socket {
        &self.socket
    }

    pub(crate) fn set_timeout(&self, dir: Direction, timeout: Option<Duration>) -> io::Result<()> {
        if timeout == Some(Duration::ZERO) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a zero timeout is not allowed"));
        }
        let nanos = timeout.map_or(NO_TIMEOUT, |d| u64::try_from(d.as_nanos()).unwrap_or(NO_TIMEOUT - 1));
        self.slot(dir).store(nanos, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn timeout(&self, dir: Direction) -> Option<Duration> {
        match self.slot(dir).load(Ordering::Relaxed) {
            NO_TIMEOUT => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    fn blocked_slot(&self, dir: Direction) -> &AtomicU32 {
        match dir {
            Direction::Read => &self.read_blocked,
            Direction::Write => &self.write_blocked,
        }
    }

    /// Whether an attempt now is known to return `WouldBlock`: the last one did, at the
    /// current readiness sequence number.
    /// Never once a hang-up was seen: edge-triggered epoll reports it only once, and a read
    /// at end of stream returns at once.
    #[inline]
    fn known_blocked(&self, dir: Direction, seen: Option<u32>) -> bool {
        seen.is_some_and(|t| self.blocked_slot(dir).load(Ordering::Relaxed) == BLOCKED | t)
            && !self.registration.get().is_some_and(|r| r.io.is_closed(dir))
    }

    /// Records that an attempt made at sequence number `seen` returned `WouldBlock`.
    #[inline]
    fn note_blocked(&self, dir: Direction, seen: Option<u32>) {
        if let Some(t) = seen {
            self.blocked_slot(dir).store(BLOCKED | t, Ordering::Relaxed);
        }
    }

    fn slot(&self, dir: Direction) -> &AtomicU64 {
        match dir {
            Direction::Read => &self.read_timeout,
            Direction::Write => &self.write_timeout,
        }
    }

    /// The registration, made with the current worker's reactor if there is none yet, and
    /// moved to it if the runtime it was made with has shut down (module
    /// `reactor::registration`). `Ok(None)`: not registered and not on a worker.
    fn registration(&self) -> io::Result<Option<&Registration>> {
        Registration::get_or_register(&self.registration, self.socket.as_raw_fd())
    }

    /// Runs `op` until it does not return `WouldBlock`, waiting for readiness in between
    /// (parking the fiber, or blocking a plain thread in `poll(2)`), honouring the timeout of
    /// `dir` (or `deadline` when given).
    pub(crate) fn blocking<R>(
        &self,
        dir: Direction,
        deadline: Option<Instant>,
        op: impl FnMut(&Socket) -> io::Result<R>,
    ) -> io::Result<R> {
        self.blocking_until_drained(dir, deadline, op, |_| false)
    }

    /// [`blocking`](Self::blocking) for reads and writes that report a length: when `short`
    /// says the call moved less than it was offered (the socket is drained, or full), the next
    /// call waits for a new readiness event instead of trying the system call first.
    pub(crate) fn blocking_until_drained<R>(
        &self,
        dir: Direction,
        deadline: Option<Instant>,
        mut op: impl FnMut(&Socket) -> io::Result<R>,
        short: impl Fn(&R) -> bool,
    ) -> io::Result<R> {
        // A timeout too long for an `Instant` is no deadline.
        let deadline = deadline.or_else(|| self.timeout(dir).and_then(crate::park::wait::deadline_in));
        loop {
            let seen = self.registration.get().map(|r| r.io.seq(dir));
            if self.known_blocked(dir, seen) {
                self.wait(dir, seen, deadline)?;
                continue;
            }
            match op(&self.socket) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.note_blocked(dir, seen);
                    self.wait(dir, seen, deadline)?
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(r) => {
                    if short(&r) {
                        self.note_blocked(dir, seen);
                    }
                    // A fiber whose operations keep completing yields now and then
                    // (`sched::worker::coop`, "bounded between yields").
                    worker::consume_io_budget();
                    return Ok(r);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A stream read: a read that drained the socket (module `drain`) makes the next read
    /// wait for new data instead of paying for an `EAGAIN` first.
    pub(crate) fn read_stream(&self, buf: &mut [u8]) -> io::Result<usize> {
        let buf = as_uninit(buf);
        self.blocking_until_drained(
            Direction::Read,
            None,
            |s| self.drain.recv(s, buf),
            |&(_, drained)| drained,
        )
        .map(|(n, _)| n)
    }

    /// A stream write: a short write means the send buffer is full until the next event.
    pub(crate) fn write_stream(&self, buf: &[u8]) -> io::Result<usize> {
        let len = buf.len();
        self.blocking_until_drained(
            Direction::Write,
            None,
            |s| nocancel::send(s.as_raw_fd(), buf),
            |&n| n < len,
        )
    }

    /// The future-side [`read_stream`](Self::read_stream).
    pub(crate) fn poll_read_stream(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let buf = as_uninit(buf);
        self.poll_io_until_drained(cx, Direction::Read, |s| self.drain.recv(s, buf), |&(_, drained)| drained)
            .map_ok(|(n, _)| n)
    }

    /// A vectored stream read (blocking-style).
    pub(crate) fn read_vectored_stream(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.blocking(Direction::Read, None, |mut s| s.read_vectored(bufs))
    }

    /// A vectored stream write (blocking-style).
    pub(crate) fn write_vectored_stream(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.blocking(Direction::Write, None, |s| nocancel::send_vectored(s.as_raw_fd(), bufs))
    }

    /// The future-side [`write_stream`](Self::write_stream).
    pub(crate) fn poll_write_stream(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_io(cx, Direction::Write, |s| nocancel::send(s.as_raw_fd(), buf))
    }

    /// The future-side [`write_vectored_stream`](Self::write_vectored_stream).
    #[cfg(any(feature = "hyper", feature = "tokio-io"))]
    pub(crate) fn poll_write_vectored_stream(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_io(cx, Direction::Write, |s| nocancel::send_vectored(s.as_raw_fd(), bufs))
    }

    /// hyper's read: into the unfilled part of hyper's buffer, with the drained-read rule of
    /// [`read_stream`](Self::read_stream).
    #[cfg(feature = "hyper")]
    pub(crate) fn poll_read_hyper(
        &self,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: recv writes only initialised bytes into the unfilled part, and we advance
        // the cursor by exactly the number of bytes it reports.
        let unfilled = unsafe { buf.as_mut() };
        let n = match self.poll_io_until_drained(
            cx,
            Direction::Read,
            |s| self.drain.recv(s, unfilled),
            |&(_, drained)| drained,
        ) {
            Poll::Ready(Ok((n, _))) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        // SAFETY: `n` bytes were initialised by recv just above.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }

    /// For a stream this side has just connected, on a worker: registers it now and records
    /// that a read would block until its first read event, so that the first read (usually
    /// right after a request is written, before any answer) waits without a `recv` that says
    /// `EAGAIN`. Sound because nothing can arrive unreported: registering reports the socket's
    /// readiness at that moment as its first event, and every later arrival raises a new one;
    /// the mark is made against sequence number 0, so if a read event was already dispatched
    /// it does not match and the read tries the call as usual.
    /// Off a worker there is no registration (a plain thread waits in poll(2)); a
    /// registration that fails here is left for the first wait, which reports it.
    pub(crate) fn expect_first_read_event(&self) {
        if let Ok(Some(_)) = self.registration() {
            self.note_blocked(Direction::Read, Some(0));
        }
    }

    /// Waits for the next readiness event of `dir` (or the deadline), without trying an
    /// operation first: for a non-blocking `connect`, whose completion is signalled by
    /// writability.
    pub(crate) fn wait_ready(&self, dir: Direction, deadline: Option<Instant>) -> io::Result<()> {
        let seen = self.registration.get().map(|r| r.io.seq(dir));
        self.wait(dir, seen, deadline)
    }

    /// Waits until an event of `dir` newer than `seen` (or, when the socket was not registered
    /// before the attempt, any readiness) or the deadline.
    fn wait(&self, dir: Direction, seen: Option<u32>, deadline: Option<Instant>) -> io::Result<()> {
        let call: &'static str = match dir {
            Direction::Read => "socket read",
            Direction::Write => "socket write",
        };
        let worker = match blocking_caller(call) {
            Caller::Fiber(worker) => worker,
            Caller::Thread => return self.wait_thread(dir, deadline),
        };
        let Some(reg) = self.registration()? else { return self.wait_thread(dir, deadline) };
        reg.wait_fiber(worker, dir, seen.unwrap_or(0), deadline, call)
    }

    /// Blocks a plain thread in `poll(2)` until the socket is ready for `dir` or the deadline.
    /// Readiness from `poll(2)` overrides a "the next attempt would block" mark, which waits
    /// for a reactor's sequence number to move: no reactor may be reading this socket (its
    /// runtime shut down), and the thread would then wait for that number forever.
    fn wait_thread(&self, dir: Direction, deadline: Option<Instant>) -> io::Result<()> {
        self.wait_thread_poll(dir, deadline)?;
        self.blocked_slot(dir).store(0, Ordering::Relaxed);
        Ok(())
    }

    fn wait_thread_poll(&self, dir: Direction, deadline: Option<Instant>) -> io::Result<()> {
        let events = match dir {
            Direction::Read => libc::POLLIN | libc::POLLPRI | libc::POLLRDHUP,
            Direction::Write => libc::POLLOUT,
        };
        loop {
            let timeout_ms = match deadline {
                None => -1,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "the operation timed out"));
                    }
                    left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int
                }
            };
            let mut pfd = libc::pollfd { fd: self.socket.as_raw_fd(), events, revents: 0 };
            // SAFETY: one valid pollfd; the descriptor is open for the duration of the call.
            let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
            if rc > 0 {
                return Ok(());
            }
            if rc < 0 {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }

    /// The future-side counterpart of [`blocking`](Self::blocking): tries `op`, and on
    /// `WouldBlock` registers the task's waker and returns `Pending`.
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        op: impl FnMut(&Socket) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_io_until_drained(cx, dir, op, |_| false)
    }

    /// [`poll_io`](Self::poll_io) with the short-transfer rule of
    /// [`blocking_until_drained`](Self::blocking_until_drained).
    pub(crate) fn poll_io_until_drained<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        op: impl FnMut(&Socket) -> io::Result<R>,
        short: impl Fn(&R) -> bool,
    ) -> Poll<io::Result<R>> {
        // A task's poll that spent its I/O budget yields here (`sched::worker::coop`,
        // "bounded within a poll").
        if !worker::poll_io_budget(cx) {
            return Poll::Pending;
        }
        let res = self.poll_io_unbudgeted(cx, dir, op, short);
        if let Poll::Ready(Ok(_)) = res {
            worker::consume_polled_io_budget();
        }
        res
    }

    /// A vectored stream write from the scheduler context, outside any task's poll (a
    /// deferred flush, module `net::coalesce`): no budget to take; on `WouldBlock` the waker
    /// in `cx` is registered for the next writable event.
    pub(crate) fn poll_send_vectored_unbudgeted(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_io_unbudgeted(
            cx,
            Direction::Write,
            |s| nocancel::send_vectored(s.as_raw_fd(), bufs),
            |_| false,
        )
    }

    /// The attempt and the waker registration of [`poll_io_until_drained`](Self::poll_io_until_drained),
    /// without the budget.
    fn poll_io_unbudgeted<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        mut op: impl FnMut(&Socket) -> io::Result<R>,
        short: impl Fn(&R) -> bool,
    ) -> Poll<io::Result<R>> {
        loop {
            let seen = self.registration.get().map(|r| r.io.seq(dir));
            if !self.known_blocked(dir, seen) {
                match op(&self.socket) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.note_blocked(dir, seen),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(r) => {
                        if short(&r) {
                            self.note_blocked(dir, seen);
                        }
                        return Poll::Ready(Ok(r));
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            let reg = match self.registration() {
                Ok(Some(reg)) => reg,
                Ok(None) => {
                    return Poll::Ready(Err(io::Error::other(
                        "a spindle socket was polled outside a spindle runtime before it was registered",
                    )))
                }
                Err(e) => return Poll::Ready(Err(e)),
            };
            if reg.io.register(dir, seen.unwrap_or(0), cx.waker()) {
                return Poll::Pending;
            }
        }
    }
}

impl Drop for IoSource {
    fn drop(&mut self) {
        if let Some(reg) = self.registration.take() {
            reg.deregister();
        }
        // The socket closes after this, which also removes it from the epoll set.
    }
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
