//! A reader-writer lock that parks fibers (and, awaited, suspends tasks) instead of blocking
//! their worker.
//!
//! Invariants (under the internal lock, which guards `State`):
//! - `writer` excludes everything: while it is set, `readers == 0`. A guard exists only for
//!   the holder counted here, so `value` is shared by readers or owned by one writer.
//! - Writers are preferred: a new reader waits while a writer is queued, unless a writer's
//!   unlock woke it (a write unlock lets every queued reader in, so readers never starve).
//! - Wake-ups follow one rule (`wakes`), applied at every unlock and by a woken waiter that
//!   leaves: after a write unlock, queued readers first (all of them), else one writer;
//!   after the last read unlock, one writer. Wake-ups are issued after the lock is released.

use std::cell::UnsafeCell;
use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::lock::lock;
use crate::park::wait::{deadline_in, Wait, Wakes};
use crate::park::{self, WaitList};

/// Many readers or one writer of a `T`.
///
/// ```
/// use std::sync::Arc;
/// use spindle::sync::RwLock;
///
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let config = Arc::new(RwLock::new(String::from("v1")));
///     let c = config.clone();
///     let reader = spindle::spawn(move || c.read().len());
///     *config.write() = String::from("v2");
///     assert_eq!(reader.join().unwrap(), 2);
///     assert_eq!(*config.read(), "v2");
/// });
/// ```
pub struct RwLock<T: ?Sized> {
    state: Mutex<State>,
    value: UnsafeCell<T>,
}

// SAFETY: readers share &T across threads (T: Sync) and a writer gets &mut T on any thread
// (T: Send); the state protocol (module doc) grants one or the other.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

#[derive(Default)]
struct State {
    readers: usize,
    writer: bool,
    read_waiters: WaitList,
    write_waiters: WaitList,
}

fn read_list(s: &mut State) -> &mut WaitList {
    &mut s.read_waiters
}

fn write_list(s: &mut State) -> &mut WaitList {
    &mut s.write_waiters
}

/// Who to wake once the lock may have become free; `after_write` after a write unlock.
fn wakes(s: &mut State, after_write: bool) -> Wakes {
    if s.writer {
        return Vec::new();
    }
    let readers_queued = !s.read_waiters.is_empty();
    if after_write && readers_queued {
        return s.read_waiters.take_all();
    }
    if s.readers == 0 {
        if let Some(w) = s.write_waiters.pop() {
            return vec![w];
        }
        return s.read_waiters.take_all();
    }
    Vec::new()
}

fn read_pass_on(s: &mut State) -> Wakes {
    wakes(s, false)
}

fn write_pass_on(s: &mut State) -> Wakes {
    wakes(s, false)
}

fn take_read(s: &mut State, woken: bool) -> Option<()> {
    if !s.writer && (woken || s.write_waiters.is_empty()) {
        s.readers += 1;
        Some(())
    } else {
        None
    }
}

fn take_write(s: &mut State, _woken: bool) -> Option<()> {
    if !s.writer && s.readers == 0 {
        s.writer = true;
        Some(())
    } else {
        None
    }
}

