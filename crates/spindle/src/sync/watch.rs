//! A watch channel: one latest value that receivers read and wait for changes of (tokio's
//! `watch`), for fibers, threads and tasks. A [`Receiver`] is also a `futures_core::Stream`
//! of the values it has not seen.

// Invariants (under the lock): `version` counts the values sent; a receiver remembers the
// version it last saw and `changed` waits while they are equal and the sender is alive.
// Every send, and the sender going away, wakes every waiting receiver. A receiver's `Stream`
// polls wait in its `stream` slot, left when it drops.

use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::channel::RecvError;
use crate::lock::lock;
use crate::park::wait::{deadline_in, pass_none, Wait, WaitSlot};
use crate::park::{self, WaitList};

/// Creates a watch channel holding `initial`.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let (tx, mut rx) = spindle::sync::watch::channel("starting");
///     let h = spindle::spawn(move || {
///         rx.changed().unwrap();
///         *rx.borrow_and_update()
///     });
///     tx.send("ready").unwrap();
///     assert_eq!(h.join().unwrap(), "ready");
/// });
/// ```
pub fn channel<T>(initial: T) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Mutex::new(State {
        value: initial,
        version: 0,
        sender_alive: true,
        receivers: 1,
        waiters: WaitList::new(),
    }));
    (Sender { shared: shared.clone() }, Receiver { shared, seen: 0, stream: WaitSlot::default() })
}

struct State<T> {
    value: T,
    version: u64,
    sender_alive: bool,
    receivers: usize,
    waiters: WaitList,
}

/// Publishes new values.
pub struct Sender<T> {
    shared: Arc<Mutex<State<T>>>,
}

/// Reads the latest value and waits for changes; clone it for another receiver.
pub struct Receiver<T> {
    shared: Arc<Mutex<State<T>>>,
    seen: u64,
    /// The wait of the receiver's `Stream` polls.
    stream: WaitSlot,
}

/// A read lock on the current value. It holds an internal (thread) lock: drop it before
/// waiting on anything, never hold it across a park or an `.await` (a fiber that parks while
/// one is alive panics, naming it, in every build).
pub struct Ref<'a, T> {
    guard: MutexGuard<'a, State<T>>,
    /// Parking while a `Ref` is alive panics (module `fiber::no_park`).
    _no_park: crate::fiber::NoPark,
}

impl<T> Deref for Ref<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard.value
    }
}

/// `send` failed: every receiver is gone; the value is given back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

impl<T> Sender<T> {
    /// Replaces the value and wakes the waiting receivers; fails if there is none.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        let mut state = lock(&self.shared);
        if state.receivers == 0 {
            return Err(SendError(value));
        }
        let old = std::mem::replace(&mut state.value, value);
        Self::publish(state);
        drop(old);
        Ok(())
    }

    /// Replaces the value whether or not anyone listens; returns the old one.
    pub fn send_replace(&self, value: T) -> T {
        let mut state = lock(&self.shared);
        let old = std::mem::replace(&mut state.value, value);
        Self::publish(state);
        old
    }

    fn publish(mut state: MutexGuard<'_, State<T>>) {
        state.version += 1;
        let wake = state.waiters.take_all();
        drop(state);
        wake.into_iter().for_each(park::wake);
    }

    /// The current value (see [`Ref`]: do not hold it across a wait).
    pub fn borrow(&self) -> Ref<'_, T> {
        Ref { guard: lock(&self.shared), _no_park: crate::fiber::no_park("a watch::Ref") }
    }

    /// A new receiver that has seen the current value.
    pub fn subscribe(&self) -> Receiver<T> {
        let mut state = lock(&self.shared);
        state.receivers += 1;
        Receiver { shared: self.shared.clone(), seen: state.version, stream: WaitSlot::default() }
    }

    pub fn receiver_count(&self) -> usize {
        lock(&self.shared).receivers
    }
}

fn list<T>(s: &mut State<T>) -> &mut WaitList {
    &mut s.waiters
}

fn round<T>(s: &mut State<T>, seen: &mut u64) -> Option<Result<(), RecvError>> {
    if s.version != *seen {
        *seen = s.version;
        Some(Ok(()))
    } else if !s.sender_alive {
        Some(Err(RecvError))
    } else {
        None
    }
}

