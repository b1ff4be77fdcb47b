//! The serving phase over hyper: drives hyper's connection to its end, the idle and send
//! timers, shutdown, and how the connection ends (module `conn`'s invariants: "bounded
//! waits", "nothing stranded", "no reset under the last answer", "every HTTP/2 end is a
//! GOAWAY, then a gentle close").

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;

use spindle::graceful::{ConnectionGuard, Watch};
use spindle::hyper_exec::TaskExecutor;

use crate::server::conn::close::{spawn_closing, GoAway};
use crate::server::counters::Counters;
use crate::server::handler::Respond;
use crate::server::service::{Service, REFUSALS_BEFORE_GOAWAY};
use crate::server::shared::Shared;
use crate::transport::socket;

/// What the serving phase starts from.
pub(super) struct Serving<H: Respond> {
    pub(super) conn: HyperConn<H>,
    pub(super) handle: socket::IoHandle<Counters>,
}

/// The serving phase: hyper's connection driven to its end (see [`Serve`]).
pub(super) fn serve<H: Respond>(
    serving: Option<Serving<H>>,
    shared: Arc<Shared<H>>,
    active: ConnectionGuard,
) -> Serve<H> {
    let idle = shared.config.idle_timeout.map(|d| (spindle::time::sleep_future(d), 0));
    let http2 = matches!(serving, Some(Serving { conn: HyperConn::Http2(_), .. }));
    let send =
        shared.config.http2_send_timeout.filter(|_| http2).map(|d| (spindle::time::sleep_future(d), 0));
    let watch = Watch::new(shared);
    Serve { serving, watch, active: Some(active), idle, send, draining: false, finished: None }
}

/// How the serving phase ended.
enum End {
    /// hyper finished the connection, with this result.
    Hyper(Result<(), hyper::Error>),
    /// The driver closed it; an HTTP/2 connection with this GOAWAY.
    Driver(GoAway),
    /// The peer is gone (a write failed): nothing more can be said.
    Gone,
}

/// The future of the serving phase: drives hyper's connection future until it ends, the
/// connection has been idle for `idle_timeout`, or shutdown closes it, and drains the
/// coalescing buffer each time hyper has done all it can (module `transport::socket`). Under HTTP/2 it
/// also closes a connection whose responses are stalled on the client's window
/// (`http2_send_timeout`, module `meter`) or whose client keeps opening streams that are
/// refused (module `service`).
///
/// A struct, not an async block: the task holds each field once, where an async block (with
/// an async fn for the driver) also kept references to hyper's connection, the socket and
/// the server's state, the references the driver's poll closure took to its locals, and its
/// own discriminants: 120 bytes more in every connection task, idle ones included.
pub(super) struct Serve<H: Respond> {
    /// hyper's connection and the socket; `None` once finished (or never opened).
    serving: Option<Serving<H>>,
    /// Shutdown, and the server's state (`watch.source()`).
    watch: Watch<Arc<Shared<H>>>,
    /// Counts the connection until it ends (handed to the lingering close, if any).
    active: Option<ConnectionGuard>,
    /// The idle timer and the progress seen when it last fired. It fires every
    /// `idle_timeout`; the connection closes when a whole period passed with no progress and
    /// no handler running (so after 1 to 2 periods of idleness).
    idle: Option<(spindle::time::Sleep, u64)>,
    /// HTTP/2's send timer and the count of writes when it last fired. It fires every
    /// `http2_send_timeout`; the connection closes when a whole period passed with a body
    /// stalled on the peer's window and no byte written.
    send: Option<(spindle::time::Sleep, u32)>,
    /// Shutdown began: hyper was told to finish gracefully.
    draining: bool,
    /// hyper's result once its connection future has finished; the coalesced bytes it left
    /// are drained before the driver returns it.
    finished: Option<Result<(), hyper::Error>>,
}

