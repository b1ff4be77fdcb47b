//! The connection's socket as hyper sees it: counts the reads and writes that moved bytes
//! (for the idle timeout), and coalesces small writes into one bounded buffer so that the
//! responses to a batch of pipelined requests go out in one system call.
//!
//! Invariants:
//!
//! - **Bounded**: the coalescing buffer never holds more than [`COALESCE_LIMIT`] bytes. A
//!   write that does not fit first drains the buffer to the socket; if the socket is full
//!   the write returns `Pending`, so hyper's own (bounded) write buffer fills and hyper
//!   stops reading requests: a client that does not read stalls its connection instead of
//!   growing the server's memory. A write of at least `COALESCE_LIMIT` bytes goes to the
//!   socket directly (no copy) once the buffer is empty.
//! - **Nothing stranded**: hyper's `poll_flush` on this type only defers; the connection
//!   driver (module `server::conn`) calls [`IoHandle::poll_drain`] every time the connection future
//!   returns `Pending` and before it finishes, and `poll_shutdown` drains too. So bytes sit
//!   in the buffer only while hyper is still running in the same poll, or while the socket
//!   is full.
//! - **Lent, not owned**: an empty buffer is given back to its worker's spare slot (one per
//!   thread) when a drain completes, and taken from there by the next write; a connection
//!   keeps one only while it holds bytes. Idle connections hold no coalescing buffer, and
//!   busy ones reuse the same warm memory.
//! - **One poller**: the state is shared between hyper's `Io` and the driver's `IoHandle`
//!   through an `Arc` holding a `Mutex`; both live in the connection's task (which any worker
//!   may poll, one at a time), so the lock is never contended, and it is never held across a
//!   call into the other.
//! - **Flushless plain sockets**: a connection that does not coalesce (HTTP/2, or
//!   `pipeline_flush(false)`) over a plain socket never holds a byte on this side (writes go
//!   to the socket, and a socket buffers nothing of its own), so hyper's `poll_flush` and
//!   the driver's `poll_drain` answer `Ready` without taking the lock: `Shared::flushless`,
//!   fixed when the connection is made. HTTP/2 flushes and drains several times a request,
//!   each a lock taken to look at an empty buffer (`docs/perf/http.md`, "HTTP/2: eager
//!   first polls").
//! - **One allocation per connection**: the same `Arc` holds what the connection's owner
//!   attaches to the socket (`C`: a server connection's counters, module `server::counters`;
//!   nothing for a client's), outside the lock: the service holds it strongly ([`Attached`], it
//!   lives in hyper's connection, in the task), a running handler weakly ([`WeakAttached`]: a handler
//!   that outlives its connection, in an HTTP/2 stream's task, does not keep the socket open).
//!
//! - **Whole frames or nothing**: the driver may end an HTTP/2 connection itself (idle,
//!   stalled, or an abusive client) with a GOAWAY frame of its own, written here once
//!   hyper's connection is gone ([`IoHandle::queue_final`]). hyper and h2 offer each write
//!   all the bytes they have encoded, so the stream is at a frame boundary unless the last
//!   direct write took only part of what was offered (`Inner::mid_frame`); then the frame
//!   is not written (the bytes after the cut would be read as the rest of the frame).
//!
//! This replaces hyper's `pipeline_flush`, which batches the same way but lifts the write
//! buffer's limit (hyper's `can_buffer` then always says yes: a client that pipelines
//! without reading made the server buffer every response) and skips flushing whenever its
//! read buffer holds bytes, even when the connection is closing (so the response to a
//! `Connection: close` request followed by any byte was never written).

use std::cell::Cell;
use std::io::{self, IoSlice};
use std::ops::Deref;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};

use spindle::net::TcpStream;

use crate::transport::stream::Transport;

/// The most bytes the coalescing buffer holds.
pub(crate) const COALESCE_LIMIT: usize = 32 * 1024;

