//! [`LifoSlot`]: the one-item slot that makes a hand-off run next, with a cap.
//!
//! A worker has one for fibers and one for tasks (module `sched::worker`, "LIFO slots"). What
//! this worker's own code wakes goes into the slot and runs next, which keeps a ping-pong
//! pair's data in cache; the cap keeps such a pair from starving the rest of the queue.
//!
//! Invariant: **owner-only.** A slot is touched only by its worker's thread (it lives in
//! `Worker`, which is not `Sync`), so plain `Cell`s suffice.

use std::cell::Cell;

/// The most consecutive runs taken from a LIFO slot, as in tokio: then the slot's occupant
/// goes to the back of its queue, so a ping-pong pair cannot starve the rest.
pub(super) const LIFO_CAP: u8 = 3;

/// What [`LifoSlot::pop`] found.
pub(super) enum Pop<T> {
    /// Nothing in the slot.
    Empty,
    /// Run this next.
    Run(T),
    /// `LIFO_CAP` runs in a row came from the slot: queue this at the back instead.
    Capped(T),
}

/// One item to run next, and how many runs in a row came from here.
pub(super) struct LifoSlot<T> {
    slot: Cell<Option<T>>,
    runs: Cell<u8>,
}

impl<T> LifoSlot<T> {
    pub(super) const fn new() -> LifoSlot<T> {
        LifoSlot { slot: Cell::new(None), runs: Cell::new(0) }
    }

    /// Puts `item` in the slot; returns the previous occupant, which the caller queues at the
    /// back of its queue.
    #[inline]
    pub(super) fn put(&self, item: T) -> Option<T> {
        self.slot.replace(Some(item))
    }

    /// Whether the slot is full (on the switch path: a read, no store).
    #[inline]
    pub(super) fn is_full(&self) -> bool {
        // SAFETY: the slot is owner-only (module doc) and no reference into it is alive
        // (`Cell` hands out none): reading its discriminant in place is a plain read of an
        // initialised value.
        unsafe { (*self.slot.as_ptr()).is_some() }
    }

    /// The next item to run from the slot, unless the cap was reached.
    #[inline]
    pub(super) fn pop(&self) -> Pop<T> {
        if self.is_full() {
            return self.pop_full();
        }
        if self.runs.get() != 0 {
            self.runs.set(0);
        }
        Pop::Empty
    }

    /// The full-slot half of [`pop`](Self::pop): out of line, so that `pop` stays small
    /// enough to inline into the switch paths.
    #[inline(never)]
    fn pop_full(&self) -> Pop<T> {
        let Some(item) = self.slot.take() else { return Pop::Empty };
        let runs = self.runs.get();
        if runs < LIFO_CAP {
            self.runs.set(runs + 1);
            Pop::Run(item)
        } else {
            self.runs.set(0);
            Pop::Capped(item)
        }
    }

    /// Empties the slot without counting a run (shutdown).
    pub(super) fn take(&self) -> Option<T> {
        self.slot.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_after_three_runs_in_a_row_and_reset_when_empty() {
        let slot = LifoSlot::new();
        for round in 0..2 {
            for i in 0..LIFO_CAP {
                assert!(slot.put(i).is_none());
                assert!(matches!(slot.pop(), Pop::Run(x) if x == i), "round {round}: run {i}");
            }
            slot.put(9);
            assert!(matches!(slot.pop(), Pop::Capped(9)));
            assert!(matches!(slot.pop(), Pop::Empty));
        }
        slot.put(1);
        assert_eq!(slot.put(2), Some(1), "the displaced occupant comes back");
        assert!(matches!(slot.pop(), Pop::Run(2)));
        assert!(matches!(slot.pop(), Pop::Empty));
        slot.put(3);
        assert!(matches!(slot.pop(), Pop::Run(3)), "an empty slot reset the count");
    }
}
