//! A response body of the client: it gives its connection back to the pool at its end, and
//! bounds each wait for its data (the read timeout).
//!
//! # Invariants
//!
//! - **Given back only whole.** The connection (or HTTP/2 lease) goes back to the pool when
//!   the body has ended (`Ready(None)`); a body dropped before, or ended by an error, closes
//!   an HTTP/1.1 connection instead (it may still carry unread bytes).
//! - **No silent hang.** While the reader waits for data on a spindle worker, a timer is
//!   armed; when it fires and no frame came since it was armed, the body ends with a
//!   `ReadTimeout` error. A frame since then re-arms it for a whole read timeout, so a body
//!   that keeps coming is never cut, and a stalled one errs after between one and two read
//!   timeouts of silence.
//! - **The request's timer goes on.** When the request timeout is no longer than the read
//!   timeout, the timer that bounded the wait for the head (already in the worker's wheel,
//!   with the reader's waker) moves into the body as its first timer, whose firing only
//!   re-arms: a body read at once costs no timer of its own. (Its deadline is no later than
//!   a read timeout after the head, so the first wait stays bounded.)

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};
use hyper::body::Incoming;
use spindle::time::Sleep;

use crate::client::error::{ClientError, ClientErrorKind};
use crate::client::key::Key;
use crate::client::pool::{IdleFlag, Lease, Pool};
use crate::transport::body::{Body, BoxError};

/// What a response body gives back to the pool when it ends: its HTTP/1.1 connection, or
/// its share of the HTTP/2 one. (Dropped before the end, an HTTP/1.1 connection is closed
/// instead, as it may still carry unread body bytes; an HTTP/2 lease is given back.)
pub(super) enum GiveBack {
    H1 {
        pool: Arc<Pool>,
        key: Key,
        max_idle: usize,
        sender: hyper::client::conn::http1::SendRequest<Body>,
        idle: Arc<IdleFlag>,
    },
    H2(Lease),
}

impl GiveBack {
    /// An HTTP/1.1 connection goes back to the pool once hyper is ready for its next request:
    /// at once as a rule, else (it still sends the request body of a server that answered
    /// before reading it, or is still settling) from a task that waits for that, so that no
    /// checkout gets a busy connection. One that closed meanwhile is dropped.
    pub(super) fn give(self) {
        match self {
            GiveBack::H1 { pool, key, max_idle, mut sender, idle } => {
                match sender.poll_ready(&mut Context::from_waker(std::task::Waker::noop())) {
                    Poll::Ready(Ok(())) => pool.put(&key, sender, idle, max_idle),
                    Poll::Ready(Err(_)) => {}
                    Poll::Pending if spindle::Handle::current().is_some() => {
                        drop(spindle::task::spawn_local(async move {
                            if sender.ready().await.is_ok() {
                                pool.put(&key, sender, idle, max_idle);
                            }
                        }));
                    }
                    Poll::Pending => {}
                }
            }
            GiveBack::H2(lease) => drop(lease),
        }
    }
}

/// A response body that hands its connection back to the pool at its end and bounds each
/// wait for its data (module docs).
pub(super) struct PooledBody {
    inner: Incoming,
    giveback: Option<GiveBack>,
    read_timeout: Option<Duration>,
    /// The timer of the wait for data, once one is armed.
    timer: Option<Sleep>,
    /// The timer is the request's: its firing re-arms, it does not end the body.
    inherited: bool,
    /// Frames received, and how many there were when the timer was armed.
    frames: u64,
    frames_at_arming: u64,
}

impl PooledBody {
    pub(super) fn new(inner: Incoming, giveback: GiveBack, read_timeout: Option<Duration>) -> PooledBody {
        PooledBody {
            inner,
            giveback: Some(giveback),
            read_timeout,
            timer: None,
            inherited: false,
            frames: 0,
            frames_at_arming: 0,
        }
    }

    /// The body the caller gets. `request_timer` is the timer of the wait for the head and
    /// the request timeout it was armed with ("the request's timer goes on").
    pub(super) fn into_body(mut self, request_timer: Option<(Sleep, Duration)>) -> Body {
        if self.inner.is_end_stream() {
            // No body (204, HEAD, Content-Length: 0): the connection is free now.
            if let Some(giveback) = self.giveback.take() {
                giveback.give();
            }
            return Body::empty();
        }
        if let (Some(read), Some((timer, request_limit))) = (self.read_timeout, request_timer) {
            if request_limit <= read {
                self.timer = Some(timer);
                self.inherited = true;
            }
        }
        Body::wrap(self)
    }

    /// The reader waits for data: arm the timer (on a worker) or let it run; `Ready` with the
    /// read timeout's error once a whole timer passed with no frame.
    fn poll_stall(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let Some(limit) = self.read_timeout else { return Poll::Pending };
        if !spindle::Handle::on_worker() {
            return Poll::Pending; // spindle's timers need a worker (documented)
        }
        loop {
            if self.timer.is_none() {
                // Armed now: silence from here on is what it measures.
                self.frames_at_arming = self.frames;
            }
            let timer = self
                .timer
                .get_or_insert_with(|| spindle::time::sleep_future(limit.min(spindle::time::NEVER)));
            if Pin::new(timer).poll(cx).is_pending() {
                return Poll::Pending;
            }
            if self.inherited || self.frames != self.frames_at_arming {
                // Data since it was armed (or the request's timer): wait a whole read timeout more.
                self.inherited = false;
                self.timer = None;
                continue;
            }
            // Stalled: the error ends the body, and the connection is not given back.
            self.timer = None;
            self.giveback = None;
            let message = format!("no response body data within {limit:?} (the read timeout)");
            return Poll::Ready(Some(Err(Box::new(ClientError::new(ClientErrorKind::ReadTimeout, message)))));
        }
    }
}

impl http_body::Body for PooledBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                this.timer = None;
                if let Some(giveback) = this.giveback.take() {
                    giveback.give();
                }
                Poll::Ready(None)
            }
            Poll::Ready(Some(frame)) => {
                this.frames += 1;
                Poll::Ready(Some(frame.map_err(Into::into)))
            }
            Poll::Pending => this.poll_stall(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