impl<H: Respond> Serve<H> {
    /// Drives the connection to its end.
    fn poll_drive(&mut self, cx: &mut std::task::Context<'_>) -> Poll<End> {
        let Some(Serving { conn, handle }) = &mut self.serving else {
            return Poll::Ready(End::Driver(GoAway::Idle));
        };
        let state = handle.attached();
        let http2 = matches!(conn, HyperConn::Http2(_));
        if self.finished.is_none() {
            if !self.draining && self.watch.poll_triggered(cx).is_ready() {
                // Graceful: an idle connection closes now, a busy one after its response.
                // hyper closes idle keep-alive connections itself, but waits for the first
                // request on a connection that has not had one yet: close those here.
                self.draining = true;
                if !state.requested.load(Ordering::Relaxed) {
                    return Poll::Ready(End::Driver(GoAway::Idle));
                }
                conn.graceful_shutdown();
            }
            if let Poll::Ready(r) = Pin::new(&mut *conn).poll(cx) {
                self.finished = Some(r);
            } else if http2 && state.refused.load(Ordering::Relaxed) >= REFUSALS_BEFORE_GOAWAY {
                log::debug!("spindle-http: a client kept opening streams past its running handlers' limit");
                return Poll::Ready(End::Driver(GoAway::Calm));
            }
        }
        // hyper has done all it can in this poll: write what it left in the coalescing
        // buffer (one system call for a batch of pipelined responses).
        match handle.poll_drain(cx) {
            Poll::Ready(Ok(())) => {
                if let Some(r) = self.finished.take() {
                    return Poll::Ready(End::Hyper(r));
                }
            }
            // The peer is gone: nothing more can be written.
            Poll::Ready(Err(_)) => return Poll::Ready(self.finished.take().map_or(End::Gone, End::Hyper)),
            Poll::Pending => {}
        }
        if let (Some((sleep, seen)), Some(timeout)) =
            (&mut self.idle, self.watch.source().config.idle_timeout)
        {
            while Pin::new(&mut *sleep).poll(cx).is_ready() {
                let progress = handle.progress();
                if state.busy.load(Ordering::Relaxed) == 0 && progress == *seen {
                    return Poll::Ready(End::Driver(GoAway::Idle)); // idle: drop the connection
                }
                *seen = progress;
                sleep.reset(spindle::time::deadline_after(timeout));
            }
        }
        if let (Some((sleep, seen)), Some(timeout)) =
            (&mut self.send, self.watch.source().config.http2_send_timeout)
        {
            while Pin::new(&mut *sleep).poll(cx).is_ready() {
                let writes = handle.writes();
                if state.stalled.load(Ordering::Relaxed) > 0 && writes == *seen {
                    log::debug!("spindle-http: closing an HTTP/2 connection whose client read nothing for {timeout:?}");
                    return Poll::Ready(End::Driver(GoAway::SendTimeout));
                }
                *seen = writes;
                sleep.reset(spindle::time::deadline_after(timeout));
            }
        }
        Poll::Pending
    }
}

impl<H: Respond> Future for Serve<H> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let end = std::task::ready!(this.poll_drive(cx));
        let http2 = matches!(this.serving, Some(Serving { conn: HyperConn::Http2(_), .. }));
        // Whether to close gently, and the GOAWAY to say first.
        let (gentle, goaway) = match end {
            // hyper wrote its 400/431 response (drained above).
            End::Hyper(Err(e)) if error_status(&e).is_some() => (true, None),
            // Under HTTP/2, h2 wrote its GOAWAY: the client must be able to read it.
            End::Hyper(Err(e)) => {
                log::debug!("spindle-http: connection error: {e}");
                (http2, None)
            }
            // hyper ended the connection on its own: after an answer that closes it
            // (keep-alive off, `Connection: close`, a 413 before the body was read), when the
            // client may still be sending; or at the client's end, when the lingering read
            // ends at once. Under HTTP/1, not when shutdown told it to finish: then it also
            // closes idle keep-alive connections, whose clients may not close theirs for a
            // while, and a shutdown is not held up for them. Under HTTP/2 always: the client
            // reads the GOAWAY that says which streams were served.
            End::Hyper(Ok(())) => (http2 || !this.draining, None),
            // The driver closed it: idle, shutdown before a first request, and under HTTP/2
            // a stalled or abusive client, told why.
            End::Driver(why) => (http2, Some(why)),
            End::Gone => (false, None),
        };
        if gentle {
            // Closed gently, in a task of its own: its state would otherwise add its room to
            // every connection task. It keeps the connection counted until the close ends.
            // hyper's connection goes first: it holds the socket's other references (its
            // `Io`, the service's counters), so the stream can be taken back only then.
            if let (Some(Serving { conn, handle }), Some(active)) = (this.serving.take(), this.active.take())
            {
                drop(conn);
                let said = goaway.is_some_and(|why| handle.queue_final(&why.frame()));
                spawn_closing(handle, said, active);
            }
        }
        // Finished: hyper's connection and the socket go now (a second poll finds none), then
        // the connection stops being counted.
        this.serving = None;
        this.active = None;
        Poll::Ready(())
    }
}

/// The status of hyper's automatic response to a parse error (as hyper's `on_error`).
fn error_status(e: &hyper::Error) -> Option<&'static str> {
    if !e.is_parse() || e.is_parse_version_h2() || e.is_parse_status() {
        None
    } else if e.is_parse_too_large() {
        if e.to_string().contains("URI") {
            Some("414 URI Too Long")
        } else {
            Some("431 Request Header Fields Too Large")
        }
    } else {
        Some("400 Bad Request")
    }
}

/// hyper's connection future for either protocol. The HTTP/1 one inline (every connection
/// task has room for it anyway), the larger HTTP/2 one boxed (see above).
#[allow(clippy::large_enum_variant)]
pub(super) enum HyperConn<H: Respond> {
    Http1(hyper::server::conn::http1::Connection<socket::Io<Counters>, Service<H>>),
    Http2(Pin<Box<Http2Conn<H>>>),
}

/// hyper's HTTP/2 connection future.
type Http2Conn<H> = hyper::server::conn::http2::Connection<socket::Io<Counters>, Service<H>, TaskExecutor>;

impl<H: Respond> HyperConn<H> {
    pub(super) fn graceful_shutdown(&mut self) {
        match self {
            HyperConn::Http1(c) => Pin::new(c).graceful_shutdown(),
            HyperConn::Http2(c) => c.as_mut().graceful_shutdown(),
        }
    }
}

impl<H: Respond> Future for HyperConn<H> {
    type Output = Result<(), hyper::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            HyperConn::Http1(c) => Pin::new(c).poll(cx),
            HyperConn::Http2(c) => c.as_mut().poll(cx),
        }
    }
}
