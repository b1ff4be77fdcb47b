//! A counting semaphore (tokio's `Semaphore`, Go's buffered-channel idiom), with borrowed and
//! owned permits.
//!
//! Invariants (under the lock):
//! - `permits` is the number available; an acquire takes one only when it is positive.
//! - Each permit released wakes at most one waiter (the oldest); a waiter that leaves after
//!   such a wake-up without taking a permit passes it on while permits remain, so a permit is
//!   never left available while a waiter sleeps for it.
//! - Acquiring may barge past queued waiters (as the mutex does): throughput over strict FIFO.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::lock::lock;
use crate::park::wait::{deadline_in, Wait, Wakes};
use crate::park::{self, WaitList};

/// A set of permits; `acquire` waits while none is available.
///
/// ```
/// use std::sync::Arc;
/// use spindle::sync::Semaphore;
///
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let limit = Arc::new(Semaphore::new(2)); // at most two at a time
///     let handles: Vec<_> = (0..6)
///         .map(|_| {
///             let permit = limit.clone().acquire_owned();
///             spindle::spawn(move || {
///                 let _permit = permit; // released when the fiber ends
///             })
///         })
///         .collect();
///     handles.into_iter().for_each(|h| h.join().unwrap());
///     assert_eq!(limit.available_permits(), 2);
/// });
/// ```
pub struct Semaphore {
    state: Mutex<State>,
}

struct State {
    permits: usize,
    waiters: WaitList,
}

fn list(s: &mut State) -> &mut WaitList {
    &mut s.waiters
}

fn pass_on(s: &mut State) -> Wakes {
    if s.permits > 0 {
        s.waiters.pop().into_iter().collect()
    } else {
        Vec::new()
    }
}

fn take(s: &mut State, _woken: bool) -> Option<()> {
    if s.permits > 0 {
        s.permits -= 1;
        Some(())
    } else {
        None
    }
}

impl Semaphore {
    /// A semaphore with `permits` permits.
    pub fn new(permits: usize) -> Semaphore {
        Semaphore { state: Mutex::new(State { permits, waiters: WaitList::new() }) }
    }

    /// The number of permits available now.
    pub fn available_permits(&self) -> usize {
        lock(&self.state).permits
    }

    /// Adds `n` permits, waking up to `n` waiters.
    pub fn add_permits(&self, n: usize) {
        let mut state = lock(&self.state);
        state.permits = state.permits.checked_add(n).expect("Semaphore permit count overflow");
        let wakes: Wakes = (0..n).map_while(|_| state.waiters.pop()).collect();
        drop(state);
        wakes.into_iter().for_each(park::wake);
    }

    /// Takes a permit, waiting while none is available.
    #[track_caller]
    pub fn acquire(&self) -> SemaphorePermit<'_> {
        crate::sched::api::check_entry("semaphore acquire");
        Wait::new(&self.state, list, pass_on).block(None, "semaphore acquire", take);
        SemaphorePermit { sem: self }
    }

    /// Takes a permit if one is available now.
    pub fn try_acquire(&self) -> Option<SemaphorePermit<'_>> {
        take(&mut lock(&self.state), false).map(|()| SemaphorePermit { sem: self })
    }

    /// Takes a permit, waiting at most `timeout`.
    pub fn acquire_timeout(&self, timeout: Duration) -> Option<SemaphorePermit<'_>> {
        self.acquire_until(deadline_in(timeout))
    }

    /// Takes a permit, waiting until `deadline` at the latest.
    pub fn acquire_deadline(&self, deadline: Instant) -> Option<SemaphorePermit<'_>> {
        self.acquire_until(Some(deadline))
    }

    #[track_caller]
    fn acquire_until(&self, deadline: Option<Instant>) -> Option<SemaphorePermit<'_>> {
        crate::sched::api::check_entry("semaphore acquire (with timeout)");
        Wait::new(&self.state, list, pass_on)
            .block(deadline, "semaphore acquire (with timeout)", take)
            .map(|()| SemaphorePermit { sem: self })
    }

    /// Takes a permit from async code.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// let sem = std::sync::Arc::new(spindle::sync::Semaphore::new(1));
    /// let s = sem.clone();
    /// rt.spawn_async(async move {
    ///     let _p = s.acquire_async().await;
    /// })
    /// .join()
    /// .unwrap();
    /// assert_eq!(sem.available_permits(), 1);
    /// ```
    pub fn acquire_async(&self) -> impl Future<Output = SemaphorePermit<'_>> + Send + '_ {
        let mut wait = Wait::new(&self.state, list, pass_on);
        std::future::poll_fn(move |cx| wait.poll(cx, take).map(|()| SemaphorePermit { sem: self }))
    }

    /// Takes a permit that keeps the semaphore alive (it may move into a spawned fiber).
    pub fn acquire_owned(self: Arc<Self>) -> OwnedSemaphorePermit {
        self.acquire().forget();
        OwnedSemaphorePermit { sem: self }
    }

    /// Takes an owned permit if one is available now.
    pub fn try_acquire_owned(self: Arc<Self>) -> Option<OwnedSemaphorePermit> {
        self.try_acquire()?.forget();
        Some(OwnedSemaphorePermit { sem: self })
    }

    /// Takes an owned permit from async code.
    pub async fn acquire_owned_async(self: Arc<Self>) -> OwnedSemaphorePermit {
        self.acquire_async().await.forget();
        OwnedSemaphorePermit { sem: self }
    }
}

/// A permit borrowed from a [`Semaphore`]; released on drop.
#[must_use = "the permit is released at once when dropped"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
}

impl SemaphorePermit<'_> {
    /// Keeps the permit taken for good (the semaphore has one permit fewer).
    pub fn forget(self) {
        std::mem::forget(self);
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.sem.add_permits(1);
    }
}

/// A permit that owns a reference to its [`Semaphore`]; released on drop.
#[must_use = "the permit is released at once when dropped"]
pub struct OwnedSemaphorePermit {
    sem: Arc<Semaphore>,
}

impl OwnedSemaphorePermit {
    /// The semaphore this permit belongs to.
    pub fn semaphore(&self) -> &Arc<Semaphore> {
        &self.sem
    }
}

impl Drop for OwnedSemaphorePermit {
    fn drop(&mut self) {
        self.sem.add_permits(1);
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore").field("permits", &self.available_permits()).finish()
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit").finish_non_exhaustive()
    }
}

impl fmt::Debug for OwnedSemaphorePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedSemaphorePermit").finish_non_exhaustive()
    }
}
