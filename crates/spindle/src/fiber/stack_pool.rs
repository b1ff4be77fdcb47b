//! The per-worker stack pool: free stacks kept for reuse, chunks mapped on a miss, pages and
//! address space given back in batches. The invariants (a chunk is unmapped whole, chunks are
//! mapped only on a miss, free stacks keep their address space but not their pages beyond
//! `keep_warm`, a single owner thread) are in the doc of module `stack`, whose types this
//! module manages.

use std::io;
use std::sync::Arc;

use super::stack::{release_pages, Chunk, Stack};

/// A LIFO cache of free stacks of one worker, and the chunks they are carved from.
#[derive(Debug)]
pub(crate) struct StackPool {
    /// The most recently released stack, above all of `free` in LIFO order: a fiber that
    /// finishes and a spawn that follows (the common rhythm) hand it over with a move and a
    /// comparison, without searching `free` (see `put` and `get`). Counted in `cached`.
    hot: Option<Stack>,
    /// Free stacks by size; most recently released last. Few sizes are in use at once, so a
    /// small vector beats a map.
    free: Vec<(usize, Vec<Stack>)>,
    cached: usize,
    /// Above this many free stacks, an idle worker unmaps chunks that are entirely free.
    max_cached: usize,
    /// How many of the most recently released stacks of each size keep their pages.
    keep_warm: usize,
    /// Stacks released since the last idle trim (a trim has nothing to do when this is zero).
    released_since_trim: usize,
    /// Stacks released since pages were last given back (see `RELEASE_BATCH`).
    released_since_release: usize,
    /// How many top pages the next miss pre-faults: doubles on each miss up to
    /// [`CHUNK_SLOTS`], back to one when a stack is released, so a burst of fiber starts
    /// finds its pages ready and a lone start pre-faults nothing (`map_chunk` skips a batch of
    /// one: its page faults in on first use, one trap either way).
    batch: usize,
}

/// Stacks per chunk (fewer for large stacks, see [`CHUNK_BYTES`]). Untouched stacks cost
/// address space, not memory.
const CHUNK_SLOTS: usize = 64;

/// Most address space in one chunk: large stacks are mapped fewer at a time.
const CHUNK_BYTES: usize = 16 << 20;

/// Released stacks beyond `max(max_cached, keep_warm)` that may keep their pages before a busy
/// pool gives pages back in one batch, without waiting for the worker to go idle.
const RELEASE_BATCH: usize = 1024;

impl StackPool {
    pub(crate) fn new(max_cached: usize, keep_warm: usize) -> StackPool {
        StackPool {
            hot: None,
            free: Vec::new(),
            cached: 0,
            max_cached,
            keep_warm,
            released_since_trim: 0,
            released_since_release: 0,
            batch: 1,
        }
    }

    /// A stack of `len` bytes: the warmest free one, or one of a newly mapped chunk.
    #[inline]
    pub(crate) fn get(&mut self, len: usize) -> io::Result<Stack> {
        if self.hot.as_ref().is_some_and(|s| s.len() == len) {
            self.cached -= 1;
            return Ok(self.hot.take().expect("checked above"));
        }
        self.get_listed(len)
    }

    /// [`get`](Self::get) when the hot stack is not one of `len` bytes.
    #[inline(never)]
    fn get_listed(&mut self, len: usize) -> io::Result<Stack> {
        if let Some((_, list)) = self.free.iter_mut().find(|(size, _)| *size == len) {
            if let Some(stack) = list.pop() {
                self.cached -= 1;
                return Ok(stack);
            }
        }
        // A miss: every stack of this size is in use. Map a chunk, hand out one stack and
        // keep the others (highest address on top of the LIFO, next to the one handed out).
        let count = (CHUNK_BYTES / len).clamp(1, CHUNK_SLOTS);
        let prefault = self.batch.min(count);
        self.batch = (self.batch * 2).min(CHUNK_SLOTS);
        let mut stacks = match Stack::map_chunk(len, count, prefault) {
            Ok(stacks) => stacks,
            // Strict overcommit accounting may refuse a large chunk that a single stack fits.
            Err(_) if count > 1 => Stack::map_chunk(len, 1, 1)?,
            Err(e) => return Err(e),
        };
        let stack = stacks.pop().expect("map_chunk returns the stacks it was asked for");
        if !stacks.is_empty() {
            self.cached += stacks.len();
            match self.free.iter_mut().find(|(size, _)| *size == len) {
                Some((_, list)) => list.extend(stacks),
                None => self.free.push((len, stacks)),
            }
        }
        Ok(stack)
    }

