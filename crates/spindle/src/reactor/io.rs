//! Readiness of one registered descriptor, and the waiters for it.
//!
//! # Invariants
//!
//! - `state` holds, per direction, a 31-bit readiness sequence number (events seen) and a
//!   sticky closed bit: the low 32 bits for reading (events that make a read worth a retry:
//!   readable, hang-up, error), the high 32 bits for writing (writable, hang-up, error). A
//!   sequence number only grows (wrapping within its 31 bits, never carrying into the closed
//!   bit or the other half), a closed bit is only ever set, and only [`ScheduledIo::dispatch`]
//!   changes the word, under the `waiters` lock, with one store: whoever sees a new sequence
//!   number also sees the closed bit set by the same event.
//! - An operation reads the sequence number of its direction *before* trying the system call. When the call
//!   says `WouldBlock`, the operation waits until the sequence number differs from what it read: any event
//!   after the attempt, never one from before it. Waiting registers a waker under the lock
//!   and re-checks the sequence number there, and dispatch bumps the sequence number and takes the wakers under the
//!   same lock, so an event between the attempt and the registration is never lost.
//! - Edge-triggered epoll reports each new readiness once; waking every waiter of the direction
//!   and letting each retry its call is what makes that safe with several waiters.
//! - **One waiter per direction inline.** The common case (one task or fiber reading, one
//!   writing) keeps its wakers in two inline slots and allocates nothing; further waiters of a
//!   direction (a socket shared between fibers) go to a boxed spill list, made on the first
//!   and freed when it empties. Dispatch takes the slot and the spill list of each direction
//!   it concerns: every waiter of the direction is woken, whichever place it was in.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::Waker;

use crate::sys::epoll::{CLOSED, READABLE, WRITABLE};

/// The sequence number's bits in a direction's half of `state`.
const SEQ_MASK: u32 = 0x7FFF_FFFF;
/// The direction's sticky closed bit in its half of `state`.
const CLOSED_BIT: u32 = 0x8000_0000;
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

/// The waiters of one direction beyond the first (see "one waiter per direction inline").
#[derive(Debug, Default)]
struct Spill {
    readers: Vec<Waker>,
    writers: Vec<Waker>,
}

impl Spill {
    fn list(&mut self, dir: Direction) -> &mut Vec<Waker> {
        match dir {
            Direction::Read => &mut self.readers,
            Direction::Write => &mut self.writers,
        }
    }
}

#[derive(Debug, Default)]
struct Waiters {
    reader: Option<Waker>,
    writer: Option<Waker>,
    spill: Option<Box<Spill>>,
}

impl Waiters {
    fn slot(&mut self, dir: Direction) -> &mut Option<Waker> {
        match dir {
            Direction::Read => &mut self.reader,
            Direction::Write => &mut self.writer,
        }
    }

    /// Frees the spill list once it holds no waiter.
    fn free_empty_spill(&mut self) {
        if self.spill.as_ref().is_some_and(|s| s.readers.is_empty() && s.writers.is_empty()) {
            self.spill = None;
        }
    }
}

/// The readiness state of one registration.
#[derive(Debug, Default)]
pub(crate) struct ScheduledIo {
    /// Per direction, the sequence number and the sticky closed bit (see the module doc).
    /// Edge-triggered epoll reports a hang-up once, so callers that skip a system call on the
    /// grounds that "no new event has come" must not do so once a closed bit is set: the
    /// peer closed its side (read) or the connection died (both).
    state: AtomicU64,
    waiters: Mutex<Waiters>,
}

impl ScheduledIo {
    pub(crate) fn new() -> ScheduledIo {
        ScheduledIo::default()
    }

    #[inline]
    fn half(&self, dir: Direction) -> u32 {
        (self.state.load(Ordering::Acquire) >> dir.shift()) as u32
    }

    /// The current event count of `dir`; read it before attempting the operation.
    #[inline]
    pub(crate) fn seq(&self, dir: Direction) -> u32 {
        self.half(dir) & SEQ_MASK
    }

    /// Registers `waker` to be woken by the next event of `dir`, unless one happened since
    /// `seen` (then returns false: retry the operation now).
    pub(crate) fn register(&self, dir: Direction, seen: u32, waker: &Waker) -> bool {
        let mut waiters = crate::lock::lock(&self.waiters);
        if self.seq(dir) != seen {
            return false;
        }
        let waiters = &mut *waiters;
        let in_slot = waiters.slot(dir).as_ref().is_some_and(|w| w.will_wake(waker));
        if in_slot || waiters.spill.as_mut().is_some_and(|s| s.list(dir).iter().any(|w| w.will_wake(waker))) {
            return true;
        }
        let slot = waiters.slot(dir);
        if slot.is_none() {
            *slot = Some(waker.clone());
        } else {
            waiters.spill.get_or_insert_with(Box::default).list(dir).push(waker.clone());
        }
        true
    }

