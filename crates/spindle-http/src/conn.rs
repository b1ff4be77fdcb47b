//! One fiber per connection: it drives hyper's `serve_connection` future with
//! `spindle::task::block_on`, so a blocking handler called from the service parks this fiber.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::io::Read;
use std::net::{Shutdown, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use spindle::net::{TcpListener, TcpStream};

use crate::handler::Respond;
use crate::server::Shared;
use crate::service::{Origin, Service};
use crate::socket::{self, Transport};

/// Keeps this fiber's waker in the server's shutdown list while it waits, so that
/// `Server::shutdown` can wake it.
struct ShutdownWatch<'a, H> {
    shared: &'a Shared<H>,
    key: Option<u64>,
    waker: Option<Waker>,
}

impl<'a, H> ShutdownWatch<'a, H> {
    fn new(shared: &'a Shared<H>) -> Self {
        ShutdownWatch { shared, key: None, waker: None }
    }

    /// Whether shutdown has begun; otherwise makes sure `cx`'s waker is registered.
    fn poll(&mut self, cx: &mut Context<'_>) -> bool {
        if self.shared.shutdown.is_triggered() {
            return true;
        }
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
            self.key = Some(self.shared.shutdown.register(self.key, cx.waker().clone()));
            // Triggered between the check and the registration: the trigger may have missed us.
            return self.shared.shutdown.is_triggered();
        }
        false
    }
}

impl<H> Drop for ShutdownWatch<'_, H> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.shared.shutdown.deregister(key);
        }
    }
}

/// An accept loop: runs until shutdown, spawning a fiber per connection, on this worker, or
/// with `spread: Some(n)` on each of the n workers in turn. Connection fibers never move.
pub(crate) fn accept_loop<H: Respond>(listener: TcpListener, shared: Arc<Shared<H>>, spread: Option<usize>) {
    let _active = shared.active.enter();
    let mut next_worker = 0usize;
    let mut watch = ShutdownWatch::new(&shared);
    loop {
        let accepted = spindle::task::block_on(poll_fn(|cx| {
            if watch.poll(cx) {
                return Poll::Ready(None);
            }
            listener.poll_accept(cx).map(Some)
        }));
        match accepted {
            None => break,
            Some(Ok((stream, peer))) => {
                let shared2 = shared.clone();
                let active = shared.active.enter();
                let builder = spindle::fiber::Builder::new()
                    .name(Origin::connection_name(Some(peer)))
                    .stack_size(shared.config.stack_size);
                let serve = move || {
                    let _active = active;
                    serve_connection(stream, Some(peer), &shared2);
                };
                let spawned = match spread {
                    Some(n) => {
                        next_worker = (next_worker + 1) % n;
                        builder.worker(next_worker).spawn(serve)
                    }
                    None => builder.spawn_local(serve),
                };
                if let Err(e) = spawned {
                    log::warn!("spindle-http: could not spawn a connection fiber: {e}");
                }
            }
            Some(Err(e)) => {
                // EMFILE, ENFILE, ENOBUFS...: the listener stays usable; back off a little.
                log::warn!("spindle-http: accept failed: {e}");
                spindle::time::sleep(Duration::from_millis(10));
            }
        }
    }
    drop(watch);
    drop(listener);
}

/// The first bytes of an HTTP/2 connection (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Which protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Http1,
    Http2,
}

