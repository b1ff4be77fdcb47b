//! spindle-http's own HTTP/1.1 path: plain requests (a small `Content-Length` body at
//! most, nothing special; module `head`) on a plain socket are read, handed to the handler
//! and answered here, without hyper's general dispatcher; the first request that is
//! anything else hands the connection to hyper, which serves it from that request on.
//!
//! Why: a hello-world request through hyper costs spindle-http far more user-space
//! instructions than a path of its own (`docs/perf/http.md`, "An HTTP/1 path without
//! hyper"; `docs/decisions/011-own-http1-path.md`), the difference between trailing and leading
//! may-minihttp's CPU per request. Chunked, large or slow bodies, `Expect`, upgrades,
//! HTTP/1.0 and malformed input stay hyper's: its request smuggling defences and error
//! answers are not rewritten here.
//!
//! Invariants:
//!
//! - **In order, once.** Requests are answered one at a time in the order they came
//!   (pipelined ones too); a request is either answered here or, with every byte after it,
//!   replayed to hyper: the hand-off first writes every answer given here, then passes the
//!   unread bytes, so hyper starts exactly at the request it was handed.
//! - **Bounded memory.** The output buffer is written out when it passes
//!   [`COALESCE_LIMIT`] (module `transport::socket`; larger body pieces go to the socket without a
//!   copy), and before every wait for the client; a head still incomplete past
//!   [`MAX_PARTIAL`] bytes is handed to hyper, which applies the server's limits, and so is
//!   a request whose body did not come with its head or would not fit in [`MAX_PARTIAL`]
//!   with it. Idle connections keep no output buffer (it goes back to the thread's spare
//!   slot once written) and no read buffer beyond the bytes not yet served.
//! - **Bounded waits.** Waiting for a request ends at shutdown, at the idle timeout, and,
//!   while a head has begun but is incomplete (or for the first request), at the header
//!   read timeout (this path never waits for a body: hyper does, with its rate limit).
//!   Waiting to write (a client that does not read) or for a streamed body's next piece
//!   ends at the idle timeout: a whole period with no byte moved. A running handler is
//!   never timed out (as under hyper).
//! - **Graceful shutdown.** An idle connection closes at once; one with a request in its
//!   handler answers it with `Connection: close`, then closes.
//! - **Gentle close.** A connection this path closes after an answer (the client asked for
//!   it, keep-alive is off, or shutdown) is not closed with the client's next bytes unread
//!   in the socket: that would reset it (RFC 9112 §9.6), and the client's read of the answer
//!   would end in an error. It is half-closed and read until the client closes, bounded in
//!   bytes and time (module `conn`'s lingering close, in a task of its own that keeps the
//!   connection counted).

mod encode;
mod head;

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::Body as _;
use hyper::{Method, Response};
use spindle::net::TcpStream;
use spindle::time::Sleep;

use self::encode::{BodyShape, Framing};
use self::head::Parsed;
use spindle::graceful::Watch;

use crate::server::handler::{Busy, Respond};
use crate::server::origin::{Origin, Peer};
use crate::server::shared::Shared;
use crate::transport::body::Body;
use crate::transport::socket::COALESCE_LIMIT;

/// The longest incomplete head this path waits on, and the longest request (head and body)
/// it serves; past it hyper takes the connection.
const MAX_PARTIAL: usize = 8 * 1024;

/// The most bytes one read takes (into the thread's scratch buffer).
const READ_SIZE: usize = 16 * 1024;

