//! Multi-producer, multi-consumer channels, bounded and unbounded.
//!
//! Invariants (all under the channel's lock):
//! - `queue.len() <= cap` for a bounded channel.
//! - A receiver waits only while the queue is empty and senders remain; a sender waits only
//!   while the queue is full and receivers remain. Each push wakes one waiting receiver, each
//!   pop one waiting sender, and the last sender (receiver) to go wakes every waiting receiver
//!   (sender), so no wait outlives the reason for it.
//! - Wake-ups are issued after the lock is released.
//!
//! Closing: when every `Sender` is dropped, receivers drain what is queued and then get
//! [`RecvError`]; when every `Receiver` is dropped, `send` gives the value back in
//! [`SendError`]. Values still queued when the last handle goes are dropped.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::lock::lock;
use crate::park::{self, WaitList, WaitNode};

pub(super) struct State<T> {
    pub(super) queue: VecDeque<T>,
    pub(super) cap: Option<usize>,
    senders: usize,
    receivers: usize,
    pub(super) recv_waiters: WaitList,
    pub(super) send_waiters: WaitList,
}

pub(super) struct Chan<T> {
    pub(super) state: Mutex<State<T>>,
}

/// Creates a bounded channel holding at most `cap` values: `send` waits while it is full.
///
/// # Panics
///
/// If `cap` is 0 (rendezvous channels are not supported; use a capacity of 1).
pub fn channel<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    assert!(cap > 0, "spindle::sync::channel capacity must be at least 1");
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
        }),
    });
    (Sender { chan: chan.clone() }, Receiver { chan })
}

/// The sending half; clone it for more producers.
pub struct Sender<T> {
    pub(super) chan: Arc<Chan<T>>,
}

/// The receiving half; clone it for more consumers (each value goes to one of them).
pub struct Receiver<T> {
    pub(super) chan: Arc<Chan<T>>,
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

impl<T> Sender<T> {
    /// Sends `value`, waiting while a bounded channel is full.
    #[track_caller]
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        if cfg!(debug_assertions) && lock(&self.chan.state).cap.is_some() {
            crate::sched::caller::check_entry("channel send");
        }
        let mut wait = Leave { chan: &self.chan, node: None, role: Role::Sender };
        let mut value = value;
        loop {
            let mut state = lock(&self.chan.state);
            match state.try_push(value) {
                Ok(wake) => {
                    wait.done(&mut state);
                    drop(state);
                    if let Some(w) = wake {
                        park::wake(w);
                    }
                    return Ok(());
                }
                Err(TrySendError::Disconnected(v)) => return Err(SendError(v)),
                Err(TrySendError::Full(v)) => {
                    value = v;
                    state.send_waiters.push(wait.node.get_or_insert_with(WaitNode::new));
                }
            }
            drop(state);
            park::park_on("channel send");
        }
    }

    /// Sends without waiting.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let mut state = lock(&self.chan.state);
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
        crate::sched::caller::check_entry("channel recv");
        let mut wait = Leave { chan: &self.chan, node: None, role: Role::Receiver };
        loop {
            let mut state = lock(&self.chan.state);
            match state.try_pop() {
                Ok((value, wake)) => {
                    wait.done(&mut state);
                    drop(state);
                    if let Some(w) = wake {
                        park::wake(w);
                    }
                    return Ok(value);
                }
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => {
                    state.recv_waiters.push(wait.node.get_or_insert_with(WaitNode::new));
                }
            }
            drop(state);
            park::park_on("channel recv");
        }
    }

    /// Receives without waiting.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut state = lock(&self.chan.state);
        let (value, wake) = state.try_pop()?;
        drop(state);
        if let Some(w) = wake {
            park::wake(w);
        }
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
    pub(super) fn try_push(&mut self, value: T) -> Result<Option<Arc<WaitNode>>, TrySendError<T>> {
        if self.receivers == 0 {
            return Err(TrySendError::Disconnected(value));
        }
        if self.cap.is_some_and(|cap| self.queue.len() >= cap) {
            return Err(TrySendError::Full(value));
        }
        self.queue.push_back(value);
        Ok(self.recv_waiters.pop())
    }

    pub(super) fn try_pop(&mut self) -> Result<(T, Option<Arc<WaitNode>>), TryRecvError> {
        match self.queue.pop_front() {
            Some(value) => Ok((value, self.send_waiters.pop())),
            None if self.senders == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
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
        Receiver { chan: self.chan.clone() }
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
        let mut state = lock(&self.chan.state);
        state.receivers -= 1;
        let (waiters, dropped) = if state.receivers == 0 {
            (state.send_waiters.take_all(), std::mem::take(&mut state.queue))
        } else {
            (Vec::new(), VecDeque::new())
        };
        drop(state);
        drop(dropped); // user destructors run outside the lock
        waiters.into_iter().for_each(park::wake);
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    Sender,
    Receiver,
}

/// The waiting side of one `send` or `recv`. When the operation completes, `done` dequeues
/// the node if a spurious return left it queued. When the caller leaves any other way (its
/// fiber is cancelled and unwinds out of `park`), `Drop` dequeues the node, and if a waker had
/// already picked it, passes that wake-up on to the next waiter of the same side, so that no
/// wake-up is lost on a node whose owner is gone.
struct Leave<'a, T> {
    chan: &'a Chan<T>,
    node: Option<Arc<WaitNode>>,
    role: Role,
}

impl<T> Leave<'_, T> {
    fn done(&mut self, state: &mut State<T>) {
        if let Some(node) = self.node.take() {
            self.list(state).remove(&node);
        }
    }

    fn list<'s>(&self, state: &'s mut State<T>) -> &'s mut WaitList {
        match self.role {
            Role::Sender => &mut state.send_waiters,
            Role::Receiver => &mut state.recv_waiters,
        }
    }
}

impl<T> Drop for Leave<'_, T> {
    fn drop(&mut self) {
        let Some(node) = self.node.take() else { return };
        let mut state = lock(&self.chan.state);
        let forward = if node.is_queued() {
            self.list(&mut state).remove(&node);
            None
        } else {
            let can_proceed = match self.role {
                Role::Sender => state.cap.is_none_or(|cap| state.queue.len() < cap),
                Role::Receiver => !state.queue.is_empty(),
            };
            if can_proceed {
                self.list(&mut state).pop()
            } else {
                None
            }
        };
        drop(state);
        if let Some(next) = forward {
            park::wake(next);
        }
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
