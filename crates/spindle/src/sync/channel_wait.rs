//! The waits of channel operations: the slow paths of `Sender::send` and `Receiver::recv`
//! (module `channel`, which tries once under the lock first), the same with a deadline, and as
//! futures (for async tasks and `select!`).
//!
//! Invariants: every wait is written on [`Wait`](crate::park::wait::Wait): a value is moved
//! into or out of the queue only by the round that completes the operation, under the
//! channel's lock. A
//! `send` that times out or whose future is dropped gives its value back (or drops it with
//! the future) without having queued it (a rendezvous send takes its offered value back:
//! module `channel_rendezvous`); a `recv` that leaves takes nothing. A waiter that leaves
//! after being woken passes the wake-up on to the next waiter of its side if that side can
//! proceed, so no value (or free slot) is left with nobody woken for it. A receiver's
//! `Stream` polls are `recv_async`'s rounds on a wait the receiver keeps (its `stream` slot,
//! left when it drops). `closed` waits for the last receiver's drop, which wakes it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::channel::{
    closed_list, offer_list, recv_list, recv_pass_on, send_list, send_pass_on, Receiver, RecvError,
    RecvTimeoutError, SendError, SendTimeoutError, Sender, State, TryRecvError, TrySendError, Woken,
};
use super::channel_rendezvous::{offer_round, settled_round, Offer, Settled};
use crate::park::wait::{deadline_in, pass_none, Wait};
use crate::park::{self, WaitNode};

/// One send round under the lock: `Some` when done (sent, or disconnected).
fn send_round<T>(
    s: &mut State<T>,
    value: &mut Option<T>,
) -> Option<Result<Option<Arc<WaitNode>>, SendError<T>>> {
    let v = value.take().expect("a send future polled after it completed");
    match s.try_push(v) {
        Ok(wake) => Some(Ok(wake)),
        Err(TrySendError::Disconnected(v)) => Some(Err(SendError(v))),
        Err(TrySendError::Full(v)) => {
            *value = Some(v);
            None
        }
    }
}

/// A value taken, and the senders to wake for it.
type Taken<T> = (T, Woken);

pub(super) fn wake_one(node: Option<Arc<WaitNode>>) {
    if let Some(n) = node {
        park::wake(n);
    }
}

/// One receive round under the lock.
fn recv_round<T>(s: &mut State<T>) -> Option<Result<Taken<T>, RecvError>> {
    match s.try_pop() {
        Ok(got) => Some(Ok(got)),
        Err(TryRecvError::Disconnected) => Some(Err(RecvError)),
        Err(TryRecvError::Empty) => None,
    }
}

impl<T> Sender<T> {
    /// Sends `value`, waiting at most `timeout` while a bounded channel is full (on a
    /// rendezvous channel, until a receiver has taken it; a value taken just as the deadline
    /// passes counts as sent).
    ///
    /// ```
    /// use std::time::Duration;
    /// use spindle::sync::{channel, SendTimeoutError};
    /// let (tx, _rx) = channel(1);
    /// tx.send(1).unwrap();
    /// assert_eq!(tx.send_timeout(2, Duration::from_millis(5)), Err(SendTimeoutError::Timeout(2)));
    /// ```
    pub fn send_timeout(&self, value: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        self.send_until(value, deadline_in(timeout))
    }

    /// Sends `value`, waiting until `deadline` at the latest while a bounded channel is full.
    pub fn send_deadline(&self, value: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
        self.send_until(value, Some(deadline))
    }

    #[track_caller]
    fn send_until(&self, value: T, deadline: Option<Instant>) -> Result<(), SendTimeoutError<T>> {
        crate::sched::api::check_entry("channel send (with timeout)");
        if self.chan.rendezvous {
            return self.send_rendezvous(value, deadline);
        }
        self.send_waiting(value, deadline, "channel send (with timeout)")
    }

    /// The wait of a send on a channel that is not a rendezvous one: rounds of
    /// `send_round` on the channel's `send_waiters` until sent, disconnected or `deadline`.
    #[track_caller]
    pub(super) fn send_waiting(
        &self,
        value: T,
        deadline: Option<Instant>,
        reason: &'static str,
    ) -> Result<(), SendTimeoutError<T>> {
        let mut value = Some(value);
        let mut wait = Wait::new(&self.chan.state, send_list, send_pass_on);
        match wait.block(deadline, reason, |s, _| send_round(s, &mut value)) {
            Some(Ok(wake)) => {
                wake_one(wake);
                Ok(())
            }
            Some(Err(SendError(v))) => Err(SendTimeoutError::Disconnected(v)),
            None => Err(SendTimeoutError::Timeout(value.take().expect("a timed-out send keeps its value"))),
        }
    }