thread_local! {
    /// This thread's read buffer (reads land here and their bytes are appended to the
    /// connection's buffer: a connection needs no zeroed room of its own to read into) and
    /// its spare output buffer (see "Bounded memory").
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    static SPARE_OUT: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// How a connection served here ended.
pub(crate) enum Outcome {
    /// Closed: by the client, the idle timeout, shutdown while idle, or an error.
    Closed,
    /// Closed by the server after its last answer (see "Gentle close"): the caller
    /// half-closes the stream and reads what the client still sends before closing it.
    Linger(TcpStream),
    /// hyper serves the rest: the stream, and the bytes read from it but not served here.
    Handoff { stream: TcpStream, replay: Vec<u8> },
}

/// Serves a plain HTTP/1.1 connection; `first` holds bytes already read from it (the sniff
/// for HTTP/2's preface).
pub(crate) fn serve<H: Respond>(
    stream: TcpStream,
    first: Vec<u8>,
    shared: Arc<Shared<H>>,
    peer: Peer,
) -> impl Future<Output = Outcome> + Send + 'static {
    let config = &shared.config;
    let origin = Origin { peer, stack_size: config.stack_size, http2: false };
    let (keep_alive, batch) = (config.keep_alive, config.pipeline_flush);
    // A request this path would wait on past `max_partial` goes to hyper (with the head
    // limit: a head longer than hyper takes gets its `431`).
    let max_partial = config.head_limit().min(MAX_PARTIAL);
    let limits = head::Limits {
        max_headers: config.max_headers,
        max_head: config.head_limit(),
        max_request: max_partial,
        max_body: config.body_limits.max_size,
    };
    let mut conn = Conn {
        stream,
        buf: BytesMut::from(&first[..]),
        out: Vec::new(),
        idle: Idle::new(config.idle_timeout),
        header_timeout: config.header_read_timeout,
        header: None,
        watch: Watch::new(shared),
    };
    if conn.buf.is_empty() {
        conn.arm_header_timeout(); // the first request's head, when no sniff bounded it
    }
    // An async block, not an async fn: a fn's future keeps its arguments for its whole life
    // (the stream and the server's state a second time, in every connection).
    async move {
        loop {
            // Every complete head in the buffer, in order; the bytes read are shared by the
            // requests' URIs and header values (no copies).
            let data = conn.buf.split().freeze();
            let mut at = 0;
            let mut hand_off = false;
            while at < data.len() {
                let (req, len, asked_close) = match head::parse(&data, at, &limits) {
                    Parsed::Request { req, len, close } => (req, len, close),
                    Parsed::Partial => break,
                    // Not served here. (Not awaited inside the match: its scrutinee would be
                    // kept across the await.)
                    _ => {
                        hand_off = true;
                        break;
                    }
                };
                at += len;
                conn.header = None;
                let head_request = req.method() == Method::HEAD;
                let handler = &conn.watch.source().handler;
                let Ok(res) = crate::server::trace::respond(handler, req, Busy::untracked(), &origin).await;
                let close = asked_close || !keep_alive || conn.shutting_down();
                // The head and a body in memory go into the output buffer here; what cannot (a
                // large body, a stream) is written by futures boxed apart: they are rare, and this
                // future's size is what every connection keeps.
                let (rest, close) = conn.start(res, head_request, close);
                let sent = match rest {
                    Rest::Done => Ok(()),
                    Rest::Large(data) => Box::pin(conn.write_large(data)).await,
                    Rest::Stream(body, framing) => Box::pin(conn.stream(body, framing)).await,
                };
                if sent.is_err() {
                    return Outcome::Closed;
                }
                if close {
                    return match conn.flush().await {
                        Ok(()) => Outcome::Linger(conn.stream),
                        Err(_) => Outcome::Closed,
                    };
                }
                // Bounded: a batch of pipelined answers goes out once it passes the limit
                // (heads alone can: bodiless answers to a read of 16 KiB of requests).
                if (!batch || conn.out.len() >= COALESCE_LIMIT) && conn.flush().await.is_err() {
                    return Outcome::Closed;
                }
            }
            if hand_off {
                // Boxed: it owns the connection's state, which would be a second copy in this
                // future.
                return Box::pin(conn.hand_off(&data[at..])).await;
            }
            if at < data.len() {
                conn.buf.extend_from_slice(&data[at..]); // an incomplete head: copied, rare
                if conn.buf.len() > max_partial {
                    let partial = std::mem::take(&mut conn.buf);
                    return Box::pin(conn.hand_off(&partial)).await;
                }
                if conn.header.is_none() {
                    conn.arm_header_timeout();
                }
            }
            drop(data);
            if conn.flush().await.is_err() {
                return Outcome::Closed;
            }
            match conn.read().await {
                Ok(0) | Err(_) => return Outcome::Closed,
                Ok(_) => {}
            }
        }
    }
}

/// What is left of a response once [`Conn::start`] wrote what it could.
enum Rest {
    Done,
    /// Body bytes that did not fit in the output buffer.
    Large(Bytes),
    /// A streamed body, framed so.
    Stream(Body, Framing),
}

/// One connection's state on this path.
struct Conn<H> {
    stream: TcpStream,
    /// Bytes read and not yet parsed.
    buf: BytesMut,
    /// Answers not yet written.
    out: Vec<u8>,
    idle: Idle,
    header_timeout: Option<Duration>,
    /// The header read timeout, armed while a head is incomplete.
    header: Option<Sleep>,
    watch: Watch<Arc<Shared<H>>>,
}

