//! [`Drain`]: a server's graceful shutdown as its tasks see it: a one-way signal that tells
//! every accept loop and connection to stop ("stop accepting"), the count of those still
//! running that the shutdown waits for ("drain"), and the open connections among them.
//!
//! [`shutdown::ShutdownToken`](crate::shutdown::ShutdownToken) is the runtime's shutdown, with
//! fiber waits and a tree of cancellation. A `Drain` is a server's own, made for many idle
//! connections each watching it from an async task: a [`Watch`] costs one slab slot (a waker,
//! 16 bytes) in the drain, and a poll that finds its waker already registered takes no lock.
//! The waits for the signal and for the drain ([`Drain::wait_triggered`],
//! [`Drain::wait_idle`]) block the calling thread: they are for the thread that runs the
//! server (`main`), not for its workers.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::{Duration, Instant};
//! use spindle::graceful::{Drain, Watch};
//!
//! let drain = Arc::new(Drain::new());
//! let rt = spindle::Runtime::new().unwrap();
//! let connection = drain.enter_connection(); // counted until it drops
//! let task = rt.spawn_async({
//!     let drain = drain.clone();
//!     async move {
//!         let mut watch = Watch::new(drain);
//!         std::future::poll_fn(|cx| watch.poll_triggered(cx)).await;
//!         drop(connection); // the connection closes once shutdown begins
//!     }
//! });
//! assert_eq!(drain.connections(), 1);
//! drain.trigger();
//! assert_eq!(drain.wait_idle(Instant::now() + Duration::from_secs(5)), 0, "all drained");
//! task.join().unwrap();
//! ```
//!
//! Invariants:
//!
//! - **One-way.** The signal goes from running to triggered once and never back; the first
//!   deadline given with it ([`Drain::trigger_with_deadline`]) is the one kept, and it is set
//!   before the flag, so whoever sees the flag sees the deadline.
//! - **No lost wake-up.** [`Watch::poll_triggered`] registers the caller's waker and then
//!   looks at the flag again, and the trigger sets the flag before it takes the wakers: either
//!   the trigger sees the waker, or the second look sees the flag. Threads in
//!   [`Drain::wait_triggered`] and [`Drain::wait_idle`] wait on the count's lock, which the
//!   trigger and the last guard's drop take before they notify.
//! - **Keys stay their watcher's.** A watch's slot key is its own until the watch drops,
//!   across the trigger too (which takes the wakers, not the keys): a key is never reused
//!   while its watch may still use it, so the slab holds at most one waker per live watch.
//! - **Counted while alive.** [`Guard`] and [`ConnectionGuard`] add to the counts when made
//!   and subtract when dropped, whatever ends the work (its end, a cancelled task); guards may
//!   be taken after the trigger (a connection already accepted still finishes).

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::lock::lock;

/// A server's graceful-shutdown signal and drain count (module doc). Share it in an `Arc`
/// (the guards hold one).
#[derive(Default)]
pub struct Drain {
    triggered: AtomicBool,
    deadline: OnceLock<Instant>,
    wakers: Mutex<Wakers>,
    /// Live guards (accept loops and connections); the waits for the trigger and for zero
    /// sleep on `changed` under this lock.
    count: Mutex<usize>,
    changed: Condvar,
    /// Live [`ConnectionGuard`]s alone.
    connections: AtomicUsize,
}

/// The watches' wakers by key, in a slab: 16 bytes a watch (a hash map takes more a bucket,
/// with its table rounded further up), and every idle connection is one.
#[derive(Default)]
struct Wakers {
    slots: Vec<Option<Waker>>,
    free: Vec<u32>,
}

impl Drain {
    /// A drain not yet triggered, with nothing counted.
    pub fn new() -> Drain {
        Drain::default()
    }

    /// Whether shutdown has begun.
    pub fn is_triggered(&self) -> bool {
        self.triggered.load(Ordering::Acquire)
    }

