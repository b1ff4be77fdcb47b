//! A channel for exactly one value.

// Invariant (under the lock): the receiver waits only while no value was sent and the sender
// is alive; sending or dropping the sender wakes it.

use std::fmt;
use std::sync::{Arc, Mutex};

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::channel::RecvTimeoutError;
use crate::lock::lock;
use crate::park::wait::deadline_in;
use crate::park::{self, Waiter};

pub use super::channel::{RecvError, TryRecvError};

struct State<T> {
    value: Option<T>,
    waiter: Option<Waiter>,
    sender_alive: bool,
    receiver_alive: bool,
}

/// Creates a oneshot channel.
pub fn oneshot<T>() -> (Sender<T>, Receiver<T>) {
    let shared =
        Arc::new(Mutex::new(State { value: None, waiter: None, sender_alive: true, receiver_alive: true }));
    (Sender { shared: shared.clone() }, Receiver { shared })
}

/// Sends the one value.
pub struct Sender<T> {
    shared: Arc<Mutex<State<T>>>,
}

/// Receives the one value.
pub struct Receiver<T> {
    shared: Arc<Mutex<State<T>>>,
}

impl<T> Sender<T> {
    /// Sends `value`; gives it back if the receiver is gone.
    pub fn send(self, value: T) -> Result<(), T> {
        let mut state = lock(&self.shared);
        if !state.receiver_alive {
            return Err(value);
        }
        state.value = Some(value);
        let waiter = state.waiter.take();
        drop(state);
        if let Some(w) = waiter {
            w.wake();
        }
        Ok(())
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        !lock(&self.shared).receiver_alive
    }
}

impl<T> Receiver<T> {
    /// Waits for the value; `Err` if the sender was dropped without sending.
    #[track_caller]
    pub fn recv(self) -> Result<T, RecvError> {
        crate::sched::api::check_entry("oneshot recv");
        loop {
            let mut state = lock(&self.shared);
            if let Some(value) = state.value.take() {
                return Ok(value);
            }
            if !state.sender_alive {
                return Err(RecvError);
            }
            if state.waiter.is_none() {
                state.waiter = Some(Waiter::current());
            }
            drop(state);
            park::park_on("oneshot recv");
        }
    }

    /// Waits at most `timeout` for the value.
    ///
    /// ```
    /// use std::time::Duration;
    /// use spindle::sync::{oneshot, RecvTimeoutError};
    /// let (tx, rx) = oneshot::<u8>();
    /// assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Err(RecvTimeoutError::Timeout));
    /// tx.send(7).unwrap();
    /// assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Ok(7));
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_until(deadline_in(timeout))
    }

    /// Waits until `deadline` at the latest for the value.
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(deadline))
    }

    #[track_caller]
    fn recv_until(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        crate::sched::api::check_entry("oneshot recv (with timeout)");
        loop {
            let mut state = lock(&self.shared);
            if let Some(value) = state.value.take() {
                state.waiter = None;
                return Ok(value);
            }
            if !state.sender_alive {
                return Err(RecvTimeoutError::Disconnected);
            }
            if deadline.is_some_and(|d| crate::sched::api::now() >= d) {
                state.waiter = None;
                return Err(RecvTimeoutError::Timeout);
            }
            state.waiter = Some(Waiter::current());
            drop(state);
            park::park_until(deadline, "oneshot recv (with timeout)");
        }
    }

    /// Takes the value if it was sent.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut state = lock(&self.shared);
        match state.value.take() {
            Some(value) => Ok(value),
            None if state.sender_alive => Err(TryRecvError::Empty),
            None => Err(TryRecvError::Disconnected),
        }
    }
}

/// Awaiting the receiver gives the value (`Err` if the sender was dropped without sending),
/// as tokio's oneshot does.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let (tx, rx) = spindle::sync::oneshot();
/// let h = rt.spawn_async(async move { rx.await });
/// tx.send("done").unwrap();
/// assert_eq!(h.join().unwrap(), Ok("done"));
/// ```
impl<T> Future for Receiver<T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = lock(&self.shared);
        if let Some(value) = state.value.take() {
            state.waiter = None;
            return Poll::Ready(Ok(value));
        }
        if !state.sender_alive {
            return Poll::Ready(Err(RecvError));
        }
        if !state.waiter.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            state.waiter = Some(Waiter::Task(cx.waker().clone()));
        }
        Poll::Pending
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        state.sender_alive = false;
        let waiter = state.waiter.take();
        drop(state);
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        state.receiver_alive = false;
        let value = state.value.take();
        state.waiter = None;
        drop(state);
        drop(value); // its destructor runs outside the lock
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Receiver").finish_non_exhaustive()
    }
}
