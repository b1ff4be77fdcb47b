//! Multi-producer, multi-consumer channels: bounded ([`channel`]), unbounded
//! ([`unbounded`]) and rendezvous (`channel(0)`, Go's unbuffered channel).
//!
//! Closing: when every [`Sender`] is dropped, receivers drain what is queued and then get
//! [`RecvError`]; when every [`Receiver`] is dropped, `send` gives the value back in
//! [`SendError`] (and [`Sender::closed`] returns). Values still queued when the last handle
//! goes are dropped.

// Invariants (all under the channel's lock):
// - **Bounded.** `queue.len() <= max(cap, 1)` for a bounded channel; a rendezvous channel
//   (cap 0) holds at most the one value being offered (module `channel_rendezvous`).
// - **No wait outlives its reason.** A receiver waits only while the queue is empty and
//   senders remain; a sender waits only while there is no room and receivers remain. Each
//   push wakes one waiting receiver, each pop one waiting sender (and, on a rendezvous
//   channel, the offering sender), and the last sender (receiver) to go wakes every waiting
//   receiver (sender, offering sender, `closed` waiter).
// - **Counted.** `offered` counts the values pushed and `settled` those popped (or, on a
//   rendezvous channel, taken back by their sender): `offered - settled == queue.len()`.
// - **Leaving passes the wake-up on.** Every wait of a send that finds no room or a receive
//   that finds nothing (blocking, timed or async; the slow paths of `send` and `recv` too) is
//   a `Wait` (module `park::wait`) on `send_waiters` or `recv_waiters`: a waiter that leaves
//   after a waker picked it passes the wake-up on to the next waiter of its side while that
//   side can proceed (`send_pass_on`, `recv_pass_on`), so no value or free slot is stranded.
// - Wake-ups are issued after the lock is released.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::lock::lock;
use crate::park::wait::{WaitSlot, Wakes};
use crate::park::{self, WaitList, WaitNode};

pub(super) struct State<T> {
    pub(super) queue: VecDeque<T>,
    pub(super) cap: Option<usize>,
    senders: usize,
    pub(super) receivers: usize,
    pub(super) recv_waiters: WaitList,
    pub(super) send_waiters: WaitList,
    /// Values pushed, and popped or taken back ("counted").
    pub(super) offered: u64,
    pub(super) settled: u64,
    /// A rendezvous channel's offering sender, waiting for its value to be taken.
    pub(super) offer_waiters: WaitList,
    /// Waiters of [`Sender::closed`].
    pub(super) closed_waiters: WaitList,
}

pub(super) struct Chan<T> {
    pub(super) state: Mutex<State<T>>,
    /// Capacity 0 (fixed at creation, read without the lock).
    pub(super) rendezvous: bool,
}

/// Creates a bounded channel holding at most `cap` values: `send` waits while it is full.
///
/// A capacity of 0 makes a rendezvous channel, Go's unbuffered channel: a send completes
/// only once a receiver has taken its value (see [`Sender::send`]).
///
/// ```
/// use spindle::sync::channel;
///
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let (tx, rx) = channel::<&str>(0);
///     let receiver = spindle::spawn(move || rx.recv().unwrap());
///     tx.send("handed over").unwrap(); // returns once the receiver has the value
///     assert_eq!(receiver.join().unwrap(), "handed over");
/// });
/// ```
pub fn channel<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    new(Some(cap))
}

/// Creates an unbounded channel: `send` never waits.
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    new(None)
}

fn new<T>(cap: Option<usize>) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        state: Mutex::new(State {
            queue: VecDeque::with_capacity(cap.unwrap_or(0).min(1024)),
            cap,
            senders: 1,
            receivers: 1,
            recv_waiters: WaitList::default(),
            send_waiters: WaitList::default(),
            offered: 0,
            settled: 0,
            offer_waiters: WaitList::default(),
            closed_waiters: WaitList::default(),
        }),
        rendezvous: cap == Some(0),
    });
    (Sender { chan: chan.clone() }, Receiver { chan, stream: WaitSlot::default() })
}

/// The sending half; clone it for more producers.
pub struct Sender<T> {
    pub(super) chan: Arc<Chan<T>>,
}

/// The receiving half; clone it for more consumers (each value goes to one of them).
///
/// Besides its blocking-style and `_async` calls, a receiver is a `futures_core::Stream` of
/// the values, which ends once the channel is empty and every sender is gone.
pub struct Receiver<T> {
    pub(super) chan: Arc<Chan<T>>,
    /// The wait of the receiver's `Stream` polls (module `channel_wait`).
    pub(super) stream: WaitSlot,
}