    /// Sends `value` from async code: a future that completes once the value is queued (on
    /// a rendezvous channel: taken by a receiver), or fails if every receiver is gone.
    /// Dropping it before it has queued sends nothing; a rendezvous send dropped after a
    /// receiver took its value (but before it was polled again to see that) has sent it.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// let (tx, rx) = spindle::sync::channel(1);
    /// let h = rt.spawn_async(async move {
    ///     tx.send_async(1).await.unwrap();
    ///     tx.send_async(2).await.unwrap(); // waits for room without blocking the worker
    /// });
    /// assert_eq!(rx.recv(), Ok(1));
    /// assert_eq!(rx.recv(), Ok(2));
    /// h.join().unwrap();
    /// ```
    pub fn send_async(&self, value: T) -> SendFuture<'_, T> {
        SendFuture {
            wait: Wait::new(&self.chan.state, send_list, send_pass_on),
            value: Some(value),
            offer: None,
            rendezvous: self.chan.rendezvous,
        }
    }

    /// Waits until every receiver is gone (parks a fiber, blocks a thread): a producer can
    /// stop producing for nobody (tokio's `Sender::closed`, blocking-style).
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// rt.block_on(|| {
    ///     let (tx, rx) = spindle::sync::channel::<u32>(1);
    ///     spindle::spawn(move || drop(rx));
    ///     tx.closed();
    ///     assert!(tx.is_closed());
    /// });
    /// ```
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: await [`closed_async`](Self::closed_async) there.
    #[track_caller]
    pub fn closed(&self) {
        self.closed_until(None);
    }

    /// [`closed`](Self::closed), waiting at most `timeout`; true if every receiver is gone.
    #[track_caller]
    pub fn closed_timeout(&self, timeout: Duration) -> bool {
        self.closed_until(deadline_in(timeout))
    }

    /// [`closed`](Self::closed), waiting until `deadline` at the latest; true if every
    /// receiver is gone.
    #[track_caller]
    pub fn closed_deadline(&self, deadline: Instant) -> bool {
        self.closed_until(Some(deadline))
    }

    #[track_caller]
    fn closed_until(&self, deadline: Option<Instant>) -> bool {
        Wait::new(&self.chan.state, closed_list, pass_none)
            .block(deadline, "channel closed", |s, _| (s.receivers == 0).then_some(()))
            .is_some()
    }

    /// A future that completes when every receiver is gone, for async code (tokio's
    /// `Sender::closed().await`): for a producer task to `select_async!` on, beside its work.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// let (tx, rx) = spindle::sync::channel::<u32>(1);
    /// let producer = rt.spawn_async(async move {
    ///     tx.closed_async().await;
    ///     "nobody listens"
    /// });
    /// drop(rx);
    /// assert_eq!(producer.join().unwrap(), "nobody listens");
    /// ```
    pub fn closed_async(&self) -> impl Future<Output = ()> + Send + '_
    where
        T: Send,
    {
        let mut wait = Wait::new(&self.chan.state, closed_list, pass_none);
        std::future::poll_fn(move |cx| wait.poll(cx, |s, _| (s.receivers == 0).then_some(())))
    }
}

impl<T> Receiver<T> {
    /// Receives a value, waiting at most `timeout` while the channel is empty.
    ///
    /// ```
    /// use std::time::Duration;
    /// use spindle::sync::{channel, RecvTimeoutError};
    /// let (tx, rx) = channel::<u8>(1);
    /// assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Err(RecvTimeoutError::Timeout));
    /// drop(tx);
    /// assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Err(RecvTimeoutError::Disconnected));
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_until(deadline_in(timeout))
    }

    /// Receives a value, waiting until `deadline` at the latest while the channel is empty.
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(deadline))
    }

    #[track_caller]
    fn recv_until(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        crate::sched::api::check_entry("channel recv (with timeout)");
        self.recv_waiting(deadline, "channel recv (with timeout)")
    }

    /// The wait of a receive: rounds of `recv_round` on the channel's `recv_waiters` until a
    /// value comes, every sender is gone, or `deadline`.
    #[track_caller]
    pub(super) fn recv_waiting(
        &self,
        deadline: Option<Instant>,
        reason: &'static str,
    ) -> Result<T, RecvTimeoutError> {
        let mut wait = Wait::new(&self.chan.state, recv_list, recv_pass_on);
        match wait.block(deadline, reason, |s, _| recv_round(s)) {
            Some(Ok((value, woken))) => {
                woken.wake();
                Ok(value)
            }
            Some(Err(RecvError)) => Err(RecvTimeoutError::Disconnected),
            None => Err(RecvTimeoutError::Timeout),
        }
    }

    /// Receives from async code: a future of the next value, `Err` once the channel is empty
    /// and every sender is gone. Dropping it before it completes takes nothing.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// let (tx, rx) = spindle::sync::channel(4);
    /// let h = rt.spawn_async(async move {
    ///     let mut sum = 0;
    ///     while let Ok(v) = rx.recv_async().await {
    ///         sum += v;
    ///     }
    ///     sum
    /// });
    /// for i in 1..=4 {
    ///     tx.send(i).unwrap();
    /// }
    /// drop(tx);
    /// assert_eq!(h.join().unwrap(), 10);
    /// ```
    pub fn recv_async(&self) -> RecvFuture<'_, T> {
        RecvFuture { wait: Wait::new(&self.chan.state, recv_list, recv_pass_on) }
    }
}

