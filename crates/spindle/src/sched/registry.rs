//! The registry of a worker's started, unfinished fibers: a slab, so that insertion and
//! removal are O(1) and a fiber remembers its slot (`Header::slot`).
//!
//! Owned by one worker and touched only from its thread. It keeps parked fibers alive (no one
//! else may hold them) and lets shutdown find them to cancel them.

use crate::fiber::control::FiberRef;

#[derive(Default)]
pub(crate) struct Registry {
    slots: Vec<Option<FiberRef>>,
    free: Vec<usize>,
    len: usize,
}

impl Registry {
    /// Stores a fiber and returns its slot.
    pub(crate) fn insert(&mut self, fiber: FiberRef) -> usize {
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

    /// Drops the fiber in `slot`.
    pub(crate) fn remove(&mut self, slot: usize) -> Option<FiberRef> {
        let fiber = self.slots.get_mut(slot)?.take()?;
        self.free.push(slot);
        self.len -= 1;
        Some(fiber)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &FiberRef> {
        self.slots.iter().flatten()
    }

    /// Number of started, unfinished fibers.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}
