//! The server's first frame: an HTTP/2 client connection is published only once the
//! server's first frame has arrived whole and is a SETTINGS frame (RFC 9113, 3.4; module
//! `connector`). [`Watched`] wraps the connection's socket and shows its first reads to a
//! [`Watch`], which the manager fiber waits on ([`wait_for_settings`]) while hyper's
//! connection task, on another task, does the reading.
//!
//! # Invariants
//!
//! - **Every end is seen.** The first frame's outcome is decided by the first of: the frame
//!   arriving whole (SETTINGS or not), a read's error or end of stream, a write's error, or the
//!   socket being dropped (hyper ended the connection, whatever the reason). Each wakes the
//!   waiting manager, so an attempt fails when its connection does, never only at the connect
//!   timeout. (Before writes and drops counted, a server that refused a TLS client certificate
//!   and closed could reset the client's first write; hyper then ended the connection without
//!   a read, and the manager now and then waited out its connect timeout.)
//! - **One outcome.** Once decided, the outcome never changes; later reads pass straight
//!   through to the socket.

use std::io;
use std::task::Poll;

/// Waits (up to the connect timeout) for the server's first frame, which must be its SETTINGS
/// (RFC 9113, 3.4), so that the connection is published with the server's stream limit known:
/// calls sent before it would open streams past a small limit and be refused. A peer that
/// sends nothing, hangs up, or sends anything else is no HTTP/2 server: the attempt fails
/// (module docs).
pub(crate) fn wait_for_settings(watch: &Watch, deadline: std::time::Instant) -> io::Result<()> {
    let wait = std::future::poll_fn(|cx| {
        watch.register(cx.waker());
        match watch.first_frame() {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending,
        }
    });
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    match spindle::task::block_on(spindle::time::timeout(left, wait)) {
        Err(_) => {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the server sent no HTTP/2 SETTINGS in time"))
        }
        Ok(Err((kind, why))) => return Err(io::Error::new(kind, why)),
        Ok(Ok(())) => {}
    }
    // The read woke us before hyper's connection task applied what it read: let it run.
    spindle::task::block_on(spindle::task::yield_now());
    Ok(())
}

/// Wakes the manager after the first reads of a connection, so that it publishes the
/// server's `SETTINGS_MAX_CONCURRENT_STREAMS` (which hyper reads on another task) soon after
/// it arrives, not only at the next call; and looks at the server's first frame on the way.
#[derive(Default)]
pub(crate) struct Watch {
    waker: std::sync::Mutex<Option<std::task::Waker>>,
    first: std::sync::Mutex<FirstFrame>,
}

impl Watch {
    pub(crate) fn register(&self, waker: &std::task::Waker) {
        let mut slot = self.waker.lock().unwrap_or_else(|e| e.into_inner());
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }

    fn wake(&self) {
        if let Some(w) = self.waker.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            w.wake_by_ref();
        }
    }

    fn first(&self) -> std::sync::MutexGuard<'_, FirstFrame> {
        self.first.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the server's first frame arrived whole and was SETTINGS (`Err`: why not); `None`
    /// while it is arriving.
    fn first_frame(&self) -> Option<Result<(), (io::ErrorKind, String)>> {
        match &*self.first() {
            FirstFrame::Reading { .. } => None,
            FirstFrame::Done(outcome) => Some(outcome.clone()),
        }
    }
}

/// The server's first frame as its bytes arrive ([`Watched`]).
enum FirstFrame {
    Reading { header: [u8; 9], have: usize, payload_left: usize },
    Done(Result<(), (io::ErrorKind, String)>),
}

impl Default for FirstFrame {
    fn default() -> FirstFrame {
        FirstFrame::Reading { header: [0; 9], have: 0, payload_left: 0 }
    }
}

impl FirstFrame {
    /// A read's outcome: its bytes (none: the end of the stream) or its error. Whether the
    /// first frame is still arriving.
    fn saw(&mut self, read: Result<&[u8], &io::Error>) -> bool {
        self.add(read);
        matches!(self, FirstFrame::Reading { .. })
    }

    /// The first frame will not come: `why`.
    fn fail(&mut self, kind: io::ErrorKind, why: String) {
        if matches!(self, FirstFrame::Reading { .. }) {
            *self = FirstFrame::Done(Err((kind, why)));
        }
    }