/// `send` failed because every receiver is gone; the value is given back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

/// `recv` failed because the channel is empty and every sender is gone.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct RecvError;

/// Why `try_send` did not send.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    Full(T),
    Disconnected(T),
}

/// Why `try_recv` did not receive.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum TryRecvError {
    Empty,
    Disconnected,
}

/// Why `send_timeout` / `send_deadline` did not send; the value is given back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    /// The channel stayed full until the deadline.
    Timeout(T),
    /// Every receiver is gone.
    Disconnected(T),
}

/// Why `recv_timeout` / `recv_deadline` did not receive.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RecvTimeoutError {
    /// The channel stayed empty until the deadline.
    Timeout,
    /// The channel is empty and every sender is gone.
    Disconnected,
}

/// The wait lists of `State` and what a waiter that leaves passes on, for the channel's
/// `Wait`s (module `park::wait`, "leaving").
pub(super) fn send_list<T>(s: &mut State<T>) -> &mut WaitList {
    &mut s.send_waiters
}

pub(super) fn offer_list<T>(s: &mut State<T>) -> &mut WaitList {
    &mut s.offer_waiters
}

pub(super) fn closed_list<T>(s: &mut State<T>) -> &mut WaitList {
    &mut s.closed_waiters
}

pub(super) fn recv_list<T>(s: &mut State<T>) -> &mut WaitList {
    &mut s.recv_waiters
}

/// A sender that leaves after a wake-up passes it on while there is room.
pub(super) fn send_pass_on<T>(s: &mut State<T>) -> Wakes {
    if s.has_room() {
        s.send_waiters.pop().into_iter().collect()
    } else {
        Vec::new()
    }
}

/// A receiver that leaves after a wake-up passes it on while values are queued.
pub(super) fn recv_pass_on<T>(s: &mut State<T>) -> Wakes {
    if s.queue.is_empty() {
        Vec::new()
    } else {
        s.recv_waiters.pop().into_iter().collect()
    }
}

