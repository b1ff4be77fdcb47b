//! One connection, served by a `Send` task: it opens the connection (the TLS handshake, or
//! the sniff that tells HTTP/2's preface from an HTTP/1 request) and drives it until it
//! ends, the connection has been idle too long, or shutdown closes it: with spindle-http's
//! own HTTP/1 path (module `h1`) for plain HTTP/1 on a plain socket, which may hand the
//! connection to hyper once, or with hyper's connection future from the start.
//!
//! Invariants:
//!
//! - **Movable between requests.** The task owns everything of the connection (the own
//!   path's state or hyper's connection, the socket, the counters) and is `Send`: an idle
//!   worker takes it over between polls. Blocking handlers run on fibers of their own
//!   (module `handler`), which never move once started; the task waits for them as for any
//!   future.
//! - **One engine at a time.** hyper's connection is built only after the own path has
//!   ended and given the stream back (with the bytes it read and did not serve, replayed
//!   to hyper first); the task is counted in `active` across the hand-off.
//! - **Nothing held before the first byte.** A connection whose client has sent nothing yet
//!   holds no read buffer: the sniff reads into a buffer borrowed from its thread's spare
//!   slot and keeps it only while it holds bytes (a read that finds nothing gives the room
//!   back; no extra system call), and hands the bytes on in a buffer of their size, the room
//!   going back to the thread. An opening connection costs its task's state and the socket.
//! - **Bounded waits.** The sniff and the handshake end at the header (or idle) timeout, the
//!   handshake timeout, or shutdown; the driver at the idle timeout or shutdown (graceful:
//!   an idle connection closes now, a busy one after its response).
//! - **Nothing stranded.** Each time hyper has done all it can in a poll, the driver drains
//!   the coalescing buffer (module `socket`), and before it returns hyper's result.
//! - **No reset under the last answer.** A connection that ends after an answer (hyper
//!   ending it on its own, its 400/431, or the own path's closing answer) is half-closed and
//!   read until the client closes it, bounded in bytes and time ([`lingering_close`]),
//!   rather than closed with the client's bytes unread: that would reset it, and the
//!   client's read of the answer would fail (RFC 9112 §9.6). It stays counted in `active`
//!   meanwhile. HTTP/1 connections the driver closes (idle, shutdown before a request) and
//!   those hyper finishes at shutdown (idle keep-alive ones among them) close at once.
//! - **Every HTTP/2 end is a GOAWAY, then a gentle close.** Whether hyper ends an HTTP/2
//!   connection (in an error or not: h2 has written its GOAWAY) or the driver does (idle,
//!   shutdown before a request, a response stalled on the client's window past
//!   `http2_send_timeout`, a client that kept opening refused streams), it closes as above;
//!   the driver first writes a GOAWAY of its own ([`GoAway`]) once hyper's connection is
//!   gone, unless the socket is cut inside a frame (module `socket`, "whole frames or
//!   nothing").

use std::future::{poll_fn, Future};
use std::net::{Shutdown, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use spindle::net::TcpStream;

use crate::handler::Respond;
use crate::server::{ConnectionGuard, Shared};
use crate::service::{Peer, Service, REFUSALS_BEFORE_GOAWAY};
use crate::socket::{self, Transport};
use crate::watch::ShutdownWatch;

/// The first bytes of an HTTP/2 connection (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Which protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Http1,
    Http2,
}

/// The room the sniff reads into: the connection's first read (an HTTP/1 request with its
/// body, often) is taken whole, and replayed to the path that serves it.
const SNIFF_SIZE: usize = 8192;

