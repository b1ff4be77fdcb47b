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
//!   the coalescing buffer (module `transport::socket`), and before it returns hyper's result.
//! - **No reset under the last answer.** A connection that ends after an answer (hyper
//!   ending it on its own, its 400/431, or the own path's closing answer) is half-closed and
//!   read until the client closes it, bounded in bytes and time ([`close::lingering_close`]),
//!   rather than closed with the client's bytes unread: that would reset it, and the
//!   client's read of the answer would fail (RFC 9112 §9.6). It stays counted in `active`
//!   meanwhile. HTTP/1 connections the driver closes (idle, shutdown before a request) and
//!   those hyper finishes at shutdown (idle keep-alive ones among them) close at once.
//! - **Every HTTP/2 end is a GOAWAY, then a gentle close.** Whether hyper ends an HTTP/2
//!   connection (in an error or not: h2 has written its GOAWAY) or the driver does (idle,
//!   shutdown before a request, a response stalled on the client's window past
//!   `http2_send_timeout`, a client that kept opening refused streams), it closes as above;
//!   the driver first writes a GOAWAY of its own ([`close::GoAway`]) once hyper's connection is
//!   gone, unless the socket is cut inside a frame (module `transport::socket`, "whole frames or
//!   nothing").

use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use spindle::net::TcpStream;

use spindle::graceful::{ConnectionGuard, Watch};

use crate::server::counters::Counters;
use crate::server::handler::Respond;
use crate::server::origin::Peer;
use crate::server::service::Service;
use crate::server::shared::Shared;
use crate::transport::socket;
use crate::transport::stream::Transport;

mod close;
mod serve;

use self::close::spawn_lingering_close;
use self::serve::{serve, HyperConn, Serve, Serving};

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
    let mut watch = Watch::new(shared);
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
        if watch.poll_triggered(cx).is_ready()
            || deadline.as_mut().is_some_and(|d| Pin::new(d).poll(cx).is_ready())
        {
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
        let h2 = shared.config.http2 && crate::server::tls::negotiated_h2(&stream);
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
    tls: &crate::server::tls::TlsConfig,
    shared: &Shared<H>,
) -> Option<crate::transport::stream::ServerStream> {
    // Boxed: rustls's connection state would otherwise be part of every connection task's.
    let mut accept = Box::pin(crate::server::tls::acceptor(tls).accept(stream));
    let mut deadline = spindle::time::sleep_future(tls.handshake_timeout);
    let mut watch = Watch::new(shared);
    let result = poll_fn(|cx| {
        if let Poll::Ready(r) = accept.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        if watch.poll_triggered(cx).is_ready() {
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
                let own = crate::server::h1::serve(stream, replay, shared.clone(), Peer::new(peer));
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
    let (io, handle) = socket::new::<Counters>(transport, coalesce, replay);
    let http2 = proto == Proto::Http2;
    let service =
        Service { shared: shared.clone(), counters: handle.attached_ref(), peer: Peer::new(peer), http2 };
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
        fut: Pin<Box<dyn Future<Output = crate::server::h1::Outcome> + Send>>,
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
            crate::server::h1::Outcome::Closed => Poll::Ready(()),
            crate::server::h1::Outcome::Linger(stream) => {
                if let Some(active) = active.take() {
                    spawn_lingering_close(stream, active);
                }
                Poll::Ready(())
            }
            crate::server::h1::Outcome::Handoff { stream, replay } => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::config::Config;
    use crate::server::handler::Blocking;
    use crate::transport::body::Body;
    use hyper::{Request, Response};

    /// The connection task's state is what an idle connection costs besides hyper's two 8 KiB
    /// buffers: it must stay small (no inline buffers, no inline HTTP/2 or TLS state).
    #[test]
    fn connection_task_state_stays_small() {
        let handler = Blocking(Arc::new(|_req: Request<Body>| Response::new("hi")));
        let shared = Arc::new(Shared::new(handler, Config::default()));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        let stream = TcpStream::from_std(accepted).unwrap();
        let task = serve_connection(stream, Some(peer), shared.clone(), shared.drain.enter_connection());
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