/// Reads the connection's first bytes until they tell HTTP/2's preface (h2c by prior
/// knowledge) from an HTTP/1 request; returns the protocol and the bytes read, which hyper
/// is then given first. `None`: the client closed, stayed silent past the header timeout,
/// or the server is shutting down.
fn sniff<H>(stream: &mut TcpStream, shared: &Shared<H>) -> Option<(Proto, Vec<u8>)> {
    let mut buf = vec![0u8; 8192];
    let mut len = 0;
    let mut watch = ShutdownWatch::new(shared);
    let config = &shared.config;
    let limit = match (config.header_read_timeout, config.idle_timeout) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut deadline = limit.map(spindle::time::sleep_future);
    spindle::task::block_on(poll_fn(|cx| loop {
        let seen = &buf[..len];
        if !H2_PREFACE.starts_with(&seen[..len.min(H2_PREFACE.len())]) {
            return Poll::Ready(Some(Proto::Http1));
        }
        if len >= H2_PREFACE.len() {
            return Poll::Ready(Some(Proto::Http2));
        }
        if watch.poll(cx) || deadline.as_mut().is_some_and(|d| Pin::new(d).poll(cx).is_ready()) {
            return Poll::Ready(None);
        }
        match futures_io::AsyncRead::poll_read(Pin::new(&mut *stream), cx, &mut buf[len..]) {
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(None),
            Poll::Ready(Ok(n)) => len += n,
            Poll::Pending => return Poll::Pending,
        }
    }))
    .map(|proto| {
        buf.truncate(len);
        (proto, buf)
    })
}

/// Opens the connection: the TLS handshake (feature `tls`, protocol by ALPN) or the sniff
/// for HTTP/2's preface. `None`: closed before a request could be read.
fn open<H>(
    mut stream: TcpStream,
    peer: Option<SocketAddr>,
    shared: &Shared<H>,
) -> Option<(Transport, Proto, Vec<u8>)> {
    #[cfg(feature = "tls")]
    if let Some(tls) = &shared.config.tls {
        let stream = handshake(stream, peer, tls, shared)?;
        let h2 = shared.config.http2 && crate::tls::negotiated_h2(&stream);
        let proto = if h2 { Proto::Http2 } else { Proto::Http1 };
        return Some((Transport::Tls(Box::new(stream)), proto, Vec::new()));
    }
    let _ = peer;
    if !shared.config.http2 {
        return Some((Transport::Plain(stream), Proto::Http1, Vec::new()));
    }
    let (proto, replay) = sniff(&mut stream, shared)?;
    Some((Transport::Plain(stream), proto, replay))
}