impl<H> Conn<H> {
    /// Gives the connection to hyper from the request that starts `rest` (every answer
    /// given here written first).
    async fn hand_off(mut self, rest: &[u8]) -> Outcome {
        match self.flush().await {
            Ok(()) => Outcome::Handoff { stream: self.stream, replay: rest.to_vec() },
            Err(_) => Outcome::Closed,
        }
    }

    fn shutting_down(&self) -> bool {
        self.watch.source().drain.is_triggered()
    }

    fn arm_header_timeout(&mut self) {
        self.header = self.header_timeout.map(spindle::time::sleep_future);
    }

    /// Reads what the client sent into `buf`: the count (0 at its end), or an error, also
    /// at shutdown or a timeout.
    async fn read(&mut self) -> io::Result<usize> {
        let Conn { stream, buf, idle, header, watch, .. } = self;
        poll_fn(|cx| {
            let polled = SCRATCH.with(|scratch| {
                let mut scratch = scratch.borrow_mut();
                if scratch.len() < READ_SIZE {
                    scratch.resize(READ_SIZE, 0);
                }
                let polled = futures_io::AsyncRead::poll_read(Pin::new(&mut *stream), cx, &mut scratch[..]);
                if let Poll::Ready(Ok(n)) = polled {
                    buf.extend_from_slice(&scratch[..n]);
                }
                polled
            });
            if polled.is_ready() {
                idle.progress += 1;
                return polled;
            }
            if watch.poll_triggered(cx).is_ready() {
                return Poll::Ready(Err(io::Error::other("server shutting down")));
            }
            if header.as_mut().is_some_and(|h| Pin::new(h).poll(cx).is_ready()) || idle.expired(cx) {
                return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
            }
            Poll::Pending
        })
        .await
    }

