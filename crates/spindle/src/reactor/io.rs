//! Readiness of one registered descriptor, and the waiters for it.
//!
//! # Invariants
//!
//! - `seqs` holds the readiness sequence numbers (events seen): the low 32 bits the events that make reading worth a
//!   retry (readable, hang-up, error), the high 32 bits those for writing (writable, hang-up,
//!   error). It only grows (wrapping), and only [`ScheduledIo::dispatch`] changes it, under the
//!   `waiters` lock.
//! - An operation reads the sequence number of its direction *before* trying the system call. When the call
//!   says `WouldBlock`, the operation waits until the sequence number differs from what it read: any event
//!   after the attempt, never one from before it. Waiting registers a waker under the lock
//!   and re-checks the sequence number there, and dispatch bumps the sequence number and takes the wakers under the
//!   same lock, so an event between the attempt and the registration is never lost.
//! - Edge-triggered epoll reports each new readiness once; waking every waiter of the direction
//!   and letting each retry its call is what makes that safe with several waiters.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::task::Waker;

use crate::sys::epoll::{CLOSED, READABLE, WRITABLE};

const READ_CLOSED: u8 = 1;
const WRITE_CLOSED: u8 = 2;
/// Hang-up or error: the connection is gone for writing too (a read-side shutdown by the
/// peer, EPOLLRDHUP alone, still lets us write).
const HUP_OR_ERR: u32 = libc::EPOLLHUP as u32 | libc::EPOLLERR as u32;

/// Which way an operation goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
}

impl Direction {
    fn shift(self) -> u32 {
        match self {
            Direction::Read => 0,
            Direction::Write => 32,
        }
    }
}

#[derive(Debug, Default)]
struct Waiters {
    readers: Vec<Waker>,
    writers: Vec<Waker>,
}

/// The readiness state of one registration.
#[derive(Debug, Default)]
pub(crate) struct ScheduledIo {
    seqs: AtomicU64,
    /// Sticky: the peer closed its side (`READ_CLOSED`) or the connection died (both bits).
    /// Edge-triggered epoll reports a hang-up once, so callers that skip a system call on
    /// the grounds that "no new event has come" must not do so once this is set.
    closed: AtomicU8,
    waiters: Mutex<Waiters>,
}

impl ScheduledIo {
    pub(crate) fn new() -> ScheduledIo {
        ScheduledIo::default()
    }

    /// The current event count of `dir`; read it before attempting the operation.
    #[inline]
    pub(crate) fn seq(&self, dir: Direction) -> u32 {
        (self.seqs.load(Ordering::Acquire) >> dir.shift()) as u32
    }

    /// Registers `waker` to be woken by the next event of `dir`, unless one happened since
    /// `seen` (then returns false: retry the operation now).
    pub(crate) fn register(&self, dir: Direction, seen: u32, waker: &Waker) -> bool {
        let mut waiters = crate::lock::lock(&self.waiters);
        if self.seq(dir) != seen {
            return false;
        }
        let list = match dir {
            Direction::Read => &mut waiters.readers,
            Direction::Write => &mut waiters.writers,
        };
        if !list.iter().any(|w| w.will_wake(waker)) {
            list.push(waker.clone());
        }
        true
    }

    /// Forgets `waker` (its owner stopped waiting: timeout or cancellation).
    pub(crate) fn unregister(&self, dir: Direction, waker: &Waker) {
        let mut waiters = crate::lock::lock(&self.waiters);
        let list = match dir {
            Direction::Read => &mut waiters.readers,
            Direction::Write => &mut waiters.writers,
        };
        list.retain(|w| !w.will_wake(waker));
    }

    /// Whether a hang-up or error was ever reported for `dir` (see `closed`).
    pub(crate) fn is_closed(&self, dir: Direction) -> bool {
        let bit = match dir {
            Direction::Read => READ_CLOSED,
            Direction::Write => WRITE_CLOSED,
        };
        self.closed.load(Ordering::Acquire) & bit != 0
    }

    /// Records an epoll event and wakes the waiters it concerns.
    pub(crate) fn dispatch(&self, bits: u32) {
        let closed = (if bits & CLOSED != 0 { READ_CLOSED } else { 0 })
            | (if bits & (HUP_OR_ERR) != 0 { WRITE_CLOSED } else { 0 });
        if closed != 0 {
            // Before the sequence number moves: whoever sees the new one also sees the flag.
            self.closed.fetch_or(closed, Ordering::Release);
        }
        let read = bits & (READABLE | CLOSED) != 0;
        let write = bits & (WRITABLE | CLOSED) != 0;
        let add = u64::from(read) | (u64::from(write) << 32);
        if add == 0 {
            return;
        }
        let woken = {
            let mut waiters = crate::lock::lock(&self.waiters);
            // Per-half wrapping add: a carry out of the low half must not leak into the high one.
            let old = self.seqs.load(Ordering::Relaxed);
            let lo = (old as u32).wrapping_add(read as u32);
            let hi = ((old >> 32) as u32).wrapping_add(write as u32);
            self.seqs.store(u64::from(lo) | (u64::from(hi) << 32), Ordering::Release);
            let mut woken = Vec::new();
            if read {
                woken.append(&mut waiters.readers);
            }
            if write {
                woken.append(&mut waiters.writers);
            }
            woken
        };
        woken.into_iter().for_each(Waker::wake);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_event_after_the_attempt_wakes_and_one_before_registration_is_not_lost() {
        let io = ScheduledIo::new();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let seen = io.seq(Direction::Read);
        io.dispatch(READABLE); // arrives between the attempt and the registration
        assert!(!io.register(Direction::Read, seen, &waker), "must retry at once");
        let seen = io.seq(Direction::Read);
        assert!(io.register(Direction::Read, seen, &waker));
        io.dispatch(WRITABLE); // the other direction does not wake a reader
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        io.dispatch(CLOSED); // a hang-up wakes both directions
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_ne!(io.seq(Direction::Write), 0);
    }

    #[test]
    fn hang_ups_are_sticky_per_direction() {
        let io = ScheduledIo::new();
        assert!(!io.is_closed(Direction::Read) && !io.is_closed(Direction::Write));
        io.dispatch(libc::EPOLLIN as u32 | libc::EPOLLRDHUP as u32); // peer sent FIN
        assert!(io.is_closed(Direction::Read));
        assert!(!io.is_closed(Direction::Write), "a half-close still lets us write");
        io.dispatch(WRITABLE);
        assert!(io.is_closed(Direction::Read), "sticky");
        io.dispatch(libc::EPOLLHUP as u32);
        assert!(io.is_closed(Direction::Write));
    }

    #[test]
    fn unregister_forgets_the_waker_and_sequence_numbers_wrap_per_half() {
        let io = ScheduledIo::new();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        assert!(io.register(Direction::Write, 0, &waker));
        io.unregister(Direction::Write, &waker);
        io.dispatch(WRITABLE);
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        io.seqs.store(u64::from(u32::MAX) | (5 << 32), Ordering::SeqCst);
        io.dispatch(READABLE);
        assert_eq!(io.seq(Direction::Read), 0, "the read half wraps");
        assert_eq!(io.seq(Direction::Write), 5, "without carrying into the write half");
    }
}