thread_local! {
    /// This thread's spare sniff buffer ([`FirstBytes`]): `SNIFF_SIZE` bytes of room, taken
    /// by a read and put back when the read brought nothing or the sniff is done.
    static SNIFF_SPARE: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The bytes the sniff has read. A connection that has sent nothing holds no buffer: a read
/// borrows the thread's spare (see "Nothing held before the first byte") and keeps it only
/// while bytes are in it.
#[derive(Default)]
struct FirstBytes {
    /// Empty (no allocation) until a read brought bytes; then `SNIFF_SIZE` long, the bytes
    /// read at its start.
    buf: Vec<u8>,
    len: usize,
}

impl FirstBytes {
    /// One read into the room after the bytes read so far (`Ready(Ok(0))`: end of stream).
    fn poll_read(
        &mut self,
        stream: &mut TcpStream,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<usize>> {
        if self.buf.is_empty() {
            self.buf = SNIFF_SPARE.with(std::cell::Cell::take);
            self.buf.resize(SNIFF_SIZE, 0);
        }
        let polled = futures_io::AsyncRead::poll_read(Pin::new(stream), cx, &mut self.buf[self.len..]);
        if let Poll::Ready(Ok(n)) = polled {
            self.len += n;
        }
        if self.len == 0 {
            // Nothing read (waiting, or the end): the room goes back to the thread.
            let spare = std::mem::take(&mut self.buf);
            SNIFF_SPARE.with(|s| s.set(spare));
        }
        polled
    }

    fn seen(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The bytes read, in a buffer of their size: the room goes back to the thread, so that a
    /// connection's opening costs no zeroed `SNIFF_SIZE` allocation (the paths that take the
    /// bytes copy them anyway: the own HTTP/1 path into its buffer, hyper into its own).
    fn into_vec(mut self) -> Vec<u8> {
        let bytes = self.seen().to_vec();
        if !self.buf.is_empty() {
            let spare = std::mem::take(&mut self.buf);
            SNIFF_SPARE.with(|s| s.set(spare));
        }
        bytes
    }
}

/// Reads the connection's first bytes until they tell HTTP/2's preface (h2c by prior
/// knowledge) from an HTTP/1 request; returns the protocol and the bytes read, which hyper
/// is then given first. `None`: the client closed, stayed silent past the header timeout,
/// or the server is shutting down.
async fn sniff<H>(stream: &mut TcpStream, shared: &Shared<H>) -> Option<(Proto, Vec<u8>)> {
    let mut read = FirstBytes::default();
    let mut watch = ShutdownWatch::new(shared);
    let config = &shared.config;
    let limit = match (config.header_read_timeout, config.idle_timeout) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut deadline = limit.map(spindle::time::sleep_future);
    poll_fn(|cx| loop {
        let seen = read.seen();
        if !H2_PREFACE.starts_with(&seen[..seen.len().min(H2_PREFACE.len())]) {
            return Poll::Ready(Some(Proto::Http1));
        }
        if seen.len() >= H2_PREFACE.len() {
            return Poll::Ready(Some(Proto::Http2));
        }
        if watch.poll(cx) || deadline.as_mut().is_some_and(|d| Pin::new(d).poll(cx).is_ready()) {
            return Poll::Ready(None);
        }
        match read.poll_read(stream, cx) {
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(None),
            Poll::Ready(Ok(_)) => {}
            Poll::Pending => return Poll::Pending,
        }
    })
    .await
    .map(|proto| (proto, read.into_vec()))
}

/// Opens the connection: the TLS handshake (feature `tls`, protocol by ALPN) or the sniff
/// for HTTP/2's preface. `None`: closed before a request could be read.
async fn open<H>(
    mut stream: TcpStream,
    peer: Option<SocketAddr>,
    shared: &Shared<H>,
) -> Option<(Transport, Proto, Vec<u8>)> {
    #[cfg(feature = "tls")]
    if let Some(tls) = &shared.config.tls {
        let stream = handshake(stream, peer, tls, shared).await?;
        let h2 = shared.config.http2 && crate::tls::negotiated_h2(&stream);
        let proto = if h2 { Proto::Http2 } else { Proto::Http1 };
        return Some((Transport::Tls(Box::new(stream)), proto, Vec::new()));
    }
    let _ = peer;
    if !shared.config.http2 {
        return Some((Transport::Plain(stream), Proto::Http1, Vec::new()));
    }
    let (proto, replay) = sniff(&mut stream, shared).await?;
    Some((Transport::Plain(stream), proto, replay))
}

/// The server side of the TLS handshake, bounded by the handshake timeout and shutdown.
#[cfg(feature = "tls")]
async fn handshake<H>(
    stream: TcpStream,
    peer: Option<SocketAddr>,
    tls: &crate::tls::TlsConfig,
    shared: &Shared<H>,
) -> Option<crate::tls::ServerStream> {
    // Boxed: rustls's connection state would otherwise be part of every connection task's.
    let mut accept = Box::pin(crate::tls::acceptor(tls).accept(stream));
    let mut deadline = spindle::time::sleep_future(tls.handshake_timeout);
    let mut watch = ShutdownWatch::new(shared);
    let result = poll_fn(|cx| {
        if let Poll::Ready(r) = accept.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        if watch.poll(cx) {
            return Poll::Ready(Err(std::io::Error::other("server shutting down")));
        }
        if Pin::new(&mut deadline).poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("not finished within {:?}", tls.handshake_timeout),
            )));
        }
        Poll::Pending
    })
    .await;
    match result {
        Ok(stream) => Some(stream),
        Err(e) => {
            let peer = peer.map_or_else(|| "a client".to_owned(), |p| p.to_string());
            log::debug!("spindle-http: TLS handshake with {peer} failed: {e}");
            None
        }
    }
}