impl<T> Sender<T> {
    /// Sends `value`, waiting while a bounded channel is full. On a rendezvous channel
    /// (`channel(0)`) it waits until a receiver has taken the value, as Go's unbuffered send.
    #[track_caller]
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        if cfg!(debug_assertions) && (self.chan.rendezvous || lock(&self.chan.state).cap.is_some()) {
            crate::sched::api::check_entry("channel send");
        }
        if self.chan.rendezvous {
            return self.send_rendezvous(value, None).map_err(|e| match e {
                SendTimeoutError::Disconnected(v) | SendTimeoutError::Timeout(v) => SendError(v),
            });
        }
        let mut state = lock(&self.chan.state);
        match state.try_push(value) {
            Ok(wake) => {
                drop(state);
                if let Some(w) = wake {
                    park::wake(w);
                }
                Ok(())
            }
            Err(TrySendError::Disconnected(v)) => Err(SendError(v)),
            Err(TrySendError::Full(v)) => {
                drop(state);
                self.send_waiting(v, None, "channel send").map_err(|e| match e {
                    SendTimeoutError::Disconnected(v) | SendTimeoutError::Timeout(v) => SendError(v),
                })
            }
        }
    }

    /// Sends without waiting. On a rendezvous channel it succeeds only when a receiver is
    /// waiting (Go's non-blocking send on an unbuffered channel): the value goes to it.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let mut state = lock(&self.chan.state);
        if self.chan.rendezvous && state.recv_waiters.is_empty() && state.receivers > 0 {
            return Err(TrySendError::Full(value));
        }
        let wake = state.try_push(value)?;
        drop(state);
        if let Some(w) = wake {
            park::wake(w);
        }
        Ok(())
    }

    /// Whether every receiver is gone.
    pub fn is_closed(&self) -> bool {
        lock(&self.chan.state).receivers == 0
    }

    /// Number of queued values.
    pub fn len(&self) -> usize {
        lock(&self.chan.state).queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Receiver<T> {
    /// Receives a value, waiting while the channel is empty; `Err` once it is empty and every
    /// sender is gone.
    #[track_caller]
    pub fn recv(&self) -> Result<T, RecvError> {
        crate::sched::api::check_entry("channel recv");
        let mut state = lock(&self.chan.state);
        match state.try_pop() {
            Ok((value, woken)) => {
                drop(state);
                woken.wake();
                Ok(value)
            }
            Err(TryRecvError::Disconnected) => Err(RecvError),
            Err(TryRecvError::Empty) => {
                drop(state);
                self.recv_waiting(None, "channel recv").map_err(|_| RecvError)
            }
        }
    }

    /// Receives without waiting.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut state = lock(&self.chan.state);
        let (value, woken) = state.try_pop()?;
        drop(state);
        woken.wake();
        Ok(value)
    }

    /// An iterator that receives until the channel is closed and drained.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// Number of queued values.
    pub fn len(&self) -> usize {
        lock(&self.chan.state).queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> State<T> {
    /// Whether a send may push now ("bounded").
    pub(super) fn has_room(&self) -> bool {
        self.cap.is_none_or(|cap| self.queue.len() < cap.max(1))
    }

    pub(super) fn try_push(&mut self, value: T) -> Result<Option<Arc<WaitNode>>, TrySendError<T>> {
        if self.receivers == 0 {
            return Err(TrySendError::Disconnected(value));
        }
        if !self.has_room() {
            return Err(TrySendError::Full(value));
        }
        self.queue.push_back(value);
        self.offered += 1;
        Ok(self.recv_waiters.pop())
    }

    pub(super) fn try_pop(&mut self) -> Result<(T, Woken), TryRecvError> {
        match self.queue.pop_front() {
            Some(value) => {
                self.settled += 1;
                // A rendezvous channel's offering sender learns its value was taken.
                Ok((value, Woken(self.send_waiters.pop(), self.offer_waiters.pop())))
            }
            None if self.senders == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }
}

/// The senders a pop wakes: one waiting for room, and a rendezvous channel's offering one.
#[must_use = "wake them after unlocking"]
pub(super) struct Woken(Option<Arc<WaitNode>>, Option<Arc<WaitNode>>);

impl Woken {
    pub(super) fn wake(self) {
        self.0.into_iter().chain(self.1).for_each(park::wake);
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        lock(&self.chan.state).senders += 1;
        Sender { chan: self.chan.clone() }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        lock(&self.chan.state).receivers += 1;
        Receiver { chan: self.chan.clone(), stream: WaitSlot::default() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.chan.state);
        state.senders -= 1;
        let waiters = if state.senders == 0 { state.recv_waiters.take_all() } else { Vec::new() };
        drop(state);
        waiters.into_iter().for_each(park::wake);
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.leave_stream();
        let mut state = lock(&self.chan.state);
        state.receivers -= 1;
        let (waiters, dropped) = if state.receivers == 0 {
            let mut waiters = state.send_waiters.take_all();
            waiters.extend(state.offer_waiters.take_all());
            waiters.extend(state.closed_waiters.take_all());
            // A rendezvous channel's offered value goes back to its sender, which takes it
            // back when it wakes (module `channel_rendezvous`).
            let dropped =
                if self.chan.rendezvous { VecDeque::new() } else { std::mem::take(&mut state.queue) };
            (waiters, dropped)
        } else {
            (Vec::new(), VecDeque::new())
        };
        drop(state);
        drop(dropped); // user destructors run outside the lock
        waiters.into_iter().for_each(park::wake);
    }
}

/// Iterator over received values; see [`Receiver::iter`].
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a closed channel")
    }
}

impl<T> std::error::Error for SendError<T> {}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty and closed channel")
    }
}

impl std::error::Error for RecvError {}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full channel"),
            TrySendError::Disconnected(_) => f.write_str("sending on a closed channel"),
        }
    }
}

impl<T> std::error::Error for TrySendError<T> {}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Disconnected => f.write_str("receiving on an empty and closed channel"),
        }
    }
}

impl std::error::Error for TryRecvError {}

impl<T> From<SendError<T>> for TrySendError<T> {
    fn from(e: SendError<T>) -> Self {
        TrySendError::Disconnected(e.0)
    }
}

impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("Timeout(..)"),
            SendTimeoutError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("timed out sending on a full channel"),
            SendTimeoutError::Disconnected(_) => f.write_str("sending on a channel whose receivers are gone"),
        }
    }
}

impl<T> std::error::Error for SendTimeoutError<T> {}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out receiving on an empty channel"),
            RecvTimeoutError::Disconnected => {
                f.write_str("receiving on an empty channel whose senders are gone")
            }
        }
    }
}

impl std::error::Error for RecvTimeoutError {}
