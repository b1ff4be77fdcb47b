//! The per-worker stack pool: free stacks kept for reuse, chunks mapped on a miss, pages and
//! address space given back in batches. The invariants (a chunk is unmapped whole, chunks are
//! mapped only on a miss, free stacks keep their address space but not their pages beyond
//! `keep_warm`, a single owner thread) are in the doc of module `stack`, whose types this
//! module manages.

use std::cell::Cell;
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
    free: Vec<SizeList>,
    cached: usize,
    /// Above this many free stacks, an idle worker unmaps chunks that are entirely free.
    max_cached: usize,
    /// How many of the most recently released stacks of each size keep their pages.
    keep_warm: usize,
    /// Stacks released since the last idle trim (a trim has nothing to do when this is zero).
    released_since_trim: usize,
    /// Stacks released since the busy pool last looked for cold stacks (see `RELEASE_BATCH`).
    released_since_release: usize,
    /// How many top pages the next miss pre-faults: doubles on each miss up to
    /// [`CHUNK_SLOTS`], back to one when a stack is released, so a burst of fiber starts
    /// finds its pages ready and a lone start pre-faults nothing (`map_chunk` skips a batch of
    /// one: its page faults in on first use, one trap either way).
    batch: usize,
}

/// The free stacks of one size, and how deep the window since the last look for cold
/// stacks has reached into them.
#[derive(Debug)]
struct SizeList {
    len: usize,
    /// Most recently released last.
    stacks: Vec<Stack>,
    /// The fewest stacks this list held since the busy pool last looked for cold stacks: the
    /// `low` stacks at its bottom were not taken in that window (only the top of a LIFO
    /// moves), so they are the cold ones.
    low: usize,
}

impl SizeList {
    fn new(len: usize, stacks: Vec<Stack>) -> SizeList {
        let low = stacks.len();
        SizeList { len, stacks, low }
    }

    /// Takes the most recently released stack, lowering the window's mark.
    #[inline]
    fn pop(&mut self) -> Option<Stack> {
        let stack = self.stacks.pop()?;
        self.low = self.low.min(self.stacks.len());
        Some(stack)
    }
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

    /// [`get`](Self::get) into `into`, which must be empty: the hot stack moves there in one
    /// exchange, without a temporary (see [`put_from`](Self::put_from)).
    #[inline]
    pub(crate) fn get_into(&mut self, len: usize, into: &Cell<Option<Stack>>) -> io::Result<()> {
        // SAFETY: `Cell` hands out no references, and none into `into` is alive: reading its
        // discriminant in place is a plain read of an initialised value.
        debug_assert!(unsafe { (*into.as_ptr()).is_none() }, "get_into an occupied cell");
        if self.hot.as_ref().is_some_and(|s| s.len() == len) {
            self.cached -= 1;
            // SAFETY: distinct places (the pool's own field and a caller's cell, which `&mut
            // self` cannot alias), each holding a valid value; `into` was empty, so the hot
            // slot is empty afterwards.
            unsafe { std::ptr::swap_nonoverlapping(into.as_ptr(), &mut self.hot, 1) };
            return Ok(());
        }
        into.set(Some(self.get_listed(len)?));
        Ok(())
    }

    /// [`get`](Self::get) when the hot stack is not one of `len` bytes.
    #[inline(never)]
    fn get_listed(&mut self, len: usize) -> io::Result<Stack> {
        if let Some(list) = self.free.iter_mut().find(|l| l.len == len) {
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
            match self.free.iter_mut().find(|l| l.len == len) {
                Some(list) => list.stacks.extend(stacks),
                None => self.free.push(SizeList::new(len, stacks)),
            }
        }
        Ok(stack)
    }

    /// [`put_from`](Self::put_from) for a stack held by value (tests).
    #[cfg(test)]
    pub(crate) fn put(&mut self, stack: Stack) {
        self.put_from(&Cell::new(Some(stack)));
    }