/// Serves one accepted connection to its end (the body of the connection's task), counted
/// by `active` until then.
///
/// Two phases, so that the long one does not carry the short one's state: an async fn keeps
/// its arguments for its whole life (rustc does not reuse their room), and every idle
/// connection pays for what its task keeps. Opening owns the stream until it becomes the
/// socket; then hyper's connection is built (synchronously) and handed to the serving phase,
/// which uses it in place.
pub(crate) fn serve_connection<H: Respond>(
    stream: TcpStream,
    peer: Option<SocketAddr>,
    shared: Arc<Shared<H>>,
    active: ConnectionGuard,
) -> impl Future<Output = ()> + Send + 'static {
    let opening = {
        let shared = shared.clone();
        async move {
            if shared.config.nodelay {
                let _ = stream.set_nodelay(true);
            }
            open(stream, peer, &shared).await
        }
    };
    Phases::Opening {
        fut: opening,
        then: Some(move |opened: Option<(Transport, Proto, Vec<u8>)>| match opened {
            Some((Transport::Plain(stream), Proto::Http1, replay)) if shared.config.http1_fast_path => {
                let own = crate::h1::serve(stream, replay, shared.clone(), Peer::new(peer));
                Engine::Own { fut: Box::pin(own), peer, shared, active: Some(active) }
            }
            opened => Engine::Hyper(Box::pin(serve(
                opened.map(|o| hyper_serving(o, &shared, peer)),
                shared,
                active,
            ))),
        }),
    }
}

/// hyper's connection over the opened transport.
fn hyper_serving<H: Respond>(
    (transport, proto, replay): (Transport, Proto, Vec<u8>),
    shared: &Arc<Shared<H>>,
    peer: Option<SocketAddr>,
) -> Serving<H> {
    // HTTP/2 frames are batched by h2 itself: no coalescing there.
    let coalesce = shared.config.pipeline_flush && proto == Proto::Http1;
    let (io, handle) = socket::new(transport, coalesce, replay);
    let http2 = proto == Proto::Http2;
    let service =
        Service { shared: shared.clone(), counters: handle.counters_ref(), peer: Peer::new(peer), http2 };
    let conn = match proto {
        Proto::Http1 => HyperConn::Http1(shared.http.serve_connection(io, service)),
        // Boxed: hyper's HTTP/2 connection is twice the size of its HTTP/1 one, and the
        // largest state is what every connection task allocates, idle ones included.
        Proto::Http2 => HyperConn::Http2(Box::pin(shared.http2.serve_connection(io, service))),
    };
    Serving { conn, handle }
}

