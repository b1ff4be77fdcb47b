//! [`CoalescedStream`]: a stream whose small writes, made by async code on a worker, are
//! gathered in a bounded buffer and sent together once the worker has run everything runnable
//! (module `sched::worker::flush`), so that the frames a connection produces in several polls,
//! or for several callers, leave in one system call.
//!
//! # Invariants
//!
//! - **Order.** Every byte accepted goes out after every byte accepted before it: a write that
//!   is not gathered sends the pending bytes first, in the same `sendmsg` when it can, and
//!   reports as accepted only the bytes of its own that the socket took.
//! - **Bounded.** At most [`GATHER_LIMIT`] bytes are pending. A write that would pass it, or
//!   that is [`DIRECT_WRITE`] bytes or more, is sent at once (with the pending bytes before
//!   it); a full socket then returns `Pending`, so the writer stops producing.
//! - **A deferred flush always happens.** A write gathered on a worker queues this stream's
//!   flush on that worker (once: `queued_on`), and the worker runs it before it sleeps or
//!   looks at its reactor ("no sleep with a deferred flush"). A write or flush off a worker
//!   (a plain thread), or while the flush is queued on another worker, sends at once. When a
//!   deferred flush finds the socket full, the rest waits for writability: the last writer's
//!   waker is registered for it, and that writer's next write or flush (`poll_flush` answers
//!   `Pending` until the socket takes it) sends the rest.
//! - **Errors surface.** An error met by a deferred flush is kept and returned by the next
//!   write or flush, and the last writer is woken so that it makes one.
//! - **Close delivers.** `poll_close` (`poll_shutdown`) sends the pending bytes before it
//!   shuts the write half; a stream dropped with bytes pending sends what the socket takes
//!   without waiting.
//! - **One lock, short.** The pending bytes, the queue mark, the waker and the kept error sit
//!   in one mutex, held for a copy or the system calls of one write, never across a call into
//!   the worker's loop, a waker or a yield: the I/O budget (module `sched::worker::coop`) is
//!   checked before the lock's sends (a check never yields) and taken after the lock is
//!   released (taking the last unit yields a fiber). Reads take no lock.

use std::cell::Cell;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};

use super::source::IoSource;
use super::tcp::TcpStream;
use super::unix::UnixStream;
use crate::sched::worker::{self, DeferredFlush};

/// The most bytes a stream holds unsent ("bounded").
pub const GATHER_LIMIT: usize = 64 * 1024;

/// Writes of at least this many bytes are sent at once, never copied (HTTP/2's default largest
/// frame with its header reaches it).
pub const DIRECT_WRITE: usize = 16 * 1024;

/// How many of a writer's slices one send takes beside the pending bytes.
const MAX_SLICES: usize = 7;

