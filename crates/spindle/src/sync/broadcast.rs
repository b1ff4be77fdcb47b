//! A broadcast channel: every receiver sees every value sent after it subscribed (tokio's
//! `broadcast`), bounded, for fibers, threads and tasks. A [`Receiver`] is also a
//! `futures_core::Stream` of the values.

// Invariants (under the lock):
// - **Bounded.** The ring holds the last at most `cap` values, with sequence numbers
//   `head..head + len`; sending past `cap` drops the oldest. Memory is bounded by `cap`
//   whatever the receivers do.
// - **Own cursors.** A receiver's cursor `next` is its own: below `head` it has lagged (it is
//   told how many values it missed, then moves to `head`); at `head + len` it waits.
// - **Everyone woken.** Every send wakes every waiting receiver (each needs the value); so
//   does the last sender going away (they then see `Closed` once they have drained the ring).
//   A receiver's `Stream` polls wait in its `stream` slot, left when it drops.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::lock::lock;
use crate::park::wait::{deadline_in, pass_none, Wait, WaitSlot};
use crate::park::{self, WaitList};

/// Creates a broadcast channel keeping the last `cap` values for slow receivers.
///
/// ```
/// let (tx, mut rx1) = spindle::sync::broadcast::channel(16);
/// let mut rx2 = tx.subscribe();
/// tx.send("hello").unwrap();
/// assert_eq!(rx1.recv(), Ok("hello"));
/// assert_eq!(rx2.recv(), Ok("hello"));
/// ```
///
/// # Panics
///
/// If `cap` is 0.
pub fn channel<T: Clone>(cap: usize) -> (Sender<T>, Receiver<T>) {
    assert!(cap > 0, "spindle::sync::broadcast::channel capacity must be at least 1");
    let shared = Arc::new(Mutex::new(State {
        ring: VecDeque::with_capacity(cap.min(1024)),
        head: 0,
        cap,
        senders: 1,
        receivers: 1,
        waiters: WaitList::new(),
    }));
    (Sender { shared: shared.clone() }, Receiver { shared, next: 0, stream: WaitSlot::default() })
}

struct State<T> {
    ring: VecDeque<T>,
    head: u64,
    cap: usize,
    senders: usize,
    receivers: usize,
    waiters: WaitList,
}

impl<T> State<T> {
    fn tail(&self) -> u64 {
        self.head + self.ring.len() as u64
    }
}

/// Sends to every receiver; clone it for more senders.
pub struct Sender<T> {
    shared: Arc<Mutex<State<T>>>,
}

/// Receives every value sent after it subscribed; clone it for another receiver at the same
/// position.
pub struct Receiver<T> {
    shared: Arc<Mutex<State<T>>>,
    next: u64,
    /// The wait of the receiver's `Stream` polls.
    stream: WaitSlot,
}

/// `send` failed: there is no receiver; the value is given back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

/// Why `recv` did not return a value.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RecvError {
    /// Every sender is gone and this receiver has seen every value.
    Closed,
    /// The receiver fell behind by this many values, which were dropped; the next `recv`
    /// returns the oldest value still kept.
    Lagged(u64),
}

/// Why `try_recv` / `recv_timeout` did not return a value.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum TryRecvError {
    /// Nothing new yet (or, for `recv_timeout`, nothing before the deadline).
    Empty,
    Closed,
    Lagged(u64),
}

impl<T: Clone> Sender<T> {
    /// Sends `value` to every current receiver; returns how many there are. Never waits: a
    /// full ring drops its oldest value (slow receivers see [`RecvError::Lagged`]).
    pub fn send(&self, value: T) -> Result<usize, SendError<T>> {
        let mut state = lock(&self.shared);
        if state.receivers == 0 {
            return Err(SendError(value));
        }
        state.ring.push_back(value);
        let dropped = if state.ring.len() > state.cap {
            state.head += 1;
            state.ring.pop_front()
        } else {
            None
        };
        let receivers = state.receivers;
        let wake = state.waiters.take_all();
        drop(state);
        drop(dropped);
        wake.into_iter().for_each(park::wake);
        Ok(receivers)
    }

    /// A new receiver that sees the values sent from now on.
    pub fn subscribe(&self) -> Receiver<T> {
        let mut state = lock(&self.shared);
        state.receivers += 1;
        let next = state.tail();
        Receiver { shared: self.shared.clone(), next, stream: WaitSlot::default() }
    }

    pub fn receiver_count(&self) -> usize {
        lock(&self.shared).receivers
    }
}

fn round<T: Clone>(s: &mut State<T>, next: &mut u64) -> Option<Result<T, RecvError>> {
    if *next < s.head {
        let missed = s.head - *next;
        *next = s.head;
        return Some(Err(RecvError::Lagged(missed)));
    }
    if let Some(v) = s.ring.get((*next - s.head) as usize) {
        *next += 1;
        return Some(Ok(v.clone()));
    }
    if s.senders == 0 {
        return Some(Err(RecvError::Closed));
    }
    None
}