    /// Begins shutdown: wakes every watch and every thread in [`Drain::wait_triggered`].
    /// Later calls do nothing more.
    pub fn trigger(&self) {
        self.triggered.store(true, Ordering::Release);
        let wakers: Vec<Waker> = lock(&self.wakers).slots.iter_mut().filter_map(Option::take).collect();
        wakers.into_iter().for_each(Waker::wake);
        let _count = lock(&self.count);
        self.changed.notify_all();
    }

    /// Begins shutdown as [`Drain::trigger`], with the deadline of the drain it starts (the
    /// first call's deadline is the one kept: [`Drain::deadline`]).
    pub fn trigger_with_deadline(&self, deadline: Instant) {
        let _ = self.deadline.set(deadline);
        self.trigger();
    }

    /// The drain's deadline, once triggered with one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline.get().copied()
    }

    /// Counts a piece of work (an accept loop) until the guard drops.
    pub fn enter(self: &Arc<Self>) -> Guard {
        *lock(&self.count) += 1;
        Guard(self.clone())
    }

    /// Counts an open connection, in [`Drain::connections`] and in the drain, until the guard
    /// drops.
    pub fn enter_connection(self: &Arc<Self>) -> ConnectionGuard {
        self.connections.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self.enter())
    }

    /// How many guards are live.
    pub fn active(&self) -> usize {
        *lock(&self.count)
    }

    /// How many connection guards are live.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    /// Blocks the calling thread until shutdown begins.
    pub fn wait_triggered(&self) {
        let mut count = lock(&self.count);
        while !self.is_triggered() {
            count = self.changed.wait(count).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Blocks the calling thread until no guard is live or `deadline` passes; returns how
    /// many are left (0: all drained).
    pub fn wait_idle(&self, deadline: Instant) -> usize {
        let mut count = lock(&self.count);
        while *count > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            count = self.changed.wait_timeout(count, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        *count
    }

    /// Registers (or replaces, under `key`) a waker to call when shutdown begins; the key.
    fn register(&self, key: Option<u32>, waker: Waker) -> u32 {
        let mut wakers = lock(&self.wakers);
        let key = match key.or_else(|| wakers.free.pop()) {
            Some(key) => key,
            None => {
                wakers.slots.push(None);
                u32::try_from(wakers.slots.len() - 1).expect("fewer than 2^32 drain watches")
            }
        };
        wakers.slots[key as usize] = Some(waker);
        key
    }

    /// Gives `key` back ("keys stay their watcher's": only its watch does, when it drops).
    fn deregister(&self, key: u32) {
        let mut wakers = lock(&self.wakers);
        wakers.slots[key as usize] = None;
        wakers.free.push(key);
    }
}

impl AsRef<Drain> for Drain {
    fn as_ref(&self) -> &Drain {
        self
    }
}

impl fmt::Debug for Drain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Drain")
            .field("triggered", &self.is_triggered())
            .field("deadline", &self.deadline())
            .field("active", &self.active())
            .field("connections", &self.connections())
            .finish()
    }
}

/// Counts its work in a [`Drain`] until dropped; from [`Drain::enter`].
#[must_use = "the work counts only while the guard lives"]
pub struct Guard(Arc<Drain>);

impl Drop for Guard {
    fn drop(&mut self) {
        let mut count = lock(&self.0.count);
        *count -= 1;
        if *count == 0 {
            self.0.changed.notify_all();
        }
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard").finish_non_exhaustive()
    }
}

/// A [`Guard`] that also counts an open connection; from [`Drain::enter_connection`].
#[must_use = "the connection counts only while the guard lives"]
pub struct ConnectionGuard(Guard);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        (self.0).0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for ConnectionGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionGuard").finish_non_exhaustive()
    }
}

/// One task's watch on a [`Drain`]'s signal, reached through `S`: an `Arc<Drain>`, or a
/// reference or `Arc` to a server state that holds the drain (`AsRef<Drain>`), so that a
/// connection whose future already holds the server's state needs no second pointer.
pub struct Watch<S>
where
    S: Deref,
    S::Target: AsRef<Drain>,
{
    source: S,
    key: Option<u32>,
    waker: Option<Waker>,
}

