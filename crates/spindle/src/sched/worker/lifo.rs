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

    /// The item to run next from the slot: `None` when the slot is empty, or when `LIFO_CAP`
    /// runs in a row came from it, in which case its occupant is handed to `requeue` (the
    /// back of its queue) instead.
    #[inline]
    pub(super) fn pop(&self, requeue: impl FnOnce(T)) -> Option<T> {
        if self.is_full() {
            return self.pop_full(requeue);
        }
        self.note_empty();
        None
    }

    /// [`pop`](Self::pop) with the full-slot half out of line, so that a caller on the fiber
    /// switch path (`pop_runnable`) stays small enough to inline there.
    #[inline]
    pub(super) fn pop_outlined(&self, requeue: impl FnOnce(T)) -> Option<T> {
        if self.is_full() {
            return self.pop_full_outlined(requeue);
        }
        self.note_empty();
        None
    }

    #[inline]
    fn note_empty(&self) {
        if self.runs.get() != 0 {
            self.runs.set(0);
        }
    }

    #[inline(never)]
    fn pop_full_outlined(&self, requeue: impl FnOnce(T)) -> Option<T> {
        self.pop_full(requeue)
    }

    #[inline]
    fn pop_full(&self, requeue: impl FnOnce(T)) -> Option<T> {
        let item = self.slot.take()?;
        let runs = self.runs.get();
        if runs < LIFO_CAP {
            self.runs.set(runs + 1);
            return Some(item);
        }
        self.runs.set(0);
        requeue(item);
        None
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
        let mut requeued = Vec::new();
        for round in 0..2 {
            for i in 0..LIFO_CAP {
                assert!(slot.put(i).is_none());
                assert_eq!(slot.pop(|x| requeued.push(x)), Some(i), "round {round}: run {i}");
            }
            slot.put(9);
            assert_eq!(slot.pop(|x| requeued.push(x)), None, "capped");
            assert_eq!(requeued.pop(), Some(9), "the capped occupant goes back to its queue");
            assert_eq!(slot.pop(|x| requeued.push(x)), None);
        }
        slot.put(1);
        assert_eq!(slot.put(2), Some(1), "the displaced occupant comes back");
        assert_eq!(slot.pop_outlined(|x| requeued.push(x)), Some(2));
        assert_eq!(slot.pop(|x| requeued.push(x)), None, "empty: the count resets");
        for i in 0..LIFO_CAP {
            slot.put(i);
            assert_eq!(slot.pop(|x| requeued.push(x)), Some(i), "a fresh run of {LIFO_CAP}");
        }
        assert!(requeued.is_empty());
    }
}