fn list<T>(s: &mut State<T>) -> &mut WaitList {
    &mut s.waiters
}

impl<T: Clone> Receiver<T> {
    /// The next value, waiting while there is none.
    #[track_caller]
    pub fn recv(&mut self) -> Result<T, RecvError> {
        crate::sched::api::check_entry("broadcast recv");
        let next = &mut self.next;
        let got =
            Wait::new(&self.shared, list, pass_none).block(None, "broadcast recv", |s, _| round(s, next));
        got.expect("a wait without deadline completes")
    }

    /// The next value if there is one now.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        match round(&mut lock(&self.shared), &mut self.next) {
            Some(r) => r.map_err(Into::into),
            None => Err(TryRecvError::Empty),
        }
    }

    /// The next value, waiting at most `timeout` (`Err(Empty)` then).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<T, TryRecvError> {
        self.recv_until(deadline_in(timeout))
    }

    /// The next value, waiting until `deadline` at the latest.
    pub fn recv_deadline(&mut self, deadline: Instant) -> Result<T, TryRecvError> {
        self.recv_until(Some(deadline))
    }

    #[track_caller]
    fn recv_until(&mut self, deadline: Option<Instant>) -> Result<T, TryRecvError> {
        crate::sched::api::check_entry("broadcast recv (with timeout)");
        let next = &mut self.next;
        match Wait::new(&self.shared, list, pass_none).block(
            deadline,
            "broadcast recv (with timeout)",
            |s, _| round(s, next),
        ) {
            Some(r) => r.map_err(Into::into),
            None => Err(TryRecvError::Empty),
        }
    }

    /// The next value, from async code.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// let (tx, mut rx) = spindle::sync::broadcast::channel(4);
    /// let h = rt.spawn_async(async move { rx.recv_async().await });
    /// tx.send(1).unwrap();
    /// assert_eq!(h.join().unwrap(), Ok(1));
    /// ```
    pub fn recv_async(&mut self) -> impl Future<Output = Result<T, RecvError>> + Send + '_
    where
        T: Send,
    {
        let next = &mut self.next;
        let mut wait = Wait::new(&self.shared, list, pass_none);
        std::future::poll_fn(move |cx| wait.poll(cx, |s, _| round(s, next)))
    }
}

/// The values sent, for async code: each `poll_next` is a round of
/// [`recv_async`](Receiver::recv_async), giving `Err(Lagged(n))` when the receiver fell `n`
/// values behind (it then goes on from the oldest value kept); the stream ends once every
/// sender is gone and the receiver has seen every value.
impl<T: Clone> futures_core::Stream for Receiver<T> {
    type Item = Result<T, Lagged>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<T, Lagged>>> {
        let this = self.get_mut();
        let next = &mut this.next;
        match this.stream.poll(&this.shared, list, cx, |s, _| round(s, next)) {
            Poll::Ready(Ok(value)) => Poll::Ready(Some(Ok(value))),
            Poll::Ready(Err(RecvError::Lagged(n))) => Poll::Ready(Some(Err(Lagged(n)))),
            Poll::Ready(Err(RecvError::Closed)) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// An item of a [`Receiver`]'s stream: the receiver fell this many values behind, which were
/// dropped.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Lagged(pub u64);

impl fmt::Display for Lagged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "broadcast receiver lagged by {} values", self.0)
    }
}

impl std::error::Error for Lagged {}

impl From<RecvError> for TryRecvError {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Closed => TryRecvError::Closed,
            RecvError::Lagged(n) => TryRecvError::Lagged(n),
        }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        lock(&self.shared).senders += 1;
        Sender { shared: self.shared.clone() }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        lock(&self.shared).receivers += 1;
        Receiver { shared: self.shared.clone(), next: self.next, stream: WaitSlot::default() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        state.senders -= 1;
        let wake = if state.senders == 0 { state.waiters.take_all() } else { Vec::new() };
        drop(state);
        wake.into_iter().for_each(park::wake);
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.stream.leave(&self.shared, list, pass_none);
        let mut state = lock(&self.shared);
        state.receivers -= 1;
        let dropped = if state.receivers == 0 { std::mem::take(&mut state.ring) } else { VecDeque::new() };
        drop(state);
        drop(dropped);
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("broadcast::Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("broadcast::Receiver").field("next", &self.next).finish()
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("broadcast send with no receiver")
    }
}

impl<T> std::error::Error for SendError<T> {}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Closed => f.write_str("broadcast channel closed"),
            RecvError::Lagged(n) => write!(f, "broadcast receiver lagged by {n} values"),
        }
    }
}

impl std::error::Error for RecvError {}
