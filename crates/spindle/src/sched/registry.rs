//! The registry of a worker's started, unfinished fibers: a slab, so that insertion and
//! removal are O(1) and a fiber remembers its slot (`Header::slot`).
//!
//! Owned by one worker and touched only from its thread. It lets shutdown and the fiber dump
//! find the started fibers, parked ones included.
//!
//! # Invariants
//!
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