/// The future of [`Sender::send_async`].
#[must_use = "futures do nothing unless polled"]
pub struct SendFuture<'a, T> {
    wait: Wait<'a, State<T>>,
    value: Option<T>,
    /// A rendezvous send's offer, once made, and its wait until it settles (module
    /// `channel_rendezvous`). Dropping the future takes an unsettled offer back.
    offer: Option<(Offer<'a, T>, Wait<'a, State<T>>)>,
    rendezvous: bool,
}

impl<T> Unpin for SendFuture<'_, T> {}

impl<'a, T> SendFuture<'a, T> {
    /// A rendezvous send's poll: offer, then wait until the value is taken.
    fn poll_rendezvous(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), SendError<T>>> {
        if self.offer.is_none() {
            let value = &mut self.value;
            let (ticket, wake) = match self.wait.poll(cx, |s, _| offer_round(s, value)) {
                Poll::Ready(Ok(offered)) => offered,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            wake_one(wake);
            let state = self.wait.lock();
            self.offer = Some((Offer { state, ticket, open: true }, Wait::new(state, offer_list, pass_none)));
        }
        let (offer, wait) = self.offer.as_mut().expect("offered above");
        let ticket = offer.ticket;
        let settled = match wait.poll(cx, |s, _| settled_round(s, ticket)) {
            Poll::Ready(settled) => settled,
            Poll::Pending => return Poll::Pending,
        };
        let (offer, _) = self.offer.take().expect("offered above");
        match (settled, offer.take_back()) {
            (_, Ok(())) => Poll::Ready(Ok(())),
            (Settled::NoReceiver, Err(v)) => Poll::Ready(Err(SendError(v))),
            (Settled::Taken, Err(_)) => unreachable!("a taken offer is not given back"),
        }
    }
}

impl<T> Future for SendFuture<'_, T> {
    type Output = Result<(), SendError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.rendezvous {
            return this.poll_rendezvous(cx);
        }
        let value = &mut this.value;
        match this.wait.poll(cx, |s, _| send_round(s, value)) {
            Poll::Ready(Ok(wake)) => {
                wake_one(wake);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The future of [`Receiver::recv_async`].
#[must_use = "futures do nothing unless polled"]
pub struct RecvFuture<'a, T> {
    wait: Wait<'a, State<T>>,
}

impl<T> Future for RecvFuture<'_, T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut().wait.poll(cx, |s, _| recv_round(s)) {
            Poll::Ready(Ok((value, woken))) => {
                woken.wake();
                Poll::Ready(Ok(value))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Unpin for RecvFuture<'_, T> {}

/// The values of the channel, for async code: each `poll_next` is a round of
/// [`recv_async`](Receiver::recv_async); the stream ends once the channel is empty and every
/// sender is gone.
///
/// ```
/// use std::pin::Pin;
/// use std::task::{Context, Poll, Waker};
/// use futures_core::Stream;
///
/// let (tx, mut rx) = spindle::sync::channel(4);
/// tx.send(1).unwrap();
/// drop(tx);
/// let mut cx = Context::from_waker(Waker::noop());
/// assert_eq!(Pin::new(&mut rx).poll_next(&mut cx), Poll::Ready(Some(1)));
/// assert_eq!(Pin::new(&mut rx).poll_next(&mut cx), Poll::Ready(None));
/// ```
impl<T> futures_core::Stream for Receiver<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        match this.stream.poll(&this.chan.state, recv_list, cx, |s, _| recv_round(s)) {
            Poll::Ready(Ok((value, woken))) => {
                woken.wake();
                Poll::Ready(Some(value))
            }
            Poll::Ready(Err(RecvError)) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Receiver<T> {
    /// Leaves the stream's wait (the receiver is dropped).
    pub(super) fn leave_stream(&mut self) {
        self.stream.leave(&self.chan.state, recv_list, recv_pass_on);
    }
}

impl<T> fmt::Debug for SendFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendFuture").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for RecvFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvFuture").finish_non_exhaustive()
    }
}
