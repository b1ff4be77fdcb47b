//! The registry of a worker's started, unfinished fibers that have switched away: a slab, so
//! that insertion and removal are O(1) and a fiber remembers its slot (`Header::slot`).
//!
//! Owned by one worker and touched only from its thread. It lets shutdown and the fiber dump
//! find the started fibers, parked ones included.
//!
//! # Invariants
//!
//! - **Registered once it has switched away.** A fiber is entered before its first switch
//!   away that does not finish it (a park or a yield that switches; `Worker::register`), and
//!   removed when it is recycled. Everything that reads the registry (shutdown's
//!   `cancel_all`, `Worker::drop`, the dump's task) runs on the worker's thread in its
//!   scheduler context, where no fiber is running, and a started fiber that is not running
//!   has switched away (it is parked or queued again) or has finished (and is recycled by the
//!   next context, before anything else runs): so every started, unfinished fiber is there,
//!   parked ones included, as when fibers were entered at their first run. A fiber that runs
//!   to its end without switching away costs no entry (no insertion, no removal).
//! - **Entries borrow the run reference.** An entry is a plain pointer, not a counted
//!   reference: it borrows the fiber's *run reference* (module `sched::worker`, "a started
//!   fiber owns itself"), which is released only when the fiber is recycled, and recycling
//!   removes the entry first. So every pointer in the registry is to a live cell.

/// A registered fiber: a pointer to its cell (see "entries borrow the run reference").
pub(crate) use crate::fiber::block::FiberPtr;

#[derive(Default)]
pub(crate) struct Registry {
    slots: Vec<Option<FiberPtr>>,
    free: Vec<usize>,
    len: usize,
}

impl Registry {
    /// Stores a fiber and returns its slot.
    pub(crate) fn insert(&mut self, fiber: FiberPtr) -> usize {
        self.len += 1;
        match self.free.pop() {
            Some(slot) => {
                debug_assert!(self.slots[slot].is_none());
                self.slots[slot] = Some(fiber);
                slot
            }
            None => {
                self.slots.push(Some(fiber));
                self.slots.len() - 1
            }
        }
    }

    /// Forgets the fiber in `slot`.
    pub(crate) fn remove(&mut self, slot: usize) -> Option<FiberPtr> {
        let fiber = self.slots.get_mut(slot)?.take()?;
        self.free.push(slot);
        self.len -= 1;
        Some(fiber)
    }

    /// The registered fibers, valid until the next fiber is recycled.
    pub(crate) fn iter(&self) -> impl Iterator<Item = FiberPtr> + '_ {
        self.slots.iter().flatten().copied()
    }

    /// Number of started, unfinished fibers.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}