    /// Returns a free stack to the pool: no system call, except that once more than
    /// `max(max_cached, keep_warm) + RELEASE_BATCH` stacks were released since pages were last
    /// given back, the pages of the stacks beyond `keep_warm` are given back in one batch. A
    /// burst that fits in `max_cached` (the warm case: the same fibers spawned again and again)
    /// keeps its pages until the worker idles, so the next burst does not fault them in again.
    #[inline]
    pub(crate) fn put(&mut self, stack: Stack) {
        stack.dirty.set(true);
        self.batch = 1;
        self.cached += 1;
        self.released_since_trim += 1;
        self.released_since_release += 1;
        // The new stack is the warmest: it becomes the hot one, and the previous hot one goes
        // on top of its list (LIFO order is kept: hot, then each list from its end).
        if let Some(previous) = self.hot.replace(stack) {
            self.list(previous);
        }
        if self.released_since_release > self.max_cached.max(self.keep_warm) + RELEASE_BATCH {
            self.release_cold_pages();
        }
    }

    /// Moves the hot stack, if any, on top of its list: before anything walks the lists.
    fn settle(&mut self) {
        if let Some(stack) = self.hot.take() {
            self.list(stack);
        }
    }

    /// Puts a free stack (counted in `cached` already) on top of the list of its size.
    #[inline(never)]
    fn list(&mut self, stack: Stack) {
        let len = stack.len();
        match self.free.iter_mut().find(|(size, _)| *size == len) {
            Some((_, list)) => list.push(stack),
            None => self.free.push((len, vec![stack])),
        }
    }

    /// Whether stacks were released since the last trim.
    pub(crate) fn needs_trim(&self) -> bool {
        self.released_since_trim > 0
    }

    /// For an idle worker: unmaps chunks that are entirely free while more than `max_cached`
    /// stacks are free, then gives the pages of all but the `keep_warm` most recently released
    /// stacks of each size back to the kernel. Cheap when nothing was released since.
    pub(crate) fn trim(&mut self) {
        if self.released_since_trim == 0 {
            return;
        }
        self.released_since_trim = 0;
        self.settle();
        if self.cached > self.max_cached {
            self.unmap_free_chunks();
        }
        self.release_cold_pages();
    }

    /// Gives back the pages of the free stacks beyond the `keep_warm` most recent of each size
    /// (batched; the mappings stay).
    fn release_cold_pages(&mut self) {
        self.released_since_release = 0;
        self.settle();
        let mut cold: Vec<&mut Stack> = Vec::new();
        for (_, list) in &mut self.free {
            let n = list.len().saturating_sub(self.keep_warm);
            // Walk down from the most recent cold stack: below the first clean one, every
            // stack was released before (the LIFO keeps release order).
            cold.extend(list[..n].iter_mut().rev().take_while(|s| s.dirty.get()));
        }
        release_pages(&mut cold);
    }

    /// Unmaps chunks all of whose stacks are free in this pool, coldest first, until at most
    /// `max_cached` stacks are free. A chunk with a stack in use (or free in another worker's
    /// pool) stays whole.
    fn unmap_free_chunks(&mut self) {
        use std::collections::HashMap;
        for (_, list) in &mut self.free {
            // Stacks of each chunk in this list; a chunk is entirely free here when that count
            // equals its reference count (one per stack in existence).
            let mut here: HashMap<*const Chunk, usize> = HashMap::new();
            for stack in list.iter() {
                *here.entry(Arc::as_ptr(&stack.chunk)).or_default() += 1;
            }
            let mut doomed: HashMap<*const Chunk, ()> = HashMap::new();
            let mut excess = self.cached.saturating_sub(self.max_cached);
            for stack in list.iter() {
                if excess == 0 {
                    break;
                }
                let key = Arc::as_ptr(&stack.chunk);
                let count = here[&key];
                if count == Arc::strong_count(&stack.chunk) && !doomed.contains_key(&key) {
                    doomed.insert(key, ());
                    excess = excess.saturating_sub(count);
                }
            }
            if !doomed.is_empty() {
                let before = list.len();
                list.retain(|s| !doomed.contains_key(&Arc::as_ptr(&s.chunk)));
                self.cached -= before - list.len();
            }
        }
    }