thread_local! {
    /// This thread's spare gathering buffer (empty): a stream holds one only while it has
    /// bytes pending.
    static SPARE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// A TCP or Unix stream whose writes on a worker are gathered and sent once per burst of the
/// worker's work (module doc). Implements futures-io's traits and, with the `hyper` feature,
/// hyper's, for an HTTP/2 connection whose frames should leave together.
///
/// ```
/// use spindle::net::{CoalescedStream, TcpListener, TcpStream};
///
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
///     let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
///     let _stream = CoalescedStream::from(stream);
/// });
/// ```
#[derive(Debug)]
pub struct CoalescedStream {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    source: IoSource,
    out: Mutex<Out>,
}

#[derive(Debug, Default)]
struct Out {
    /// Accepted bytes not sent yet: `buf[sent..]`.
    buf: Vec<u8>,
    sent: usize,
    /// The worker this stream's flush is queued on ([`worker::Worker::id`]).
    queued_on: Option<usize>,
    /// The last writer's waker: woken for writability after a deferred flush found the socket
    /// full, or when a deferred flush failed.
    waker: Option<Waker>,
    /// An error a deferred flush met, for the next write or flush.
    error: Option<io::Error>,
    /// System calls that sent bytes.
    sends: u64,
}

impl From<TcpStream> for CoalescedStream {
    fn from(stream: TcpStream) -> CoalescedStream {
        CoalescedStream::new(stream.source)
    }
}

impl From<UnixStream> for CoalescedStream {
    fn from(stream: UnixStream) -> CoalescedStream {
        CoalescedStream::new(stream.source)
    }
}

impl CoalescedStream {
    fn new(source: IoSource) -> CoalescedStream {
        CoalescedStream { shared: Arc::new(Shared { source, out: Mutex::new(Out::default()) }) }
    }

    /// How many system calls have sent bytes of this stream.
    pub fn sends(&self) -> u64 {
        self.shared.lock().sends
    }

    /// How many bytes are accepted and not sent yet.
    pub fn pending(&self) -> usize {
        self.shared.lock().pending()
    }

    fn poll_write_slices(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let mut sent = false;
        let res = self.write_locked(cx, bufs, &mut sent);
        // After the lock ("one lock, short"): the last unit yields a fiber.
        if sent {
            worker::consume_polled_io_budget();
        }
        res
    }

    /// The write, under the lock; `sent` says whether a system call sent bytes.
    fn write_locked(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
        sent: &mut bool,
    ) -> Poll<io::Result<usize>> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if len == 0 {
            return Poll::Ready(Ok(0));
        }
        let mut out = self.shared.lock();
        if let Some(e) = out.error.take() {
            return Poll::Ready(Err(e));
        }
        let here = worker::current();
        loop {
            if let Some(w) = here {
                let queued_elsewhere = out.queued_on.is_some_and(|id| id != w.id());
                if !queued_elsewhere && len < DIRECT_WRITE && out.pending() + len <= GATHER_LIMIT {
                    out.gather(bufs, cx.waker());
                    if out.queued_on.is_none() {
                        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
                        w.defer_flush(weak);
                        out.queued_on = Some(w.id());
                    }
                    return Poll::Ready(Ok(len));
                }
            }
            // Sent now: the pending bytes first, then what the socket takes of these.
            let pending = out.pending();
            let mut slices = [IoSlice::new(&[]); MAX_SLICES + 1];
            let mut n = 0;
            if pending > 0 {
                slices[0] = IoSlice::new(&out.buf[out.sent..]);
                n = 1;
            }
            for b in bufs.iter().filter(|b| !b.is_empty()).take(MAX_SLICES) {
                slices[n] = *b;
                n += 1;
            }
            // A task's poll that spent its budget yields here, before the system call.
            if !worker::poll_io_budget(cx) {
                return Poll::Pending;
            }
            let wrote = match self.shared.source.poll_send_vectored_unbudgeted(cx, &slices[..n]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(wrote)) => wrote,
                other => return other,
            };
            *sent = true;
            out.sends += 1;
            let from_pending = wrote.min(pending);
            out.advance(from_pending);
            if wrote > from_pending {
                return Poll::Ready(Ok(wrote - from_pending));
            }
            // Only pending bytes left: try again (gathered now, or sent, or `Pending`).
        }
    }

    /// Sends every pending byte now (`Pending` while the socket is full).
    fn poll_send_pending(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_send(cx, true)
    }

    /// Sends every pending byte, unless `may_defer` and this worker's deferred flush will.
    fn poll_send(&self, cx: &mut Context<'_>, may_defer: bool) -> Poll<io::Result<()>> {
        let mut sent = false;
        let res = self.send_pending_locked(cx, may_defer, &mut sent);
        // After the lock ("one lock, short"): the last unit yields a fiber.
        if sent {
            worker::consume_polled_io_budget();
        }
        res
    }

    /// [`poll_send`](Self::poll_send) under the lock, the budget checked but not taken; `sent`
    /// says whether a system call sent bytes.
    fn send_pending_locked(
        &self,
        cx: &mut Context<'_>,
        may_defer: bool,
        sent: &mut bool,
    ) -> Poll<io::Result<()>> {
        let mut out = self.shared.lock();
        if let Some(e) = out.error.take() {
            return Poll::Ready(Err(e));
        }
        if out.pending() == 0 {
            return Poll::Ready(Ok(()));
        }
        if let (true, Some(w), Some(id)) = (may_defer, worker::current(), out.queued_on) {
            if w.id() == id {
                // Deferred: this worker flushes before it sleeps ("a deferred flush always
                // happens"); the caller's waker hears of a full socket or an error.
                out.set_waker(cx.waker());
                return Poll::Ready(Ok(()));
            }
        }
        if !worker::poll_io_budget(cx) {
            return Poll::Pending;
        }
        let sends = out.sends;
        let res = out.send_pending(&self.shared.source, cx);
        *sent = out.sends != sends;
        res
    }

    /// Sends every pending byte, then shuts the write half ("close delivers").
    fn poll_shutdown_write(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_send(cx, false))?;
        Poll::Ready(self.shared.source.socket().shutdown(std::net::Shutdown::Write))
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Out> {
        crate::lock::lock(&self.out)
    }
}