    /// Returns the stack held in `from` (a finished fiber's header), if any, to the pool,
    /// leaving `from` empty: no system call, except that once more than
    /// `max(max_cached, keep_warm) + RELEASE_BATCH` stacks were released since the pool last
    /// looked, the pages of the stacks that stayed free all that while (beyond `keep_warm`)
    /// are given back in one batch ([`release_unused_pages`](Self::release_unused_pages)). A
    /// busy worker that spawns the same burst again and again (the fibers suite's warm case)
    /// keeps the pages of the stacks it cycles through, whatever their number.
    ///
    /// The stack moves from `from` into the hot slot in one exchange: taken out and put back,
    /// it was copied through a temporary with mismatched widths, and the reloads waited for
    /// the stores they only partly overlapped (store-to-load forwarding fails then), on every
    /// fiber.
    #[inline]
    pub(crate) fn put_from(&mut self, from: &Cell<Option<Stack>>) {
        // SAFETY: `Cell` hands out no references, and none into `from` is alive: reading its
        // discriminant in place is a plain read of an initialised value.
        if unsafe { (*from.as_ptr()).is_none() } {
            return;
        }
        // The new stack is the warmest: it becomes the hot one, and the previous hot one goes
        // on top of its list (LIFO order is kept: hot, then each list from its end).
        // SAFETY: `from` and `self.hot` are distinct places (the pool's own field and a
        // caller's cell, which `&mut self` cannot alias), each holding a valid value.
        unsafe { std::ptr::swap_nonoverlapping(from.as_ptr(), &mut self.hot, 1) };
        // SAFETY: as above; `from` now holds the previous hot stack, if any.
        if unsafe { (*from.as_ptr()).is_some() } {
            self.list(from.take().expect("checked above"));
        }
        let stack = self.hot.as_ref().expect("swapped in above");
        stack.dirty.set(true);
        self.batch = 1;
        self.cached += 1;
        self.released_since_trim += 1;
        self.released_since_release += 1;
        if self.released_since_release > self.max_cached.max(self.keep_warm) + RELEASE_BATCH {
            self.release_unused_pages();
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
        match self.free.iter_mut().find(|l| l.len == len) {
            Some(list) => list.stacks.push(stack),
            None => self.free.push(SizeList::new(len, vec![stack])),
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

    /// For an idle worker: gives back the pages of the free stacks beyond the `keep_warm` most
    /// recent of each size (batched; the mappings stay).
    fn release_cold_pages(&mut self) {
        self.release_pages_below(|list| list.stacks.len());
    }

    /// For a busy worker: gives back the pages of the free stacks that no fiber took since the
    /// last look (the bottom `low` of each list), beyond the `keep_warm` most recent. Giving
    /// back every free stack's pages instead made a worker that runs the same 10,000 fibers
    /// again and again fault all their pages in again once per `max_cached + RELEASE_BATCH`
    /// releases, several times the cost of a warm round in the rounds after such a look
    /// (`docs/perf/stacks.md`, "Releasing stacks"). Out of line: it runs once per batch of
    /// releases, and inlined it would cost every recycle of a fiber its register saves.
    #[inline(never)]
    fn release_unused_pages(&mut self) {
        self.release_pages_below(|list| list.low);
    }

    /// Gives back the pages of the stacks of each list below `bound(list)` and below its
    /// `keep_warm` most recent, then starts a new window (every list's `low` is its length).
    fn release_pages_below(&mut self, bound: impl Fn(&SizeList) -> usize) {
        self.released_since_release = 0;
        self.settle();
        let mut cold: Vec<&mut Stack> = Vec::new();
        for list in &mut self.free {
            let n = list.stacks.len().saturating_sub(self.keep_warm).min(bound(list));
            list.low = list.stacks.len();
            // Walk down from the most recent cold stack: below the first clean one, every
            // stack was released before (the LIFO keeps release order).
            cold.extend(list.stacks[..n].iter_mut().rev().take_while(|s| s.dirty.get()));
        }
        release_pages(&mut cold);
    }

    /// Unmaps chunks all of whose stacks are free in this pool, coldest first, until at most
    /// `max_cached` stacks are free. A chunk with a stack in use (or free in another worker's
    /// pool) stays whole.
    fn unmap_free_chunks(&mut self) {
        use std::collections::HashMap;
        for SizeList { stacks: list, low, .. } in &mut self.free {
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
                // The stacks moved down: the window's mark no longer counts the same ones.
                // None is known untaken now (a look for unused stacks gives back nothing).
                *low = 0;
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
    fn stacks_move_between_the_hot_slot_and_a_fibers_cell_in_place() {
        let (small, large) = (32 * 1024, 64 * 1024);
        let mut pool = StackPool::new(1000, 1000);
        let (a, b) = (pool.get(small).unwrap(), pool.get(large).unwrap());
        let (a_top, b_top) = (a.top(), b.top());
        let cached = pool.cached();
        let cell = Cell::new(Some(a));
        pool.put_from(&cell);
        assert!(cell.take().is_none(), "put_from empties the cell");
        pool.put_from(&cell);
        assert_eq!(pool.cached(), cached + 1, "an empty cell returns nothing");
        pool.put(b); // hot now: `a` goes on top of the small list
        pool.get_into(small, &cell).unwrap();
        assert_eq!(
            cell.take().map(|s| s.top()),
            Some(a_top),
            "from the list when the hot one is another size"
        );
        pool.get_into(large, &cell).unwrap();
        let b = cell.take().expect("the hot stack moved into the cell");
        assert_eq!(b.top(), b_top);
        assert_eq!(pool.cached(), cached, "both handed out");
        pool.put_from(&Cell::new(Some(b)));
        pool.get_into(large, &cell).unwrap();
        assert_eq!(cell.take().map(|s| s.top()), Some(b_top), "the hot slot again");
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

    /// Writes `value` into the top page of `stack`.
    fn mark(stack: &Stack, value: u64) {
        // SAFETY: 64 bytes below the top is inside the usable part of a stack we own.
        unsafe { stack.top().wrapping_sub(64).cast::<u64>().write(value) }
    }

    /// Reads what [`mark`] wrote (0 once the page was given back).
    fn marked(stack: &Stack) -> u64 {
        // SAFETY: as in `mark`.
        unsafe { stack.top().wrapping_sub(64).cast::<u64>().read() }
    }

    #[test]
    fn a_busy_pool_keeps_the_pages_of_the_stacks_it_cycles_through() {
        // No cap and nothing kept warm: a busy pool looks for cold stacks every 1,025
        // releases. 200 fibers' stacks taken and released 12 times is 2,400 releases; each
        // look finds all 200 taken since the last one, so none loses its pages. (Before, each
        // look gave back the pages of every free stack, and the round after faulted them all
        // in again: the marks read back 0.)
        let len = 32 * 1024;
        let mut pool = StackPool::new(0, 0);
        for round in 0..12u64 {
            let stacks: Vec<Stack> = (0..200).map(|_| pool.get(len).unwrap()).collect();
            for stack in &stacks {
                if round > 0 {
                    assert!(stack.dirty.get(), "round {round}: a stack in use lost its pages");
                    assert_eq!(marked(stack), round, "round {round}: the page was zeroed");
                }
                mark(stack, round + 1);
            }
            stacks.into_iter().for_each(|s| pool.put(s));
        }
    }

    #[test]
    fn a_busy_pool_gives_back_the_pages_of_stacks_nobody_took_for_a_window() {
        let len = 32 * 1024;
        let mut pool = StackPool::new(0, 2);
        let stacks: Vec<Stack> = (0..300).map(|_| pool.get(len).unwrap()).collect();
        stacks.iter().for_each(|s| mark(s, 7));
        stacks.into_iter().for_each(|s| pool.put(s));
        // One fiber at a time from now on: the same (hot) stack each time, the others stay
        // free. The first look (release 1,025) finds them all taken in its window; the second
        // (2,050) finds them untaken since the first, and gives their pages back.
        for _ in 0..2_100 {
            let stack = pool.get(len).unwrap();
            mark(&stack, 9);
            pool.put(stack);
        }
        let hot = pool.get(len).unwrap();
        assert_eq!(marked(&hot), 9, "the stack in use keeps its page");
        let rest: Vec<Stack> = (0..299).map(|_| pool.get(len).unwrap()).collect();
        // The two most recently released stacks were the cycled one and the last of the 300.
        let kept = rest.iter().filter(|s| s.dirty.get()).count();
        assert_eq!(kept, 1, "only the keep_warm most recent free stacks keep their pages");
        assert_eq!(marked(&rest[0]), 7);
        for stack in &rest[1..] {
            assert_eq!(marked(stack), 0, "a stack unused for a window gave its page back");
        }
        rest.into_iter().chain([hot]).for_each(|s| pool.put(s));
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