/// The serving phase: spindle-http's own HTTP/1 path (module `h1`) until it ends or hands
/// the connection to hyper, or hyper's connection from the start.
enum Engine<H: Respond> {
    Own {
        /// Boxed: its type (an async block's) cannot be named here; one allocation per
        /// connection, and only this variant's room in the task.
        fut: Pin<Box<dyn Future<Output = crate::h1::Outcome> + Send>>,
        peer: Option<SocketAddr>,
        shared: Arc<Shared<H>>,
        /// Counts the connection until it ends (or passes to hyper's phase).
        active: Option<ConnectionGuard>,
    },
    /// Boxed: the task's state is as large as its largest variant, and hyper's connection
    /// would make every own-path connection, idle ones included, carry its room.
    Hyper(Pin<Box<Serve<H>>>),
}

impl<H: Respond> Future for Engine<H> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let Engine::Own { fut, peer, shared, active } = this else {
            let Engine::Hyper(serve) = this else { unreachable!() };
            return serve.as_mut().poll(cx);
        };
        match std::task::ready!(fut.as_mut().poll(cx)) {
            crate::h1::Outcome::Closed => Poll::Ready(()),
            crate::h1::Outcome::Linger(stream) => {
                if let Some(active) = active.take() {
                    spawn_lingering_close(stream, active);
                }
                Poll::Ready(())
            }
            crate::h1::Outcome::Handoff { stream, replay } => {
                let serving = hyper_serving((Transport::Plain(stream), Proto::Http1, replay), shared, *peer);
                let active = active.take().expect("the own path hands off once");
                *this = Engine::Hyper(Box::pin(serve(Some(serving), shared.clone(), active)));
                let Engine::Hyper(serve) = this else { unreachable!("just set") };
                serve.as_mut().poll(cx)
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// A future that runs `A`, then the future `then` makes of `A`'s output: the state of
    /// `A` is dropped before the second one starts, and the two share their memory.
    #[project = PhasesProj]
    enum Phases<A, F, B> {
        Opening { #[pin] fut: A, then: Option<F> },
        Serving { #[pin] fut: B },
    }
}

impl<A, F, B> Future for Phases<A, F, B>
where
    A: Future,
    F: FnOnce(A::Output) -> B,
    B: Future<Output = ()>,
{
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        if let PhasesProj::Opening { fut, then } = self.as_mut().project() {
            let Poll::Ready(out) = fut.poll(cx) else { return Poll::Pending };
            let then = then.take().expect("the opening phase finishes once");
            let next = then(out);
            self.set(Phases::Serving { fut: next });
        }
        match self.project() {
            PhasesProj::Serving { fut } => fut.poll(cx),
            PhasesProj::Opening { .. } => unreachable!("the serving phase was just set"),
        }
    }
}

/// hyper's connection future for either protocol. The HTTP/1 one inline (every connection
/// task has room for it anyway), the larger HTTP/2 one boxed (see above).
#[allow(clippy::large_enum_variant)]
enum HyperConn<H: Respond> {
    Http1(hyper::server::conn::http1::Connection<socket::Io, Service<H>>),
    Http2(Pin<Box<hyper::server::conn::http2::Connection<socket::Io, Service<H>, crate::exec::TaskExec>>>),
}

impl<H: Respond> HyperConn<H> {
    fn graceful_shutdown(&mut self) {
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

/// What the serving phase starts from.
struct Serving<H: Respond> {
    conn: HyperConn<H>,
    handle: socket::IoHandle,
}

/// The serving phase: hyper's connection driven to its end (see [`Serve`]).
fn serve<H: Respond>(
    serving: Option<Serving<H>>,
    shared: Arc<Shared<H>>,
    active: ConnectionGuard,
) -> Serve<H> {
    let idle = shared.config.idle_timeout.map(|d| (spindle::time::sleep_future(d), 0));
    let http2 = matches!(serving, Some(Serving { conn: HyperConn::Http2(_), .. }));
    let send =
        shared.config.http2_send_timeout.filter(|_| http2).map(|d| (spindle::time::sleep_future(d), 0));
    let watch = ShutdownWatch::new(shared);
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

/// Why the driver closed a connection, as an HTTP/2 GOAWAY says it (RFC 9113 §6.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoAway {
    /// Idle, or shutdown before a first request.
    Idle,
    /// Responses waited for the peer's window with nothing written for the send timeout.
    SendTimeout,
    /// The client kept opening streams past the refusals for running handlers (module
    /// `service`).
    Calm,
}

impl GoAway {
    /// The frame: a last stream id of 2^31-1 (any stream may have been processed: the
    /// safe claim, as the driver does not see stream ids), the error code and a short text.
    fn frame(self) -> Vec<u8> {
        let (code, text): (u32, &[u8]) = match self {
            GoAway::Idle => (0x0, b"idle"),                     // NO_ERROR
            GoAway::SendTimeout => (0x0, b"send timeout"),      // NO_ERROR
            GoAway::Calm => (0xb, b"too many refused streams"), // ENHANCE_YOUR_CALM
        };
        let len = 8 + text.len();
        let mut frame = Vec::with_capacity(9 + len);
        frame.extend_from_slice(&(len as u32).to_be_bytes()[1..]); // 24-bit length
        frame.extend_from_slice(&[0x7, 0x0]); // type GOAWAY, no flags
        frame.extend_from_slice(&0u32.to_be_bytes()); // stream 0
        frame.extend_from_slice(&0x7fff_ffffu32.to_be_bytes()); // last stream id
        frame.extend_from_slice(&code.to_be_bytes());
        frame.extend_from_slice(text);
        frame
    }
}

/// The future of the serving phase: drives hyper's connection future until it ends, the
/// connection has been idle for `idle_timeout`, or shutdown closes it, and drains the
/// coalescing buffer each time hyper has done all it can (see `socket.rs`). Under HTTP/2 it
/// also closes a connection whose responses are stalled on the client's window
/// (`http2_send_timeout`, module `meter`) or whose client keeps opening streams that are
/// refused (module `service`).
///
/// A struct, not an async block: the task holds each field once, where an async block (with
/// an async fn for the driver) also kept references to hyper's connection, the socket and
/// the server's state, the references the driver's poll closure took to its locals, and its
/// own discriminants: 120 bytes more in every connection task, idle ones included.
struct Serve<H: Respond> {
    /// hyper's connection and the socket; `None` once finished (or never opened).
    serving: Option<Serving<H>>,
    /// Shutdown, and the server's state (`watch.shared()`).
    watch: ShutdownWatch<Arc<Shared<H>>>,
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
        let state = handle.counters();
        let http2 = matches!(conn, HyperConn::Http2(_));
        if self.finished.is_none() {
            if !self.draining && self.watch.poll(cx) {
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
            (&mut self.idle, self.watch.shared().config.idle_timeout)
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
            (&mut self.send, self.watch.shared().config.http2_send_timeout)
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

/// Closes a connection hyper served gently, in a task of its own that keeps it counted
/// until the close ends: writes out the final frame queued on the socket, if `flush`, then
/// closes as [`lingering_close`] does, all within the lingering close's time.
fn spawn_closing(handle: socket::IoHandle, flush: bool, active: ConnectionGuard) {
    drop(spindle::task::spawn_async(async move {
        let _active = active;
        let mut deadline = spindle::time::sleep_future(LINGER_TIME);
        if flush {
            let written = poll_fn(|cx| {
                if Pin::new(&mut deadline).poll(cx).is_ready() {
                    return Poll::Ready(false);
                }
                handle.poll_write_out(cx).map(|r| r.is_ok())
            })
            .await;
            if !written {
                return;
            }
        }
        if let Some(stream) = handle.into_stream() {
            lingering_close(stream, deadline).await
        }
    }));
}

/// Closes gently ([`lingering_close`]) in a task of its own, which keeps the connection
/// counted until the close ends.
fn spawn_lingering_close(stream: TcpStream, active: ConnectionGuard) {
    drop(spindle::task::spawn_async(async move {
        let _active = active;
        lingering_close(stream, spindle::time::sleep_future(LINGER_TIME)).await
    }));
}

/// How long a gentle close reads what the client still sends, at most.
const LINGER_TIME: Duration = Duration::from_secs(2);

/// Half-closes and reads what the client still sends (at most 1 MiB, until `deadline`), so
/// that closing a socket with unread data (the rest of an oversized request, a request
/// pipelined behind a closing one, HTTP/2 frames sent before the client read a GOAWAY) does
/// not reset the connection before the client has read the last response (RFC 9112 §9.6,
/// RFC 9113 §6.8).
async fn lingering_close(mut stream: TcpStream, mut deadline: spindle::time::Sleep) {
    let _ = stream.shutdown(Shutdown::Write);
    // On the heap: an array here would be part of every connection task's state.
    let mut buf = vec![0u8; 4096];
    let mut total = 0usize;
    poll_fn(|cx| loop {
        if total >= 1 << 20 || Pin::new(&mut deadline).poll(cx).is_ready() {
            return Poll::Ready(());
        }
        match futures_io::AsyncRead::poll_read(Pin::new(&mut stream), cx, &mut buf) {
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(()),
            Poll::Ready(Ok(n)) => total += n,
            Poll::Pending => return Poll::Pending,
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Body, Request, Response};

    /// The connection task's state is what an idle connection costs besides hyper's two 8 KiB
    /// buffers: it must stay small (no inline buffers, no inline HTTP/2 or TLS state).
    #[test]
    fn connection_task_state_stays_small() {
        let handler = crate::handler::Blocking(Arc::new(|_req: Request<Body>| Response::new("hi")));
        let shared = Arc::new(crate::Builder::new().shared(handler));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        let stream = TcpStream::from_std(accepted).unwrap();
        let task = serve_connection(stream, Some(peer), shared.clone(), shared.active.enter_connection());
        let size = std::mem::size_of_val(&task);
        assert!(size <= 792, "a connection task's state takes {size} bytes");
        drop((task, client));
    }

    /// "Nothing held before the first byte": a read that finds nothing leaves the sniff with
    /// no buffer (an idle opening connection would otherwise hold `SNIFF_SIZE` bytes); the
    /// bytes that come later are read, kept, and handed on without the room.
    #[test]
    fn the_sniff_holds_no_buffer_before_the_first_byte() {
        use std::io::Write;
        let rt = spindle::Runtime::new().unwrap();
        rt.block_on(async {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let mut stream = TcpStream::from_std(listener.accept().unwrap().0).unwrap();
            let mut read = FirstBytes::default();
            poll_fn(|cx| {
                assert!(read.poll_read(&mut stream, cx).is_pending(), "the client has sent nothing");
                Poll::Ready(())
            })
            .await;
            assert_eq!(read.buf.capacity(), 0, "the sniff holds a buffer before the first byte");
            let request = b"GET / HTTP/1.1\r\n";
            client.write_all(request).unwrap();
            while read.seen().len() < request.len() {
                assert!(poll_fn(|cx| read.poll_read(&mut stream, cx)).await.unwrap() > 0);
            }
            assert_eq!(read.into_vec(), request);
            let spare = SNIFF_SPARE.with(std::cell::Cell::take);
            assert_eq!(spare.len(), SNIFF_SIZE, "the room goes back to the thread once the sniff is done");
        });
    }
}