thread_local! {
    /// This thread's spare coalescing buffer (empty; see the module doc).
    static SPARE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

struct Inner {
    stream: Transport,
    /// Bytes read before hyper took over (the protocol sniff), given to hyper first.
    replay: Vec<u8>,
    /// How many of `replay` were given (the sniff's bytes: at most a buffer's worth).
    replayed: u32,
    /// The last direct write took only part of what hyper offered ("whole frames or nothing").
    mid_frame: bool,
    /// Bytes accepted from hyper and not yet written to the socket (`out[sent..]`).
    out: Vec<u8>,
    sent: usize,
    /// System calls that moved bytes: reads in the low half, writes in the high half (the
    /// idle timeout compares the whole, HTTP/2's send timeout the writes).
    progress: u64,
}

/// What hyper's side, the driver's and the service share (see "one allocation per connection").
struct Shared<C> {
    inner: Mutex<Inner>,
    attached: C,
    /// Small writes are coalesced ("bounded"); fixed when the connection is made.
    coalesce: bool,
    /// Nothing to flush or drain, ever ("flushless plain sockets").
    flushless: bool,
}

/// The socket side given to hyper.
pub(crate) struct Io<C = ()> {
    shared: Arc<Shared<C>>,
}

/// The driver's handle on the same socket: drains the coalescing buffer, counts progress,
/// and gives the stream back when hyper is done.
pub(crate) struct IoHandle<C = ()> {
    shared: Arc<Shared<C>>,
}

/// What the connection's owner attached to the socket, held strongly (by a server
/// connection's service).
pub(crate) struct Attached<C>(Arc<Shared<C>>);

/// What the connection's owner attached to the socket, held weakly (by a running handler, a
/// metered body).
pub(crate) struct WeakAttached<C>(Weak<Shared<C>>);

impl<C> Clone for WeakAttached<C> {
    fn clone(&self) -> Self {
        WeakAttached(self.0.clone())
    }
}

impl<C> Deref for Attached<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.0.attached
    }
}

impl<C> Attached<C> {
    pub(crate) fn downgrade(&self) -> WeakAttached<C> {
        WeakAttached(Arc::downgrade(&self.0))
    }
}

impl<C> WeakAttached<C> {
    /// Of no connection (`upgrade` never finds it).
    pub(crate) fn none() -> WeakAttached<C> {
        WeakAttached(Weak::new())
    }

    /// The attached state, unless the connection is gone.
    pub(crate) fn upgrade(&self) -> Option<Attached<C>> {
        self.0.upgrade().map(Attached)
    }
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new connection socket: the `Io` for hyper and the driver's handle. `replay` holds
/// bytes already read from the stream.
pub(crate) fn new<C: Default>(stream: Transport, coalesce: bool, replay: Vec<u8>) -> (Io<C>, IoHandle<C>) {
    let flushless = !coalesce && matches!(stream, Transport::Plain(_));
    let inner =
        Inner { stream, replay, replayed: 0, out: Vec::new(), sent: 0, progress: 0, mid_frame: false };
    let shared = Arc::new(Shared { inner: Mutex::new(inner), attached: C::default(), coalesce, flushless });
    (Io { shared: shared.clone() }, IoHandle { shared })
}

impl Inner {
    /// Counts a read that moved bytes.
    fn touch_read(&mut self) {
        self.progress = self.progress.wrapping_add(1);
    }

    /// Counts a write that moved bytes.
    fn touch_write(&mut self) {
        self.progress = self.progress.wrapping_add(1 << 32);
    }

    /// Counts a direct write of `offered` bytes that returned `res`.
    fn wrote(&mut self, res: &Poll<io::Result<usize>>, offered: usize) {
        match res {
            Poll::Ready(Ok(n)) => {
                self.touch_write();
                self.mid_frame = *n < offered;
            }
            Poll::Ready(Err(_)) => self.touch_write(),
            Poll::Pending => {}
        }
    }

    fn buffered(&self) -> usize {
        self.out.len() - self.sent
    }

    /// Writes the buffered bytes to the socket until none are left (`Ready(Ok)`), the socket
    /// is full (`Pending`, woken when writable) or an error.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = match self.stream.poll_write(cx, &self.out[self.sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            self.touch_write();
            self.sent += n;
        }
        if self.out.capacity() > 0 {
            let mut spare = std::mem::take(&mut self.out);
            spare.clear();
            self.sent = 0;
            SPARE.with(|s| s.set(spare));
        }
        self.stream.poll_flush(cx)
    }

    /// Copies `data` into the coalescing buffer (the caller checked that it fits).
    fn buffer(&mut self, data: &[u8]) {
        if self.out.capacity() == 0 {
            self.out = SPARE.with(Cell::take);
        }
        self.out.extend_from_slice(data);
    }

    /// Room for `len` more bytes: drains the buffer first when they would not fit.
    /// `Ready(true)`: copy them in; `Ready(false)`: the buffer is empty and they are too
    /// many to copy, write them directly.
    fn poll_reserve(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<bool>> {
        if self.buffered() + len > COALESCE_LIMIT {
            if let Err(e) = std::task::ready!(self.poll_drain(cx)) {
                return Poll::Ready(Err(e));
            }
        }
        Poll::Ready(Ok(len < COALESCE_LIMIT))
    }
}

impl<C> IoHandle<C> {
    /// Writes out what hyper left in the coalescing buffer (see the module doc).
    pub(crate) fn poll_drain(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.shared.flushless {
            return Poll::Ready(Ok(()));
        }
        lock(&self.shared.inner).poll_drain(cx)
    }

