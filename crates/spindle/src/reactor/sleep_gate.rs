//! The protocol that makes a remote wake-up cost a system call only when the worker sleeps,
//! without ever being lost (module `reactor`, "no lost remote wake-up"). Model-checked with loom below.
//!
//! One atomic word holds two bits: `INBOX` (another thread queued work for the worker) and
//! `SLEEPING` (the worker is blocked, or about to block, in `epoll_wait`). Every change is a
//! read-modify-write of that one word, so all of them are totally ordered:
//!
//! - a remote producer queues its work, then sets `INBOX`; if the word it replaced had
//!   `SLEEPING` (and not yet `INBOX`), it writes the eventfd;
//! - the worker sets `SLEEPING`; if the word it replaced had `INBOX`, it does not block;
//! - either the producer's RMW comes first (the worker sees `INBOX`) or the worker's does (the
//!   producer sees `SLEEPING` and writes the eventfd, which stays readable until drained).
//!
//! A Dekker-style pair of separate flags (store one, load the other) needs SeqCst on both
//! sides and is what loom cannot check; this single-word form needs only acquire/release.

use std::sync::atomic::Ordering;

use crate::loom::AtomicU8;

const INBOX: u8 = 1;
const SLEEPING: u8 = 2;

#[derive(Debug)]
pub(crate) struct SleepGate {
    state: AtomicU8,
}

impl SleepGate {
    pub(crate) fn new() -> SleepGate {
        SleepGate { state: AtomicU8::new(0) }
    }

    /// A producer has queued work: returns true when it must write the eventfd.
    pub(crate) fn publish(&self) -> bool {
        let prev = self.state.fetch_or(INBOX, Ordering::AcqRel);
        prev & (SLEEPING | INBOX) == SLEEPING
    }

    /// Cheap check for queued remote work (the worker's fast path).
    #[inline]
    pub(crate) fn has_inbox(&self) -> bool {
        self.state.load(Ordering::Relaxed) & INBOX != 0
    }

    /// The worker takes the inbox flag before draining the queues; true if it was set.
    pub(crate) fn take_inbox(&self) -> bool {
        self.state.fetch_and(!INBOX, Ordering::AcqRel) & INBOX != 0
    }

    /// The worker is about to block. Returns false (and stays awake) if remote work is queued.
    pub(crate) fn enter(&self) -> bool {
        let prev = self.state.fetch_or(SLEEPING, Ordering::AcqRel);
        if prev & INBOX != 0 {
            self.leave();
            return false;
        }
        true
    }

    /// The worker is awake again.
    pub(crate) fn leave(&self) {
        self.state.fetch_and(!SLEEPING, Ordering::AcqRel);
    }
}

#[cfg(all(test, spindle_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::{Arc, Notify};
    use loom::thread;

    /// Two producers and a worker that drains, then sleeps. The Notify stands for the eventfd
    /// (sticky, like it). A lost wake-up leaves the worker waiting forever: loom reports it.
    #[test]
    fn loom_remote_work_always_wakes_a_sleeping_worker() {
        loom::model(|| {
            let gate = Arc::new(SleepGate::new());
            let eventfd = Arc::new(Notify::new());
            let producers: Vec<_> = (0..2)
                .map(|_| {
                    let (gate, eventfd) = (gate.clone(), eventfd.clone());
                    thread::spawn(move || {
                        if gate.publish() {
                            eventfd.notify();
                        }
                    })
                })
                .collect();
            let mut seen = 0;
            // The worker's idle loop: drain, then sleep unless something arrived.
            while seen < 1 {
                if gate.take_inbox() {
                    seen += 1;
                    continue;
                }
                if gate.enter() {
                    eventfd.wait();
                    gate.leave();
                }
            }
            for p in producers {
                p.join().unwrap();
            }
        });
    }
}
