//! A per-thread cache of freed control blocks' memory, by class (module `fiber::block`), so
//! that a spawn after a fiber's end reuses a block without a trip through the allocator.
//!
//! glibc's malloc and free are a large share of a spawn's cost, and larger when thousands
//! of fibers are alive: a block of ~450 bytes is too large for glibc's thread cache, so each
//! one goes through the allocator's bins, whose lists live in the freed chunks themselves
//! (a cache miss per block once they are out of cache). A cache of 64 blocks a layout sent
//! most of the fibers suite's warm case (10 rounds of 10,000 fibers) through them
//! (`docs/perf/stacks.md`, "The control block cache").
//!
//! Blocks are filed by **class**, not by exact layout: a block's size rounded up to a cache
//! line (`CLASS_BYTES`), its alignment kept. Closures of different types and near sizes
//! then share blocks: a burst of one kind of fiber leaves blocks that the next burst of
//! another kind takes, where exact layouts sent the second burst to the allocator's fresh
//! heap (a page fault per ~9 blocks) while the first burst's blocks sat in the cache
//! (`docs/perf/stacks.md`, "The control block cache"). The cost is the rounding, at most 63
//! bytes a block, and a few instructions a spawn where the freed cell's layout is read from
//! its vtable.
//!
//! # Invariants
//!
//! - **Only plain memory of its class.** Every block of at most `CACHE_MAX_BLOCK` bytes is
//!   allocated and freed with its class's layout ([`class`]: `take`, `put` and the cache's
//!   own frees all use it, so the allocator always gets back the layout it gave). The cache
//!   holds only such memory (the cell dropped in place before), filed under its class, hands
//!   a block out only for a layout of that class, and keeps none larger than
//!   `CACHE_MAX_BLOCK` bytes.
//! - **Bounded, and smaller once idle.** A worker thread's cache keeps up to `WORKER_BYTES`
//!   of blocks (a burst's worth: ~18,000 blocks of 450 bytes) and is trimmed to
//!   `IDLE_KEEP` blocks a class when its worker idles ([`trim`], called where the worker
//!   trims its stack pool); any other thread's keeps up to `OTHER_BYTES`, as nothing trims
//!   it. Beyond `CACHE_LAYOUTS` classes, and when its thread exits, blocks go back to the
//!   allocator. The one hot block (the last freed) is outside these counts.
//! - **Never borrowed twice.** No user code runs while the cache is borrowed (a cell's drop
//!   runs before its memory comes here), and a borrow that fails (a thread-local being
//!   destroyed) falls back to the allocator.

use std::alloc::Layout;
use std::cell::RefCell;
use std::ptr::NonNull;

/// Larger blocks (a closure that captures a large array) go to and come from the allocator:
/// the cache would hold too much memory, and malloc's share of their cost is small.
pub(super) const CACHE_MAX_BLOCK: usize = 1024;
/// Most classes a thread keeps blocks of (few closure types are spawned in a loop).
const CACHE_LAYOUTS: usize = 8;
/// A class's size step: a cache line.
const CLASS_BYTES: usize = 64;
const _: () = assert!(CACHE_MAX_BLOCK.is_multiple_of(CLASS_BYTES), "a class never passes the cap");
/// Bytes of filed blocks a worker thread keeps while busy.
const WORKER_BYTES: usize = 8 << 20;
/// Bytes of filed blocks any other thread keeps (the budget of 64 blocks of 1 KiB in each
/// of 8 layouts that every thread had before).
const OTHER_BYTES: usize = 512 << 10;
/// Blocks a class keeps after [`trim`].
const IDLE_KEEP: usize = 64;

/// Freed blocks of one thread, by class.
struct Cache {
    /// The block freed last: the next spawn of a closure type of its class takes it back without
    /// searching `classes` (a fiber's end then a spawn is the common rhythm).
    hot: Option<(Layout, NonNull<u8>)>,
    classes: Vec<(Layout, Vec<NonNull<u8>>)>,
    /// Bytes of the blocks in `classes`.
    bytes: usize,
    /// `WORKER_BYTES` on a worker's thread (which trims it), else `OTHER_BYTES`.
    budget: usize,
}

impl Cache {
    /// Files a block in `classes`, or frees it when the budget or the layouts are used up.
    fn file(&mut self, block: NonNull<u8>, layout: Layout) {
        if self.bytes + layout.size() <= self.budget {
            if let Some((_, list)) = self.classes.iter_mut().find(|(l, _)| *l == layout) {
                self.bytes += layout.size();
                return list.push(block);
            }
            if self.classes.len() < CACHE_LAYOUTS {
                self.bytes += layout.size();
                return self.classes.push((layout, vec![block]));
            }
        }
        // SAFETY: the block's memory, from the global allocator with `layout`, no longer
        // used by anyone (its cell was dropped) and not in the cache.
        unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
    }