impl<T> RwLock<T> {
    pub fn new(value: T) -> RwLock<T> {
        RwLock { state: Mutex::new(State::default()), value: UnsafeCell::new(value) }
    }

    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Shared access, waiting while a writer holds the lock or waits for it.
    #[track_caller]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        crate::sched::api::check_entry("rwlock read");
        Wait::new(&self.state, read_list, read_pass_on).block(None, "rwlock read", take_read);
        RwLockReadGuard { lock: self }
    }

    /// Exclusive access, waiting while anyone holds the lock.
    #[track_caller]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        crate::sched::api::check_entry("rwlock write");
        Wait::new(&self.state, write_list, write_pass_on).block(None, "rwlock write", take_write);
        RwLockWriteGuard { lock: self }
    }

    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        take_read(&mut lock(&self.state), false).map(|()| RwLockReadGuard { lock: self })
    }

    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        take_write(&mut lock(&self.state), false).map(|()| RwLockWriteGuard { lock: self })
    }

    /// [`read`](Self::read), waiting at most `timeout`.
    pub fn read_timeout(&self, timeout: Duration) -> Option<RwLockReadGuard<'_, T>> {
        self.read_until(deadline_in(timeout))
    }

    /// [`read`](Self::read), waiting until `deadline` at the latest.
    pub fn read_deadline(&self, deadline: Instant) -> Option<RwLockReadGuard<'_, T>> {
        self.read_until(Some(deadline))
    }

    #[track_caller]
    fn read_until(&self, deadline: Option<Instant>) -> Option<RwLockReadGuard<'_, T>> {
        crate::sched::api::check_entry("rwlock read (with timeout)");
        Wait::new(&self.state, read_list, read_pass_on)
            .block(deadline, "rwlock read (with timeout)", take_read)
            .map(|()| RwLockReadGuard { lock: self })
    }

    /// [`write`](Self::write), waiting at most `timeout`.
    pub fn write_timeout(&self, timeout: Duration) -> Option<RwLockWriteGuard<'_, T>> {
        self.write_until(deadline_in(timeout))
    }

    /// [`write`](Self::write), waiting until `deadline` at the latest.
    pub fn write_deadline(&self, deadline: Instant) -> Option<RwLockWriteGuard<'_, T>> {
        self.write_until(Some(deadline))
    }

    #[track_caller]
    fn write_until(&self, deadline: Option<Instant>) -> Option<RwLockWriteGuard<'_, T>> {
        crate::sched::api::check_entry("rwlock write (with timeout)");
        Wait::new(&self.state, write_list, write_pass_on)
            .block(deadline, "rwlock write (with timeout)", take_write)
            .map(|()| RwLockWriteGuard { lock: self })
    }

    /// Shared access from async code.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// let lock = std::sync::Arc::new(spindle::sync::RwLock::new(5));
    /// let l = lock.clone();
    /// assert_eq!(rt.spawn_async(async move { *l.read_async().await }).join().unwrap(), 5);
    /// ```
    pub fn read_async(&self) -> impl Future<Output = RwLockReadGuard<'_, T>> + Send + '_
    where
        T: Send + Sync,
    {
        let mut wait = Wait::new(&self.state, read_list, read_pass_on);
        std::future::poll_fn(move |cx| wait.poll(cx, take_read).map(|()| RwLockReadGuard { lock: self }))
    }

    /// Exclusive access from async code.
    pub fn write_async(&self) -> impl Future<Output = RwLockWriteGuard<'_, T>> + Send + '_
    where
        T: Send + Sync,
    {
        let mut wait = Wait::new(&self.state, write_list, write_pass_on);
        std::future::poll_fn(move |cx| wait.poll(cx, take_write).map(|()| RwLockWriteGuard { lock: self }))
    }

    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    fn unlock(&self, write: bool) {
        let mut state = lock(&self.state);
        if write {
            state.writer = false;
        } else {
            state.readers -= 1;
        }
        let wake = wakes(&mut state, write);
        drop(state);
        wake.into_iter().for_each(park::wake);
    }
}

/// Shared access to the value of a [`RwLock`]; unlocks on drop.
pub struct RwLockReadGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
}

/// Exclusive access to the value of a [`RwLock`]; unlocks on drop.
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
}

// SAFETY: a read guard gives &T only; sharing it across threads needs T: Sync.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}
// SAFETY: a write guard gives &T through &self; sharing it needs T: Sync.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while its holder is counted in `readers`, so no
        // writer exists (module invariant).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while its holder is the one `writer`.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and `&mut self` makes this the only reference derived from it.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.unlock(false);
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.unlock(true);
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_read() {
            Some(g) => f.debug_struct("RwLock").field("value", &&*g).finish(),
            None => f.debug_struct("RwLock").field("value", &"<locked>").finish(),
        }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