impl<T> Receiver<T> {
    /// The current value, without marking it seen (see [`Ref`]: do not hold it across a wait).
    pub fn borrow(&self) -> Ref<'_, T> {
        Ref { guard: lock(&self.shared), _no_park: crate::fiber::no_park("a watch::Ref") }
    }

    /// The current value, marking it seen.
    pub fn borrow_and_update(&mut self) -> Ref<'_, T> {
        let guard = lock(&self.shared);
        self.seen = guard.version;
        Ref { guard, _no_park: crate::fiber::no_park("a watch::Ref") }
    }

    /// Whether a value was sent since this receiver last saw one.
    pub fn has_changed(&self) -> bool {
        lock(&self.shared).version != self.seen
    }

    /// Waits for a value not yet seen, and marks it seen; `Err` once the sender is gone and
    /// nothing new is left.
    #[track_caller]
    pub fn changed(&mut self) -> Result<(), RecvError> {
        crate::sched::api::check_entry("watch changed");
        let seen = &mut self.seen;
        Wait::new(&self.shared, list, pass_none)
            .block(None, "watch changed", |s, _| round(s, seen))
            .expect("a wait without deadline completes")
    }

    /// [`changed`](Self::changed), waiting at most `timeout`; `None` on timeout.
    pub fn changed_timeout(&mut self, timeout: Duration) -> Option<Result<(), RecvError>> {
        self.changed_until(deadline_in(timeout))
    }

    /// [`changed`](Self::changed), waiting until `deadline` at the latest; `None` on timeout.
    pub fn changed_deadline(&mut self, deadline: Instant) -> Option<Result<(), RecvError>> {
        self.changed_until(Some(deadline))
    }

    #[track_caller]
    fn changed_until(&mut self, deadline: Option<Instant>) -> Option<Result<(), RecvError>> {
        crate::sched::api::check_entry("watch changed (with timeout)");
        let seen = &mut self.seen;
        Wait::new(&self.shared, list, pass_none)
            .block(deadline, "watch changed (with timeout)", |s, _| round(s, seen))
    }

    /// [`changed`](Self::changed) for async code.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// let (tx, mut rx) = spindle::sync::watch::channel(0);
    /// let h = rt.spawn_async(async move {
    ///     rx.changed_async().await.unwrap();
    ///     *rx.borrow()
    /// });
    /// tx.send(5).unwrap();
    /// assert_eq!(h.join().unwrap(), 5);
    /// ```
    pub fn changed_async(&mut self) -> impl Future<Output = Result<(), RecvError>> + Send + '_
    where
        T: Send,
    {
        let seen = &mut self.seen;
        let mut wait = Wait::new(&self.shared, list, pass_none);
        std::future::poll_fn(move |cx| wait.poll(cx, |s, _| round(s, seen)))
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        lock(&self.shared).receivers += 1;
        Receiver { shared: self.shared.clone(), seen: self.seen, stream: WaitSlot::default() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        state.sender_alive = false;
        let wake = state.waiters.take_all();
        drop(state);
        wake.into_iter().for_each(park::wake);
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.stream.leave(&self.shared, list, pass_none);
        lock(&self.shared).receivers -= 1;
    }
}

/// The values the receiver has not seen, for async code: each `poll_next` waits as
/// [`changed_async`](Receiver::changed_async) does and gives a clone of the value then
/// current, marking it seen (several sends in between give one item, the latest value). The
/// stream ends once the sender is gone and nothing new is left.
///
/// ```
/// use std::pin::Pin;
/// use std::task::{Context, Poll, Waker};
/// use futures_core::Stream;
///
/// let (tx, mut rx) = spindle::sync::watch::channel("v0");
/// tx.send("v1").unwrap();
/// tx.send("v2").unwrap();
/// let mut cx = Context::from_waker(Waker::noop());
/// assert_eq!(Pin::new(&mut rx).poll_next(&mut cx), Poll::Ready(Some("v2")));
/// assert!(Pin::new(&mut rx).poll_next(&mut cx).is_pending());
/// drop(tx);
/// assert_eq!(Pin::new(&mut rx).poll_next(&mut cx), Poll::Ready(None));
/// ```
impl<T: Clone> futures_core::Stream for Receiver<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        let seen = &mut this.seen;
        let changed = this
            .stream
            .poll(&this.shared, list, cx, |s, _| round(s, seen).map(|r| r.map(|()| s.value.clone())));
        match changed {
            Poll::Ready(Ok(value)) => Poll::Ready(Some(value)),
            Poll::Ready(Err(RecvError)) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Ref<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("watch::Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("watch::Receiver").field("seen", &self.seen).finish()
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("watch send with no receiver")
    }
}

impl<T> std::error::Error for SendError<T> {}
