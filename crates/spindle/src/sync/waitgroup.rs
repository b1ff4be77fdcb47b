//! Waiting for a group of fibers (or threads) to finish, as Go's `sync.WaitGroup`.
//!
//! Invariant (under the lock): waiters are queued only while the count is positive; the
//! `done` that brings it to zero wakes all of them.

use std::fmt;
use std::sync::{Arc, Mutex};

use super::lock;
use super::waiter::{self, WaitList, WaitNode};

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
        woken.into_iter().for_each(waiter::wake);
    }

    /// Waits until the count is zero.
    pub fn wait(&self) {
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
            waiter::park_on("wait group");
        }
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