impl<S> Watch<S>
where
    S: Deref,
    S::Target: AsRef<Drain>,
{
    /// A watch that has registered nothing yet.
    pub fn new(source: S) -> Watch<S> {
        Watch { source, key: None, waker: None }
    }

    /// What the watch reaches the drain through.
    pub fn source(&self) -> &S {
        &self.source
    }

    fn drain(&self) -> &Drain {
        AsRef::<Drain>::as_ref(&*self.source)
    }

    /// Ready once shutdown has begun; otherwise makes sure `cx`'s waker is registered (a
    /// re-poll with the same waker takes no lock).
    pub fn poll_triggered(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.drain().is_triggered() {
            return Poll::Ready(());
        }
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
            self.key = Some(self.drain().register(self.key, cx.waker().clone()));
            // Triggered between the check and the registration: the trigger may have missed
            // the waker ("no lost wake-up").
            if self.drain().is_triggered() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    }
}

impl<S> Drop for Watch<S>
where
    S: Deref,
    S::Target: AsRef<Drain>,
{
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.drain().deregister(key);
        }
    }
}

impl<S> fmt::Debug for Watch<S>
where
    S: Deref,
    S::Target: AsRef<Drain>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch").field("key", &self.key).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;
    use std::time::Duration;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_trigger_wakes_the_registered_watchers_and_keys_stay_theirs() {
        let state = Drain::default();
        let counts: Vec<_> = (0..3).map(|_| Arc::new(Count(AtomicUsize::new(0)))).collect();
        let waker = |i: usize| Waker::from(counts[i].clone());
        let a = state.register(None, waker(0));
        let b = state.register(None, waker(1));
        assert_ne!(a, b);
        assert_eq!(state.register(Some(a), waker(0)), a, "re-registering keeps the key");
        state.deregister(b);
        let c = state.register(None, waker(2));
        assert_eq!(c, b, "a freed key is reused");
        state.trigger();
        let woken: Vec<_> = counts.iter().map(|c| c.0.load(Ordering::SeqCst)).collect();
        assert_eq!(woken, [1, 0, 1], "the deregistered watcher is not woken, the others once");
        // Keys outlive the trigger: a new watcher does not get a key still held by another.
        let d = state.register(None, waker(1));
        assert!(d != a && d != c);
        state.deregister(a);
        state.deregister(c);
        state.deregister(d);
    }

    #[test]
    fn a_watch_registers_once_per_waker_and_gives_its_key_back() {
        let drain = Arc::new(Drain::new());
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        for _ in 0..100 {
            let mut watch = Watch::new(drain.clone());
            assert!(watch.poll_triggered(&mut cx).is_pending());
            assert!(watch.poll_triggered(&mut cx).is_pending());
        }
        assert_eq!(lock(&drain.wakers).slots.len(), 1, "one slot, reused by each new watch");
        let mut kept = Watch::new(&*drain);
        assert!(kept.poll_triggered(&mut cx).is_pending());
        drain.trigger_with_deadline(Instant::now());
        drain.trigger_with_deadline(Instant::now() + Duration::from_secs(60));
        assert!(drain.deadline().unwrap() <= Instant::now(), "the first deadline is kept");
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(kept.poll_triggered(&mut cx).is_ready());
    }

    #[test]
    fn the_waits_see_the_trigger_and_the_last_guard() {
        let drain = Arc::new(Drain::new());
        let loop_guard = drain.enter();
        let connection = drain.enter_connection();
        assert_eq!((drain.active(), drain.connections()), (2, 1));
        let waiter = std::thread::spawn({
            let drain = drain.clone();
            move || {
                drain.wait_triggered();
                drain.wait_idle(Instant::now() + Duration::from_secs(60))
            }
        });
        drain.trigger();
        drop(loop_guard);
        drop(connection);
        assert_eq!(waiter.join().unwrap(), 0);
        assert_eq!(drain.connections(), 0);
        let _late = drain.enter();
        assert_eq!(drain.wait_idle(Instant::now() + Duration::from_millis(10)), 1, "a deadline passed");
    }
}