    /// Number of cached stacks.
    #[cfg(test)]
    pub(crate) fn cached(&self) -> usize {
        self.cached
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_is_lifo() {
        let mut pool = StackPool::new(2, 1);
        let a = pool.get(64 * 1024).unwrap();
        let b = pool.get(64 * 1024).unwrap();
        let (a_top, b_top) = (a.top(), b.top());
        let spares = pool.cached();
        pool.put(a);
        pool.put(b);
        assert_eq!(pool.cached(), spares + 2, "a release keeps the stack, whatever the cap");
        assert_eq!(pool.get(64 * 1024).unwrap().top(), b_top, "most recent first");
        assert_eq!(pool.get(64 * 1024).unwrap().top(), a_top);
    }

    #[test]
    fn the_hot_stack_keeps_lifo_order_across_sizes_and_counts_as_cached() {
        let (small, large) = (32 * 1024, 64 * 1024);
        let mut pool = StackPool::new(1000, 1000);
        let a = pool.get(small).unwrap();
        let b = pool.get(large).unwrap();
        let c = pool.get(small).unwrap();
        let (a_top, b_top, c_top) = (a.top(), b.top(), c.top());
        let cached = pool.cached();
        pool.put(a);
        pool.put(b); // hot now: `a` goes on top of the small list
        pool.put(c); // hot now: `b` goes on top of the large list
        assert_eq!(pool.cached(), cached + 3, "the hot stack counts as cached");
        assert_eq!(pool.get(large).unwrap().top(), b_top, "a size the hot stack is not");
        assert_eq!(pool.get(small).unwrap().top(), c_top, "the hot stack, most recent");
        assert_eq!(pool.get(small).unwrap().top(), a_top);
        assert_eq!(pool.cached(), cached);
    }

    #[test]
    fn a_chunk_is_unmapped_whole_and_only_when_all_its_stacks_are_free() {
        let len = 64 * 1024;
        let per_chunk = (CHUNK_BYTES / len).clamp(1, CHUNK_SLOTS);
        let mut pool = StackPool::new(0, 0);
        let held = pool.get(len).unwrap();
        // Every stack of the chunk but `held` is now free in the pool.
        assert_eq!(pool.cached(), per_chunk - 1);
        pool.trim();
        assert_eq!(pool.cached(), per_chunk - 1, "a chunk with a stack in use stays whole");
        // SAFETY: `held` is mapped; its top word is writable.
        unsafe { held.top().wrapping_sub(8).write(1) };
        pool.put(held);
        pool.trim();
        assert_eq!(pool.cached(), 0, "a chunk whose stacks are all free goes when over the cap");
    }

    #[test]
    fn a_burst_of_misses_maps_chunks_of_distinct_usable_stacks() {
        let len = 32 * 1024;
        let mut pool = StackPool::new(1000, 0);
        let stacks: Vec<Stack> = (0..100).map(|_| pool.get(len).unwrap()).collect();
        // Chunks were mapped (64 stacks per miss): the pool holds the spares.
        assert!(pool.cached() > 0, "batched mapping leaves spare stacks in the pool");
        let mut ranges: Vec<(usize, usize)> =
            stacks.iter().map(|s| (s.guard().0, s.top() as usize)).collect();
        ranges.sort();
        assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0), "stacks never overlap");
        for stack in &stacks {
            assert_eq!(stack.len(), len);
            let usable = stack.top() as usize - stack.bottom() as usize;
            // SAFETY: [bottom, top) is the usable, writable part of a stack we own.
            let bytes = unsafe { std::slice::from_raw_parts_mut(stack.bottom(), usable) };
            bytes.fill(0x5A);
            assert!(bytes.iter().all(|&b| b == 0x5A));
        }
        // Dropping stacks never unmaps part of a chunk: the others stay usable.
        let mut stacks = stacks;
        let last = stacks.pop().unwrap();
        drop(stacks);
        // SAFETY: `last` is still mapped; its top word is writable.
        unsafe { last.top().wrapping_sub(8).write(1) };
        for _ in 0..pool.cached() {
            let spare = pool.get(len).unwrap();
            // SAFETY: as above, for a spare stack that was never handed out before.
            unsafe { spare.top().wrapping_sub(8).write(2) };
        }
    }

    #[test]
    fn trimmed_stacks_read_back_zero_and_stay_usable() {
        // A cap above the chunk's 64 stacks: the trim releases pages but unmaps no chunk, so
        // the same stack comes back (LIFO) at the same address. (With a cap of 8 the chunk was
        // unmapped, and the test read its old address: it passed only when the next mapping
        // landed in the same place, and crashed when a concurrent test mapped there first.)
        let mut pool = StackPool::new(1000, 0);
        let stack = pool.get(32 * 1024).unwrap();
        let top = stack.top();
        let word = top.wrapping_sub(64);
        // SAFETY: `word` is inside the usable part of a stack we own.
        unsafe { word.write(7) };
        pool.put(stack);
        pool.trim();
        let stack = pool.get(32 * 1024).unwrap();
        assert_eq!(stack.top(), top, "the pool is LIFO and the chunk stayed mapped");
        assert!(!stack.dirty.get());
        // SAFETY: `word` is inside the usable part of `stack`, which we own again; after
        // MADV_DONTNEED the page reads back as zero.
        assert_eq!(unsafe { word.read() }, 0);
        // SAFETY: as above: still writable.
        unsafe { word.write(9) };
    }
}