    fn add(&mut self, read: Result<&[u8], &io::Error>) {
        let FirstFrame::Reading { header, have, payload_left } = self else { return };
        let mut bytes = match read {
            Ok([]) => {
                let why = "the server closed the connection before its HTTP/2 SETTINGS";
                *self = FirstFrame::Done(Err((io::ErrorKind::UnexpectedEof, why.into())));
                return;
            }
            Ok(bytes) => bytes,
            Err(e) => {
                *self = FirstFrame::Done(Err((
                    e.kind(),
                    format!("waiting for the server's HTTP/2 SETTINGS: {e}"),
                )));
                return;
            }
        };
        if *have < header.len() {
            let n = (header.len() - *have).min(bytes.len());
            header[*have..*have + n].copy_from_slice(&bytes[..n]);
            *have += n;
            bytes = &bytes[n..];
            if *have < header.len() {
                return;
            }
            // Type SETTINGS (4), not an ACK, on stream 0.
            if header[3] != 4 || header[4] & 1 != 0 || header[5] & 0x7f != 0 || header[6..] != [0; 3] {
                let why = format!(
                    "the server's first bytes are no HTTP/2 SETTINGS frame (not an HTTP/2 server?): {:02x?}",
                    &header[..]
                );
                *self = FirstFrame::Done(Err((io::ErrorKind::InvalidData, why)));
                return;
            }
            *payload_left = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        }
        *payload_left = payload_left.saturating_sub(bytes.len());
        if *payload_left == 0 {
            *self = FirstFrame::Done(Ok(()));
        }
    }
}

/// A connection's socket, waking the manager after each of its first reads, and showing the
/// server's first frame to the [`Watch`] while it arrives.
pub(crate) struct Watched<I> {
    io: I,
    reads_left: u8,
    /// The server's first frame is still arriving.
    first_frame: bool,
    watch: std::sync::Arc<Watch>,
}

impl<I: hyper::rt::Read + Unpin> hyper::rt::Read for Watched<I> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.reads_left == 0 && !this.first_frame {
            return std::pin::Pin::new(&mut this.io).poll_read(cx, buf);
        }
        let poll = if this.first_frame && buf.remaining() > 0 {
            // Through a buffer of ours, to see the bytes (the first reads only).
            let mut scratch = [0; 1024];
            let len = buf.remaining().min(scratch.len());
            let mut seen = hyper::rt::ReadBuf::new(&mut scratch[..len]);
            let poll = std::pin::Pin::new(&mut this.io).poll_read(cx, seen.unfilled());
            match &poll {
                Poll::Ready(Ok(())) => {
                    buf.put_slice(seen.filled());
                    this.first_frame = this.watch.first().saw(Ok(seen.filled()));
                }
                Poll::Ready(Err(e)) => this.first_frame = this.watch.first().saw(Err(e)),
                Poll::Pending => {}
            }
            poll
        } else {
            std::pin::Pin::new(&mut this.io).poll_read(cx, buf)
        };
        if poll.is_ready() {
            this.reads_left = this.reads_left.saturating_sub(1);
            this.watch.wake();
        }
        poll
    }
}

impl<I> Watched<I> {
    /// The connection failed or ended other than by a read while the server's first frame was
    /// still awaited: the manager learns it now, not at its connect timeout. (A server that
    /// refuses the TLS client certificate sends its alert and closes; the client's first write
    /// can then fail on the reset, and hyper end the connection, before any read saw the alert.)
    fn first_frame_lost(&mut self, kind: io::ErrorKind, why: String) {
        if self.first_frame {
            self.first_frame = false;
            self.watch.first().fail(kind, why);
            self.watch.wake();
        }
    }

    /// `poll`, a write's outcome, with its error shown to the watch.
    fn wrote<T>(&mut self, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if let Poll::Ready(Err(e)) = &poll {
            self.first_frame_lost(e.kind(), format!("writing to the server before its HTTP/2 SETTINGS: {e}"));
        }
        poll
    }
}

impl<I> Drop for Watched<I> {
    fn drop(&mut self) {
        let why = "the connection ended before the server's HTTP/2 SETTINGS".to_owned();
        self.first_frame_lost(io::ErrorKind::UnexpectedEof, why);
    }
}

impl<I: hyper::rt::Write + Unpin> hyper::rt::Write for Watched<I> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = std::pin::Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(poll)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        let poll = std::pin::Pin::new(&mut self.io).poll_flush(cx);
        self.wrote(poll)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