/// The server side of the TLS handshake, bounded by the handshake timeout and shutdown.
#[cfg(feature = "tls")]
fn handshake<H>(
    stream: TcpStream,
    peer: Option<SocketAddr>,
    tls: &crate::tls::TlsConfig,
    shared: &Shared<H>,
) -> Option<crate::tls::ServerStream> {
    let mut accept = crate::tls::acceptor(tls).accept(stream);
    let mut deadline = spindle::time::sleep_future(tls.handshake_timeout);
    let mut watch = ShutdownWatch::new(shared);
    let result = spindle::task::block_on(poll_fn(|cx| {
        if let Poll::Ready(r) = Pin::new(&mut accept).poll(cx) {
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
    }));
    match result {
        Ok(stream) => Some(stream),
        Err(e) => {
            let peer = peer.map_or_else(|| "a client".to_owned(), |p| p.to_string());
            log::debug!("spindle-http: TLS handshake with {peer} failed: {e}");
            None
        }
    }
}

fn serve_connection<H: Respond>(stream: TcpStream, peer: Option<SocketAddr>, shared: &Arc<Shared<H>>) {
    let config = &shared.config;
    if config.nodelay {
        let _ = stream.set_nodelay(true);
    }
    let Some((transport, proto, replay)) = open(stream, peer, shared) else { return };
    let state = ConnState::default();
    // HTTP/2 frames are batched by h2 itself: no coalescing there.
    let coalesce = config.pipeline_flush && proto == Proto::Http1;
    let (io, handle) = socket::new(transport, coalesce, state.progress.clone(), replay);
    let origin = Origin { peer, stack_size: config.stack_size, inline: proto == Proto::Http1 };
    let service = Service {
        shared: shared.clone(),
        busy: state.busy.clone(),
        requests: state.requests.clone(),
        origin,
    };
    let result = match proto {
        Proto::Http1 => {
            let mut conn = shared.http.serve_connection(io, service);
            let result = drive(&mut conn, |c| c.graceful_shutdown(), &handle, &state, shared);
            drop(conn);
            result
        }
        Proto::Http2 => {
            let mut conn = shared.http2.serve_connection(io, service);
            drive(&mut conn, |c| c.graceful_shutdown(), &handle, &state, shared)
        }
    };
    if let Some(Err(e)) = result {
        if error_status(&e).is_some() {
            // hyper wrote its 400/431 response (drained by `drive`); close gently.
            if let Some(stream) = handle.into_stream() {
                lingering_close(stream);
            }
        } else {
            log::debug!("spindle-http: connection error: {e}");
        }
    }
}

/// The per-connection counters the driver and the service share.
#[derive(Default)]
struct ConnState {
    /// Socket system calls that moved bytes (for the idle timeout).
    progress: Rc<Cell<u64>>,
    /// Handlers running.
    busy: Rc<Cell<u32>>,
    /// Requests received.
    requests: Rc<Cell<u64>>,
}

/// Drives hyper's connection future `conn` on this fiber until it ends, the connection has
/// been idle for `idle_timeout`, or shutdown closes it; drains the coalescing buffer each
/// time hyper has done all it can (see `socket.rs`). `None`: closed by the driver.
fn drive<C, H>(
    conn: &mut C,
    graceful: impl Fn(Pin<&mut C>),
    handle: &socket::IoHandle,
    state: &ConnState,
    shared: &Shared<H>,
) -> Option<Result<(), hyper::Error>>
where
    C: Future<Output = Result<(), hyper::Error>> + Unpin,
{
    // The idle timer fires every `idle_timeout`; the connection closes when a whole period
    // passed with no progress and no handler running (so after 1 to 2 periods of idleness).
    let mut idle = shared.config.idle_timeout.map(|d| (d, spindle::time::sleep_future(d), 0u64));
    let mut watch = ShutdownWatch::new(shared);
    let mut draining = false;
    // hyper's result once its connection future has finished; the coalesced bytes it left
    // are drained before the driver returns it.
    let mut finished: Option<Result<(), hyper::Error>> = None;
    spindle::task::block_on(poll_fn(|cx| {
        while finished.is_none() {
            if !draining && watch.poll(cx) {
                // Graceful: an idle connection closes now, a busy one after its response.
                // hyper closes idle keep-alive connections itself, but waits for the first
                // request on a connection that has not had one yet: close those here.
                draining = true;
                if state.requests.get() == 0 {
                    return Poll::Ready(None);
                }
                graceful(Pin::new(&mut *conn));
            }
            if let Poll::Ready(r) = Pin::new(&mut *conn).poll(cx) {
                finished = Some(r);
                break;
            }
            // An inline blocking handler parks this fiber inside `conn.poll`; a shutdown
            // wake-up that arrived meanwhile was absorbed by that park. Look again.
            if draining || !shared.shutdown.is_triggered() {
                break;
            }
        }
        // hyper has done all it can in this poll: write what it left in the coalescing
        // buffer (one system call for a batch of pipelined responses).
        match handle.poll_drain(cx) {
            Poll::Ready(Ok(())) => {
                if let Some(r) = finished.take() {
                    return Poll::Ready(Some(r));
                }
            }
            // The peer is gone: nothing more can be written.
            Poll::Ready(Err(_)) => return Poll::Ready(finished.take()),
            Poll::Pending => {}
        }
        if let Some((timeout, sleep, seen)) = &mut idle {
            while Pin::new(&mut *sleep).poll(cx).is_ready() {
                if state.busy.get() == 0 && state.progress.get() == *seen {
                    return Poll::Ready(None); // idle: drop the connection
                }
                *seen = state.progress.get();
                sleep.reset(Instant::now() + *timeout);
            }
        }
        Poll::Pending
    }))
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

/// Half-closes and reads what the client still sends (bounded), so that closing a socket
/// with unread data (an oversized header, say) does not reset the connection before the
/// client has read the error response.
fn lingering_close(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut buf = [0u8; 4096];
    let mut total = 0usize;
    while total < 1 << 20 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
}