impl Out {
    fn pending(&self) -> usize {
        self.buf.len() - self.sent
    }

    fn set_waker(&mut self, waker: &Waker) {
        match &self.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => self.waker = Some(waker.clone()),
        }
    }

    /// Copies `bufs` behind the pending bytes (the caller checked the bound).
    fn gather(&mut self, bufs: &[IoSlice<'_>], waker: &Waker) {
        if self.buf.capacity() == 0 {
            self.buf = SPARE.with(Cell::take);
        }
        for b in bufs {
            self.buf.extend_from_slice(b);
        }
        self.set_waker(waker);
    }

    /// Marks `n` pending bytes sent; an emptied buffer goes back to the thread's spare.
    fn advance(&mut self, n: usize) {
        self.sent += n;
        if self.sent == self.buf.len() && self.buf.capacity() > 0 {
            let mut spare = std::mem::take(&mut self.buf);
            spare.clear();
            self.sent = 0;
            SPARE.with(|s| s.set(spare));
        }
    }

    /// Sends the pending bytes until none are left, the socket is full (`Pending`, `cx`'s
    /// waker registered for writability) or an error. Takes no budget (the caller does,
    /// after the lock).
    fn send_pending(&mut self, source: &IoSource, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.pending() > 0 {
            let slice = [IoSlice::new(&self.buf[self.sent..])];
            match source.poll_send_vectored_unbudgeted(cx, &slice) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.sends += 1;
                    self.advance(n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl DeferredFlush for Shared {
    fn flush_deferred(&self) {
        let mut out = self.lock();
        out.queued_on = None;
        if out.pending() == 0 {
            return;
        }
        let waker = out.waker.clone().unwrap_or_else(|| Waker::noop().clone());
        let mut cx = Context::from_waker(&waker);
        match out.send_pending(&self.source, &mut cx) {
            // Pending: the waker is registered for writability ("a deferred flush always
            // happens").
            Poll::Ready(Ok(())) | Poll::Pending => {}
            Poll::Ready(Err(e)) => {
                out.error = Some(e);
                drop(out);
                waker.wake();
            }
        }
    }
}

impl Drop for CoalescedStream {
    /// Sends what the socket takes of the pending bytes, without waiting ("close delivers").
    fn drop(&mut self) {
        let mut out = self.shared.lock();
        if out.pending() > 0 {
            let mut cx = Context::from_waker(Waker::noop());
            let _ = out.send_pending(&self.shared.source, &mut cx);
        }
    }
}

impl futures_io::AsyncRead for CoalescedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.shared.source.poll_read_stream(cx, buf)
    }
}

impl futures_io::AsyncWrite for CoalescedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_slices(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_slices(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_send_pending(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_shutdown_write(cx)
    }
}

#[cfg(feature = "hyper")]
impl hyper::rt::Read for CoalescedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        self.shared.source.poll_read_hyper(cx, buf)
    }
}

#[cfg(feature = "hyper")]
impl hyper::rt::Write for CoalescedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_slices(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_slices(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_send_pending(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_shutdown_write(cx)
    }
}

#[cfg(test)]
#[path = "coalesce_tests.rs"]
mod tests;