    /// How many system calls moved bytes so far (for the idle timeout).
    pub(crate) fn progress(&self) -> u64 {
        lock(&self.shared.inner).progress
    }

    /// How many writes moved bytes so far (for HTTP/2's send timeout), wrapping.
    pub(crate) fn writes(&self) -> u32 {
        (lock(&self.shared.inner).progress >> 32) as u32
    }

    /// Queues `frame`, the connection's last bytes, once hyper's connection is gone, unless
    /// the stream is cut inside a frame ("whole frames or nothing"); whether it was queued.
    /// [`IoHandle::poll_write_out`] writes it.
    pub(crate) fn queue_final(&self, frame: &[u8]) -> bool {
        let mut inner = lock(&self.shared.inner);
        if inner.mid_frame {
            return false;
        }
        inner.buffer(frame);
        true
    }

    /// Writes out whatever is buffered, on any connection (unlike [`IoHandle::poll_drain`],
    /// which a flushless connection skips: hyper never leaves bytes there, but
    /// [`IoHandle::queue_final`] may).
    pub(crate) fn poll_write_out(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        lock(&self.shared.inner).poll_drain(cx)
    }

    /// What the connection's owner attached to the socket.
    pub(crate) fn attached(&self) -> &C {
        &self.shared.attached
    }

    /// A strong handle on what the connection's owner attached, for its service.
    pub(crate) fn attached_ref(&self) -> Attached<C> {
        Attached(self.shared.clone())
    }

    /// The stream, once hyper's connection (which holds the other references: its `Io` and
    /// the service's counters) is dropped.
    pub(crate) fn into_stream(self) -> Option<TcpStream> {
        let shared = Arc::try_unwrap(self.shared).ok()?;
        Some(shared.inner.into_inner().unwrap_or_else(|e| e.into_inner()).stream.into_tcp())
    }
}

impl<C> hyper::rt::Read for Io<C> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let mut inner = lock(&self.shared.inner);
        let replayed = inner.replayed as usize;
        if replayed < inner.replay.len() {
            let n = buf.remaining().min(inner.replay.len() - replayed);
            buf.put_slice(&inner.replay[replayed..replayed + n]);
            inner.replayed = (replayed + n) as u32;
            if replayed + n == inner.replay.len() {
                inner.replay = Vec::new();
                inner.replayed = 0;
            }
            return Poll::Ready(Ok(()));
        }
        let res = inner.stream.poll_read(cx, buf);
        if res.is_ready() {
            inner.touch_read();
        }
        res
    }
}

impl<C> hyper::rt::Write for Io<C> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let mut inner = lock(&self.shared.inner);
        if self.shared.coalesce {
            match inner.poll_reserve(cx, buf.len()) {
                Poll::Ready(Ok(true)) => {
                    inner.buffer(buf);
                    return Poll::Ready(Ok(buf.len()));
                }
                Poll::Ready(Ok(false)) => {}
                other => return other.map_ok(|_| 0),
            }
        }
        let res = inner.stream.poll_write(cx, buf);
        inner.wrote(&res, buf.len());
        res
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut inner = lock(&self.shared.inner);
        if self.shared.coalesce {
            let len: usize = bufs.iter().map(|b| b.len()).sum();
            match inner.poll_reserve(cx, len) {
                Poll::Ready(Ok(true)) => {
                    bufs.iter().for_each(|b| inner.buffer(b));
                    return Poll::Ready(Ok(len));
                }
                Poll::Ready(Ok(false)) => {}
                other => return other.map_ok(|_| 0),
            }
        }
        let res = inner.stream.poll_write_vectored(cx, bufs);
        let offered = if res.is_ready() { bufs.iter().map(|b| b.len()).sum() } else { 0 };
        inner.wrote(&res, offered);
        res
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.shared.flushless {
            return Poll::Ready(Ok(()));
        }
        let mut inner = lock(&self.shared.inner);
        if self.shared.coalesce {
            // Deferred to the driver (see the module doc), which drains when hyper has
            // nothing more to do in this poll.
            return Poll::Ready(Ok(()));
        }
        // Nothing is coalesced; push out what the transport buffered (TLS records).
        inner.poll_drain(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut inner = lock(&self.shared.inner);
        std::task::ready!(inner.poll_drain(cx))?;
        inner.stream.poll_shutdown(cx)
    }
}

/// The size of a connection's shared state with `C` attached (its one allocation).
#[cfg(test)]
pub(crate) fn shared_size<C>() -> usize {
    std::mem::size_of::<Shared<C>>()
}