    /// Writes `data` to the socket, waiting at most an idle period without progress.
    async fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        let Conn { stream, idle, .. } = self;
        while !data.is_empty() {
            let n =
                poll_fn(|cx| match futures_io::AsyncWrite::poll_write(Pin::new(&mut *stream), cx, data) {
                    Poll::Pending if idle.expired(cx) => Poll::Ready(Err(io::ErrorKind::TimedOut.into())),
                    polled => polled,
                })
                .await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            idle.progress += 1;
            data = &data[n..];
        }
        Ok(())
    }

    /// Writes out the output buffer, which then goes back to the thread's spare slot.
    async fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let out = std::mem::take(&mut self.out);
        let written = self.write_all(&out).await;
        let mut out = out;
        out.clear();
        SPARE_OUT.with(|spare| {
            let kept = spare.take();
            // The larger of the two stays (the other is freed).
            spare.set(if kept.capacity() >= out.capacity() { kept } else { out });
        });
        written
    }

    /// The output buffer, taken from the thread's spare slot when this connection has none.
    fn out(&mut self) -> &mut Vec<u8> {
        if self.out.capacity() == 0 {
            self.out = SPARE_OUT.with(|spare| spare.take());
        }
        &mut self.out
    }

    /// Appends body bytes to the output; gives them back when they do not fit (see
    /// [`Conn::write_large`]).
    fn push_data(&mut self, data: Bytes) -> Option<Bytes> {
        if self.out.len() + data.len() > COALESCE_LIMIT {
            return Some(data);
        }
        self.out().extend_from_slice(&data);
        None
    }

    /// Writes body bytes that did not fit in the output: the output first, then the bytes,
    /// straight out when they are large (no copy).
    async fn write_large(&mut self, data: Bytes) -> io::Result<()> {
        self.flush().await?;
        if data.len() >= COALESCE_LIMIT {
            return self.write_all(&data).await;
        }
        self.out().extend_from_slice(&data);
        Ok(())
    }

    /// Writes a response's head into the output, and its body too when it is in memory and
    /// fits; returns what is left to write, and whether the connection closes after it
    /// (`close`, or the handler's `Connection: close`).
    fn start(&mut self, res: Response<Body>, head_request: bool, close: bool) -> (Rest, bool) {
        let (parts, body) = res.into_parts();
        let (status, headers) = (parts.status, &parts.headers);
        let (rest, close) = match body.into_full() {
            Ok(data) => {
                let shape = BodyShape::Full(data.len() as u64);
                let (framing, close) = encode::head(status, headers, shape, head_request, close, self.out());
                if framing == Framing::None || data.is_empty() {
                    (Rest::Done, close)
                } else {
                    (self.push_data(data).map_or(Rest::Done, Rest::Large), close)
                }
            }
            Err(body) => {
                let shape = BodyShape::Stream(body.size_hint().exact());
                let (framing, close) = encode::head(status, headers, shape, head_request, close, self.out());
                // No body to send: the stream is dropped unread.
                (if framing == Framing::None { Rest::Done } else { Rest::Stream(body, framing) }, close)
            }
        };
        head::give_back_map(parts.headers);
        (rest, close)
    }

    /// Sends a streamed body. What is buffered goes out whenever the body has nothing ready,
    /// so that a slow stream (server-sent events) reaches the client as it is produced.
    async fn stream(&mut self, mut body: Body, framing: Framing) -> io::Result<()> {
        let mut sent = 0u64;
        loop {
            let mut frame = poll_fn(|cx| Poll::Ready(Pin::new(&mut body).poll_frame(cx))).await;
            if frame.is_pending() {
                self.flush().await?;
                let idle = &mut self.idle;
                frame = poll_fn(|cx| match Pin::new(&mut body).poll_frame(cx) {
                    Poll::Pending if idle.expired(cx) => {
                        Poll::Ready(Poll::Ready(Some(Err(io::Error::from(io::ErrorKind::TimedOut).into()))))
                    }
                    Poll::Pending => Poll::Pending,
                    ready => Poll::Ready(ready),
                })
                .await;
            }
            let Poll::Ready(frame) = frame else { unreachable!("waited for above") };
            match frame {
                None => {
                    return match framing {
                        Framing::Chunked => {
                            self.out().extend_from_slice(b"0\r\n\r\n");
                            Ok(())
                        }
                        Framing::Length(len) if sent == len => Ok(()),
                        _ => Err(io::Error::other("response body shorter than its content-length")),
                    };
                }
                Some(Err(e)) => {
                    log::debug!("spindle-http: response body failed: {e}");
                    return Err(io::Error::other(e));
                }
                Some(Ok(frame)) => {
                    // Trailers are not sent: no request asked for them (one with `TE` goes
                    // to hyper, module `head`).
                    let Ok(data) = frame.into_data() else { continue };
                    if data.is_empty() {
                        continue; // an empty chunk would end a chunked body
                    }
                    sent += data.len() as u64;
                    match framing {
                        Framing::Length(len) if sent > len => {
                            return Err(io::Error::other("response body longer than its content-length"));
                        }
                        Framing::Chunked => {
                            encode::chunk_start(data.len(), self.out());
                            if let Some(data) = self.push_data(data) {
                                self.write_large(data).await?;
                            }
                            self.out().extend_from_slice(b"\r\n");
                        }
                        _ => {
                            if let Some(data) = self.push_data(data) {
                                self.write_large(data).await?;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The idle timeout: a timer that fires every period, and the progress (reads and writes
/// that moved bytes) seen when it last fired. Expired when a whole period passed without
/// progress (so after one to two periods of idleness), as under hyper (module `conn`).
struct Idle {
    timer: Option<(Sleep, Duration)>,
    progress: u64,
    seen: u64,
}

impl Idle {
    fn new(timeout: Option<Duration>) -> Idle {
        Idle { timer: timeout.map(|t| (spindle::time::sleep_future(t), t)), progress: 0, seen: 0 }
    }

    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        let Some((sleep, period)) = &mut self.timer else { return false };
        while Pin::new(&mut *sleep).poll(cx).is_ready() {
            if self.progress == self.seen {
                return true;
            }
            self.seen = self.progress;
            sleep.reset(spindle::time::deadline_after(*period));
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::config::Config;
    use crate::server::handler::Blocking;
    use hyper::{Request, Response};

    /// What every connection on this path keeps besides its task and the bytes it has read
    /// and not yet served: its future (in a box of its own), idle ones included. Rare,
    /// large states (the hand-off, streamed and large bodies) are boxed apart.
    #[test]
    fn the_connection_future_stays_small() {
        let handler = Blocking(Arc::new(|_req: Request<Body>| Response::new("hi")));
        let shared = Arc::new(Shared::new(handler, Config::default()));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let stream = TcpStream::from_std(accepted).unwrap();
        let fut = serve(stream, Vec::new(), shared, Peer::new(None));
        let size = std::mem::size_of_val(&fut);
        assert!(size <= 960, "a connection's future takes {size} bytes");
        drop((fut, client));
    }
}