    /// Gives back all but the `IDLE_KEEP` most recently freed blocks of each layout.
    fn trim(&mut self) {
        for (layout, list) in &mut self.classes {
            let extra = list.len().saturating_sub(IDLE_KEEP);
            for block in list.drain(..extra) {
                // SAFETY: from the global allocator with `layout`, filed once, and now out
                // of the cache.
                unsafe { std::alloc::dealloc(block.as_ptr(), *layout) };
            }
            self.bytes -= extra * layout.size();
            list.shrink_to(IDLE_KEEP);
        }
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let hot = self.hot.take().map(|(layout, block)| (layout, vec![block]));
        for (layout, blocks) in self.classes.drain(..).chain(hot) {
            for block in blocks {
                // SAFETY: from the global allocator with `layout`, and in the cache only once.
                unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
            }
        }
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = const {
        RefCell::new(Cache { hot: None, classes: Vec::new(), bytes: 0, budget: OTHER_BYTES })
    };
}

/// Marks this thread as a worker's, whose idle moments [`trim`] the cache: it may then keep
/// up to `WORKER_BYTES`.
pub(crate) fn on_worker_thread() {
    let _ = CACHE.try_with(|cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            cache.budget = WORKER_BYTES;
        }
    });
}

/// For an idle worker: gives back all but `IDLE_KEEP` blocks of each layout.
pub(crate) fn trim() {
    let _ = CACHE.try_with(|cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            if cache.bytes > 0 {
                cache.trim();
            }
        }
    });
}

/// The layout a block of `layout` is allocated, filed and freed with: up to
/// `CACHE_MAX_BLOCK` bytes, its size rounded up to a multiple of `CLASS_BYTES` (which
/// `CACHE_MAX_BLOCK` is, so a class never passes it), its alignment kept; larger ones as
/// they are.
/// A `const fn`, inlined: a block's layout is its type's, so the class is folded at compile
/// time wherever the caller's layout is a constant (computed inside the out-of-line `take`,
/// it would be arithmetic on every spawn; `docs/perf/spawn-cost.md`).
#[inline(always)]
const fn class(layout: Layout) -> Layout {
    if layout.size() > CACHE_MAX_BLOCK {
        return layout;
    }
    let size = layout.size().next_multiple_of(CLASS_BYTES);
    // SAFETY: the alignment is a `Layout`'s (a power of two); `size` is at most
    // `CACHE_MAX_BLOCK`, and a valid layout of a non-zero size has an alignment of at most
    // 2^62, so `size` rounded up to it stays far below `isize::MAX` (a zero size stays zero).
    // Unchecked: where the layout is read from a cell's vtable at run time (every fiber's
    // end), the checked constructor's tests are not folded away.
    unsafe { Layout::from_size_align_unchecked(size, layout.align()) }
}

/// Memory for a block of `layout` (at most `CACHE_MAX_BLOCK` bytes): a cached one of its
/// class, else the allocator's, allocated with the class's layout.
#[inline(always)]
pub(super) fn take(layout: Layout) -> NonNull<u8> {
    take_class(class(layout))
}

/// [`take`] for a class's layout. Out of line: inlined, it made the spawns that inline
/// `Vacant::take` copy the cell twice.
#[inline(never)]
fn take_class(layout: Layout) -> NonNull<u8> {
    let cached = CACHE
        .try_with(|cache| {
            let mut cache = cache.try_borrow_mut().ok()?;
            match cache.hot {
                Some((l, block)) if l == layout => {
                    cache.hot = None;
                    Some(block)
                }
                _ => {
                    let block = cache.classes.iter_mut().find(|(l, _)| *l == layout)?.1.pop()?;
                    cache.bytes -= layout.size();
                    Some(block)
                }
            }
        })
        .ok()
        .flatten();
    cached.unwrap_or_else(|| allocate_class(layout))
}

/// Memory for a block of `layout` from the global allocator, with its class's layout.
#[inline]
pub(super) fn allocate(layout: Layout) -> NonNull<u8> {
    allocate_class(class(layout))
}

fn allocate_class(layout: Layout) -> NonNull<u8> {
    // SAFETY: `layout` is a cell's, never zero-sized (its header holds the count).
    let raw = unsafe { std::alloc::alloc(layout) };
    NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
}

/// Files the memory of a freed block of `layout` for reuse on this thread, or frees it (with
/// its class's layout, which it was allocated with).
#[inline]
pub(super) fn put(block: NonNull<u8>, layout: Layout) {
    let layout = class(layout);
    let kept = layout.size() <= CACHE_MAX_BLOCK
        && CACHE
            .try_with(|cache| {
                let Ok(mut cache) = cache.try_borrow_mut() else { return false };
                // The newest block is the hot one; the one it replaces is filed by layout.
                if let Some((l, previous)) = cache.hot.replace((layout, block)) {
                    cache.file(previous, l);
                }
                true
            })
            .unwrap_or(false);
    if !kept {
        // SAFETY: the block's memory, from the global allocator with `layout`, no longer
        // used by anyone (its cell was dropped) and not in the cache.
        unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
    }
}

