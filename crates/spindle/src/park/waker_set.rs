//! [`WakerSet`]: the wakers of the tasks waiting for one event, each under a key that its
//! future keeps, so that a future dropped before the event takes its waker out again.
//!
//! # Invariants
//!
//! - At most one waker per key: a future re-polled with a new waker replaces its old one, so
//!   the set holds at most one waker per live waiting future, never one per poll.
//! - Used under its owner's lock, like `WaitList`; wake the wakers taken by
//!   [`take_all`](WakerSet::take_all) after unlocking.

use std::collections::HashMap;
use std::task::Waker;

#[derive(Debug, Default)]
pub(crate) struct WakerSet {
    next_key: u64,
    wakers: HashMap<u64, Waker>,
}

impl WakerSet {
    /// Stores `waker` under `*key`, giving the future a key on its first registration.
    pub(crate) fn register(&mut self, key: &mut Option<u64>, waker: &Waker) {
        let k = *key.get_or_insert_with(|| {
            self.next_key += 1;
            self.next_key
        });
        match self.wakers.get_mut(&k) {
            Some(old) if old.will_wake(waker) => {}
            Some(old) => old.clone_from(waker),
            None => {
                self.wakers.insert(k, waker.clone());
            }
        }
    }

    /// Takes the waker under `key` out (its future is dropped or done).
    pub(crate) fn remove(&mut self, key: Option<u64>) {
        if let Some(k) = key {
            self.wakers.remove(&k);
        }
    }

    /// Takes every waker, for waking them all. Keys stay valid: a future registering again
    /// reuses its key.
    pub(crate) fn take_all(&mut self) -> Vec<Waker> {
        self.wakers.drain().map(|(_, w)| w).collect()
    }

    /// How many wakers are stored.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.wakers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::Wake;

    struct Nop;
    impl Wake for Nop {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn one_waker_per_key_and_removal_on_drop() {
        let mut set = WakerSet::default();
        let (a, b) = (Waker::from(Arc::new(Nop)), Waker::from(Arc::new(Nop)));
        let mut key = None;
        for _ in 0..100 {
            set.register(&mut key, &a);
            set.register(&mut key, &b);
        }
        assert_eq!(set.len(), 1);
        let mut other = None;
        set.register(&mut other, &a);
        assert_eq!(set.len(), 2);
        set.remove(key);
        assert_eq!(set.len(), 1);
        assert_eq!(set.take_all().len(), 1);
        assert_eq!(set.len(), 0);
    }
}
