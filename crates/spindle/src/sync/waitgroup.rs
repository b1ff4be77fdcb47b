//! Waiting for a group of fibers (or threads) to finish, as Go's `sync.WaitGroup`.

// Invariant (under the lock): waiters are queued only while the count is positive; the
// `done` that brings it to zero wakes all of them.

use std::fmt;
use std::sync::{Arc, Mutex};

use std::future::Future;

use crate::lock::lock;
use crate::park::wait::{deadline_in, pass_none, Wait};
use crate::park::{self, WaitList, WaitNode};

/// A counter that `wait` blocks on until it is zero. Clones share the counter.
///
/// ```
/// use spindle::sync::WaitGroup;
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let wg = WaitGroup::new();
///     for _ in 0..10 {
///         wg.add(1);
///         let wg = wg.clone();
///         spindle::spawn(move || wg.done());
///     }
///     wg.wait();
///     assert_eq!(wg.count(), 0);
/// });
/// ```
#[derive(Clone, Default)]
pub struct WaitGroup {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    count: usize,
    waiters: WaitList,
}

impl WaitGroup {
    pub fn new() -> WaitGroup {
        WaitGroup::default()
    }

    /// Adds `n` to the count.
    pub fn add(&self, n: usize) {
        let mut inner = lock(&self.inner);
        inner.count = inner.count.checked_add(n).expect("WaitGroup count overflow");
    }

    /// Subtracts one; at zero, wakes every waiter.
    ///
    /// # Panics
    ///
    /// If the count is already zero (more `done` than `add`).
    pub fn done(&self) {
        let mut inner = lock(&self.inner);
        assert!(inner.count > 0, "WaitGroup::done called more times than add");
        inner.count -= 1;
        let woken = if inner.count == 0 { inner.waiters.take_all() } else { Vec::new() };
        drop(inner);
        woken.into_iter().for_each(park::wake);
    }

    /// Waits until the count is zero.
    #[track_caller]
    pub fn wait(&self) {
        crate::sched::api::check_entry("wait group");
        let mut node = None;
        loop {
            let mut inner = lock(&self.inner);
            if inner.count == 0 {
                if let Some(node) = &node {
                    inner.waiters.remove(node);
                }
                return;
            }
            inner.waiters.push(node.get_or_insert_with(WaitNode::new));
            drop(inner);
            park::park_on("wait group");
        }
    }

    /// Waits at most `timeout` for the count to reach zero; true if it did.
    ///
    /// ```
    /// use std::time::Duration;
    /// let wg = spindle::sync::WaitGroup::new();
    /// wg.add(1);
    /// assert!(!wg.wait_timeout(Duration::from_millis(5)));
    /// wg.done();
    /// assert!(wg.wait_timeout(Duration::from_millis(5)));
    /// ```
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> bool {
        self.wait_until(deadline_in(timeout))
    }

    /// Waits until `deadline` at the latest for the count to reach zero; true if it did.
    pub fn wait_deadline(&self, deadline: std::time::Instant) -> bool {
        self.wait_until(Some(deadline))
    }

    #[track_caller]
    fn wait_until(&self, deadline: Option<std::time::Instant>) -> bool {
        crate::sched::api::check_entry("wait group (with timeout)");
        let mut wait = Wait::new(&self.inner, |i| &mut i.waiters, pass_none);
        wait.block(deadline, "wait group (with timeout)", |i, _| (i.count == 0).then_some(())).is_some()
    }

    /// Waits from async code: a future that completes when the count is zero.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// let wg = spindle::sync::WaitGroup::new();
    /// wg.add(1);
    /// let w = wg.clone();
    /// let h = rt.spawn_async(async move { w.wait_async().await });
    /// wg.done();
    /// h.join().unwrap();
    /// ```
    pub fn wait_async(&self) -> impl Future<Output = ()> + Send + '_ {
        let mut wait = Wait::new(&self.inner, |i| &mut i.waiters, pass_none);
        std::future::poll_fn(move |cx| wait.poll(cx, |i, _| (i.count == 0).then_some(())))
    }

    /// The current count.
    pub fn count(&self) -> usize {
        lock(&self.inner).count
    }
}

impl fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroup").field("count", &self.count()).finish()
    }
}