#[cfg(all(test, not(spindle_loom)))]
mod tests {
    use super::*;

    fn filed() -> (usize, usize) {
        CACHE.with(|cache| {
            let cache = cache.borrow();
            let blocks = cache.classes.iter().map(|(_, list)| list.len()).sum();
            (blocks, cache.bytes)
        })
    }

    #[test]
    fn the_cache_reuses_the_last_block_of_a_layout_and_stays_within_its_budget() {
        let layout = Layout::from_size_align(200, 8).unwrap();
        let other = Layout::from_size_align(328, 16).unwrap();
        let n = OTHER_BYTES / layout.size() + 10;
        let blocks: Vec<NonNull<u8>> = (0..n).map(|_| take(layout)).collect();
        let last = *blocks.last().unwrap();
        for block in blocks {
            put(block, layout);
        }
        let again = take(layout);
        assert_eq!(again, last, "the block freed last comes back first");
        put(again, layout);
        let odd = take(other);
        put(odd, other);
        assert_eq!(take(other), odd, "each layout gets its own blocks");
        put(odd, other);
        let (blocks, bytes) = filed();
        assert!(bytes <= OTHER_BYTES, "beyond the budget, blocks went back to the allocator");
        assert!(blocks < n, "{blocks} filed");
        CACHE.with(|cache| {
            let cache = cache.borrow();
            let counted: usize = cache.classes.iter().map(|(l, list)| l.size() * list.len()).sum();
            assert_eq!(counted, cache.bytes, "the byte count matches the filed blocks");
            assert!(cache.classes.iter().all(|(l, _)| *l == class(layout) || *l == class(other)));
        });
        // The rest is freed with the thread's cache (valgrind sees no leak).
    }

    #[test]
    fn a_worker_thread_keeps_a_burst_and_gives_it_back_when_trimmed() {
        on_worker_thread();
        let layout = Layout::from_size_align(448, 8).unwrap();
        let n = 10_000;
        let blocks: Vec<NonNull<u8>> = (0..n).map(|_| take(layout)).collect();
        for block in blocks {
            put(block, layout);
        }
        let (blocks, bytes) = filed();
        assert_eq!(blocks, n - 1, "all but the hot block filed: a burst of 10,000 is kept");
        assert_eq!(bytes, (n - 1) * class(layout).size());
        trim();
        let (blocks, bytes) = filed();
        assert_eq!(blocks, IDLE_KEEP, "an idle worker keeps {IDLE_KEEP} a class");
        assert_eq!(bytes, IDLE_KEEP * class(layout).size());
        let reused = take(layout);
        put(reused, layout);
    }

    /// A burst of one closure type leaves blocks that a burst of another type of a near size
    /// takes (filed by exact layout, the second burst went to the allocator).
    #[test]
    fn layouts_of_one_class_share_blocks() {
        let first = Layout::from_size_align(424, 8).unwrap();
        let second = Layout::from_size_align(440, 8).unwrap();
        let third = Layout::from_size_align(456, 16).unwrap();
        assert_eq!(class(first), class(second));
        assert_eq!(class(first).size(), 448);
        assert_ne!(class(first), class(third), "another alignment is another class");
        let blocks: Vec<NonNull<u8>> = (0..100).map(|_| take(first)).collect();
        let mut freed: Vec<usize> = blocks.iter().map(|b| b.as_ptr() as usize).collect();
        for block in blocks {
            put(block, first);
        }
        let mut taken: Vec<usize> = (0..100).map(|_| take(second).as_ptr() as usize).collect();
        freed.sort_unstable();
        taken.sort_unstable();
        assert_eq!(taken, freed, "the second layout got the first one's blocks back");
        for block in &taken {
            put(NonNull::new(*block as *mut u8).unwrap(), second);
        }
        assert_eq!(class(Layout::from_size_align(CACHE_MAX_BLOCK - 8, 8).unwrap()).size(), CACHE_MAX_BLOCK);
        let large = Layout::from_size_align(CACHE_MAX_BLOCK + 8, 8).unwrap();
        assert_eq!(class(large), large, "a block over the cap keeps its layout");
    }

    #[test]
    fn blocks_larger_than_the_cap_are_not_cached() {
        let large = Layout::from_size_align(CACHE_MAX_BLOCK + 8, 8).unwrap();
        let block = allocate(large);
        put(block, large);
        CACHE.with(|cache| {
            let cache = cache.borrow();
            assert!(cache.hot.is_none_or(|(l, _)| l != large), "not the hot block");
            assert!(cache.classes.iter().all(|(l, _)| *l != large), "not filed");
        });
    }
}