pub(crate) fn watched<I>(io: I, watch: &std::sync::Arc<Watch>) -> Watched<I> {
    // The server's SETTINGS come in the first reads (a few, to allow for a split frame).
    Watched { io, reads_left: 4, first_frame: true, watch: watch.clone() }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};

    use hyper::rt::{Read as _, Write as _};

    use super::*;

    /// A socket whose reads return `reads` in turn (then Pending) and whose writes fail with
    /// `write_error` if set.
    struct Mock {
        reads: Vec<io::Result<Vec<u8>>>,
        write_error: Option<io::ErrorKind>,
    }

    impl hyper::rt::Read for Mock {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            mut buf: hyper::rt::ReadBufCursor<'_>,
        ) -> Poll<io::Result<()>> {
            if self.reads.is_empty() {
                return Poll::Pending;
            }
            match self.reads.remove(0) {
                Ok(bytes) => {
                    buf.put_slice(&bytes);
                    Poll::Ready(Ok(()))
                }
                Err(e) => Poll::Ready(Err(e)),
            }
        }
    }

    impl hyper::rt::Write for Mock {
        fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            match self.write_error {
                Some(kind) => Poll::Ready(Err(io::Error::from(kind))),
                None => Poll::Ready(Ok(buf.len())),
            }
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A watched mock and its watch, with a counting waker registered as the manager's.
    fn setup(mock: Mock) -> (Watched<Mock>, Arc<Watch>, Arc<Count>) {
        let watch = Arc::new(Watch::default());
        let count = Arc::new(Count::default());
        watch.register(&Waker::from(count.clone()));
        (watched(mock, &watch), watch, count)
    }

    fn read(io: &mut Watched<Mock>) -> Poll<io::Result<()>> {
        let mut storage = [0u8; 64];
        let mut buf = hyper::rt::ReadBuf::new(&mut storage);
        Pin::new(io).poll_read(&mut Context::from_waker(Waker::noop()), buf.unfilled())
    }

    const SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];

    #[test]
    fn settings_split_over_two_reads_is_the_first_frame() {
        let (mut io, watch, _) = setup(Mock {
            reads: vec![Ok(SETTINGS[..4].to_vec()), Ok(SETTINGS[4..].to_vec())],
            write_error: None,
        });
        assert!(read(&mut io).is_ready());
        assert!(watch.first_frame().is_none(), "decided on half a frame header");
        assert!(read(&mut io).is_ready());
        assert!(matches!(watch.first_frame(), Some(Ok(()))));
        drop(io);
        // Decided: dropping the socket afterwards changes nothing.
        assert!(matches!(watch.first_frame(), Some(Ok(()))));
    }

    #[test]
    fn another_frame_first_is_no_http2_server() {
        let (mut io, watch, _) =
            setup(Mock { reads: vec![Ok(b"HTTP/1.1 400 Bad".to_vec())], write_error: None });
        assert!(read(&mut io).is_ready());
        let Some(Err((kind, why))) = watch.first_frame() else { panic!("undecided") };
        assert_eq!(kind, io::ErrorKind::InvalidData);
        assert!(why.contains("no HTTP/2 SETTINGS frame"), "{why}");
    }

    #[test]
    fn a_write_error_before_the_settings_decides_and_wakes() {
        // The case that waited out the connect timeout: the connection fails on a write.
        let (mut io, watch, count) =
            setup(Mock { reads: vec![], write_error: Some(io::ErrorKind::ConnectionReset) });
        let poll = Pin::new(&mut io).poll_write(&mut Context::from_waker(Waker::noop()), b"PRI * HTTP/2.0");
        assert!(matches!(poll, Poll::Ready(Err(_))));
        let Some(Err((kind, why))) = watch.first_frame() else { panic!("a write error left it undecided") };
        assert_eq!(kind, io::ErrorKind::ConnectionReset);
        assert!(why.contains("writing to the server"), "{why}");
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the manager was not woken");
    }

    #[test]
    fn a_dropped_socket_before_the_settings_decides_and_wakes() {
        let (io, watch, count) = setup(Mock { reads: vec![], write_error: None });
        drop(io);
        let Some(Err((kind, why))) = watch.first_frame() else {
            panic!("a dropped socket left it undecided")
        };
        assert_eq!(kind, io::ErrorKind::UnexpectedEof);
        assert!(why.contains("ended before"), "{why}");
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the manager was not woken");
    }

    #[test]
    fn a_read_error_or_end_decides() {
        let (mut io, watch, _) = setup(Mock { reads: vec![Ok(Vec::new())], write_error: None });
        assert!(read(&mut io).is_ready());
        assert!(matches!(watch.first_frame(), Some(Err((io::ErrorKind::UnexpectedEof, _)))));
        let (mut io, watch, _) = setup(Mock {
            reads: vec![Err(io::Error::from(io::ErrorKind::ConnectionReset))],
            write_error: None,
        });
        assert!(read(&mut io).is_ready());
        assert!(matches!(watch.first_frame(), Some(Err((io::ErrorKind::ConnectionReset, _)))));
    }
}