    /// Forgets `waker` (its owner stopped waiting: timeout or cancellation).
    pub(crate) fn unregister(&self, dir: Direction, waker: &Waker) {
        let mut waiters = crate::lock::lock(&self.waiters);
        let slot = waiters.slot(dir);
        if slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = None;
        }
        if let Some(spill) = &mut waiters.spill {
            spill.list(dir).retain(|w| !w.will_wake(waker));
            waiters.free_empty_spill();
        }
    }

    /// Whether a hang-up or error was ever reported for `dir` (see `state`).
    pub(crate) fn is_closed(&self, dir: Direction) -> bool {
        self.half(dir) & CLOSED_BIT != 0
    }

    /// Records an epoll event and wakes the waiters it concerns.
    #[inline]
    pub(crate) fn dispatch(&self, bits: u32) {
        let read_closed = bits & CLOSED != 0;
        let write_closed = bits & HUP_OR_ERR != 0;
        let read = bits & (READABLE | CLOSED) != 0;
        let write = bits & (WRITABLE | CLOSED) != 0;
        if !read && !write {
            return;
        }
        // Per half: the sequence number wraps within its bits, the closed bit is kept or set.
        let next = |half: u32, bump: bool, closed: bool| {
            let seq = (half & SEQ_MASK).wrapping_add(u32::from(bump)) & SEQ_MASK;
            seq | (half & CLOSED_BIT) | if closed { CLOSED_BIT } else { 0 }
        };
        let (reader, writer, spilled) = {
            let mut waiters = crate::lock::lock(&self.waiters);
            let old = self.state.load(Ordering::Relaxed);
            let lo = next(old as u32, read, read_closed);
            let hi = next((old >> 32) as u32, write, write_closed);
            self.state.store(u64::from(lo) | (u64::from(hi) << 32), Ordering::Release);
            let reader = if read { waiters.reader.take() } else { None };
            let writer = if write { waiters.writer.take() } else { None };
            // The spill lists exist only for a socket shared between waiters: the common
            // event takes the two slots and nothing else.
            let spilled = match &mut waiters.spill {
                None => None,
                Some(spill) => {
                    let readers = if read { std::mem::take(&mut spill.readers) } else { Vec::new() };
                    let writers = if write { std::mem::take(&mut spill.writers) } else { Vec::new() };
                    waiters.free_empty_spill();
                    Some((readers, writers))
                }
            };
            (reader, writer, spilled)
        };
        if let Some(w) = reader {
            w.wake();
        }
        if let Some(w) = writer {
            w.wake();
        }
        if let Some((readers, writers)) = spilled {
            readers.into_iter().chain(writers).for_each(Waker::wake);
        }
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
        io.state.store(u64::from(SEQ_MASK) | (5 << 32), Ordering::SeqCst);
        io.dispatch(READABLE);
        assert_eq!(io.seq(Direction::Read), 0, "the read half wraps");
        assert!(!io.is_closed(Direction::Read), "without carrying into the closed bit");
        assert_eq!(io.seq(Direction::Write), 5, "nor into the write half");
        io.dispatch(libc::EPOLLHUP as u32);
        assert!(io.is_closed(Direction::Read) && io.is_closed(Direction::Write));
        assert_eq!(
            (io.seq(Direction::Read), io.seq(Direction::Write)),
            (1, 6),
            "a hang-up counts as an event"
        );
    }

    #[test]
    fn every_waiter_of_the_direction_is_woken_inline_or_spilled() {
        let io = ScheduledIo::new();
        let counts: Vec<_> = (0..4).map(|_| Arc::new(Count(AtomicUsize::new(0)))).collect();
        let wakers: Vec<_> = counts.iter().map(|c| Waker::from(c.clone())).collect();
        // Three readers (one inline, two spilled), one writer; registering twice is once.
        for w in &wakers[..3] {
            assert!(io.register(Direction::Read, 0, w));
            assert!(io.register(Direction::Read, 0, w));
        }
        assert!(io.register(Direction::Write, 0, &wakers[3]));
        io.dispatch(WRITABLE);
        let woken = || counts.iter().map(|c| c.0.load(Ordering::SeqCst)).collect::<Vec<_>>();
        assert_eq!(woken(), [0, 0, 0, 1], "a write event wakes the writer only");
        io.dispatch(READABLE);
        assert_eq!(woken(), [1, 1, 1, 1], "a read event wakes every reader, each once");
        io.dispatch(READABLE);
        assert_eq!(woken(), [1, 1, 1, 1], "woken waiters are forgotten");
        assert!(crate::lock::lock(&io.waiters).spill.is_none(), "the empty spill list is freed");
    }

    #[test]
    fn an_unregistered_inline_waiter_leaves_the_spilled_ones_waiting() {
        let io = ScheduledIo::new();
        let (a, b) = (Arc::new(Count(AtomicUsize::new(0))), Arc::new(Count(AtomicUsize::new(0))));
        let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
        assert!(io.register(Direction::Write, 0, &wa));
        assert!(io.register(Direction::Write, 0, &wb)); // spilled
        io.unregister(Direction::Write, &wa);
        assert!(io.register(Direction::Write, 0, &wb), "already waiting: not registered twice");
        io.dispatch(CLOSED);
        assert_eq!((a.0.load(Ordering::SeqCst), b.0.load(Ordering::SeqCst)), (0, 1));
        io.unregister(Direction::Write, &wb);
        assert!(crate::lock::lock(&io.waiters).spill.is_none());
    }

    #[test]
    fn the_readiness_state_stays_small() {
        // Every registered socket has one, in an `Arc`: 56 bytes + 16 of counts = 72, which
        // glibc serves from an 80-byte chunk.
        assert!(std::mem::size_of::<ScheduledIo>() <= 56, "{}", std::mem::size_of::<ScheduledIo>());
    }
}
