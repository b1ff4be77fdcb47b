//! A hierarchical timer wheel: the timers (`sleep`, `sleep_until`, `timeout`) of one worker.
//!
//! The wheel is single-threaded: it is owned by one worker thread and needs no synchronisation.
//!
//! # Time
//!
//! Time is counted in *ticks* of 1 ms since the wheel's origin (tick 0). A deadline is rounded
//! **up** to the next tick (`tick = ceil((deadline - origin) / 1 ms)`, deadlines before the origin
//! are tick 0), and [`TimerWheel::advance`]`(now)` fires exactly the timers whose tick is
//! `<= floor((now - origin) / 1 ms)`, i.e. whose rounded-up deadline is `<= now`. So a timer
//! never fires before its deadline, however far away it is, and at most 1 ms (plus the
//! caller's latency) after it. Callers rely on that: a waiter whose timer fired may take the
//! deadline as passed and arm nothing more (`time::Sleep`, socket waits, `time::sleep`).
//! A deadline past the last tick (`u64::MAX` ms, 584 million years) counts as that tick: it
//! never comes.
//!
//! `elapsed` (written `E` below) is the last tick processed by `advance`: every timer whose tick
//! is `<= E` has fired, or was inserted after that `advance` and waits in the *expired* list.
//!
//! # Layout
//!
//! A tick is read as six base-64 digits (6 bits each); digit `L` (bits `6L..6L+6`) selects the slot
//! at level `L`. Level 0 slots are 1 ms wide, level 1 slots 64 ms, level `L` slots `64^L` ms;
//! the six levels together span `2^36` ms (about 2.2 years).
//!
//! Invariants, for every pending timer with tick `t`:
//!
//! - **Past is expired.** If `t <= E` it is in the *expired* list (it was inserted with a past deadline; the next
//!   `advance` fires it first, whatever `now` it is given).
//! - **Level by first differing digit.** Otherwise let `L` be the index of the highest base-64 digit in which `t` and `E` differ
//!   (`(63 - (t ^ E).leading_zeros()) / 6`). If `L < 6` the timer is in level `L`, slot
//!   `digit_L(t)`; then `t` and `E` agree on every digit above `L` and `digit_L(t) > digit_L(E)`.
//!   In words: level `L` holds the timers that fall in the current level-`L+1` slot of `E` but
//!   not in its current level-`L` slot, and each of its occupied slots lies strictly after
//!   `E`'s own slot, so slots never wrap around and the occupied slot with the lowest index
//!   is the earliest one. Everything in level `L` is later than everything in levels `< L`.
//! - **Overflow holds the later blocks.** If `L >= 6` (the tick lies in a later `2^36`-tick
//!   block than `E`) the timer is in the *overflow* list. Deadlines are not clamped: when the
//!   wheel reaches the first tick of the next block, it places the overflow list's timers again
//!   (cascading, below): those of that block go down into the levels, the later ones go back
//!   to the overflow list to wait for the block after. A timer years away waits there and
//!   fires at its own tick, never at a block boundary.
//! - **Occupancy bits tell the truth.** A level-`L` slot bit is set in `occupied[L]` iff the slot's list is non-empty, so the
//!   earliest occupied slot of a level is one `trailing_zeros`, not a scan.
//!
//! # Cascading
//!
//! `advance(now)` repeatedly takes the *earliest* occupied slot: the lowest occupied slot of
//! the lowest non-empty level (or, if every level is empty, the overflow list, which starts at
//! the next `2^36` block). Let `S` be the first tick of that slot. If `S > now` it stops.
//! Otherwise it sets `E = S` and re-inserts every timer of the slot relative to the new `E`:
//! timers with `t == S` land in the expired list (for a level-0 slot that is all of them) and
//! are fired at once, the others move to a strictly lower level, or (from the overflow list)
//! back to the overflow list when they lie in a later block still. Finally `E = now`. Because
//! every slot it skips is empty, and each timer moves down at most six times (plus once per
//! `2^36` ms block it waits out in the overflow list), `advance` costs O(levels) per fired
//! timer, amortised, however far time jumps. Timers fire in tick order (timers with past
//! deadlines inserted since the previous `advance` first).
//!
//! # Storage
//!
//! Timers live in a slab (`Vec` of entries plus a free list): no allocation per timer beyond
//! the slab's growth. Every list (384 slots, overflow, expired) is an intrusive doubly-linked
//! list threaded through the slab by `u32` indices, and each entry records the list it is in,
//! so `cancel` unlinks it in O(1) without searching. A [`TimerKey`] is the slab index plus the
//! entry's generation, which is bumped whenever the entry is freed: a stale key (its timer
//! fired or was cancelled, the entry maybe reused) never matches and cancels nothing.
//!
//! # Next deadline
//!
//! [`TimerWheel::next_deadline`] is exact: the earliest pending tick (not a slot boundary), so an
//! `epoll_wait` timeout computed from it never wakes the loop early. A level-0 slot holds a
//! single tick; every other list caches its minimum tick. Inserting keeps the cache exact;
//! cancelling the cached minimum marks it unknown, and the next `next_deadline` that needs it
//! rescans that one list (O(its length)) and caches the result again. So `next_deadline` costs
//! O(levels), plus one list scan after the earliest timer of the earliest slot was cancelled.

use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant};

/// Bits of a tick per level.
const SLOT_BITS: u32 = 6;
/// Slots per level.
const SLOTS: usize = 1 << SLOT_BITS;
/// Number of levels.
const LEVELS: usize = 6;
/// Bits of a tick covered by all the levels together.
const WHEEL_BITS: u32 = SLOT_BITS * LEVELS as u32;

/// List index of the overflow list (ticks in the later `2^36` blocks).
const OVERFLOW: usize = LEVELS * SLOTS;
/// List index of the expired list (ticks `<= elapsed`, to fire on the next `advance`).
const EXPIRED: usize = OVERFLOW + 1;
/// Number of lists.
const NUM_LISTS: usize = EXPIRED + 1;

/// "No entry" in the links of the intrusive lists and the free list.
const NIL: u32 = u32::MAX;
/// "Not known" in a list's cached minimum.
const MIN_UNKNOWN: u64 = u64::MAX;

/// Identifies a timer of a [`TimerWheel`] for [`TimerWheel::cancel`].
///
/// The generation makes keys of fired or cancelled timers stale: they never cancel a newer timer
/// that reuses the same slab entry (up to a wraparound after 2^32 reuses of one entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TimerKey {
    index: u32,
    generation: u32,
}

/// One slab entry: a pending timer (`value` is `Some`) or a free entry.
struct Entry<T> {
    value: Option<T>,
    /// The deadline, in ticks (rounded up; saturated at `u64::MAX`, never clamped nearer).
    tick: u64,
    /// Links of the list the entry is in; `next` links the free list when the entry is free.
    prev: u32,
    next: u32,
    /// Bumped when the entry is freed.
    generation: u32,
    /// The list the entry is in (meaningless when free).
    list: u16,
}

/// The head of an intrusive list.
struct List {
    head: u32,
    tail: u32,
    /// The minimum tick of the list, or `MIN_UNKNOWN`; meaningless while the list is empty.
    /// A `Cell` so that `next_deadline(&self)` can cache a rescan.
    min: Cell<u64>,
}

/// A hierarchical timer wheel with 1 ms resolution; see the module documentation.
pub(crate) struct TimerWheel<T> {
    origin: Instant,
    /// The last processed tick (`E` in the module documentation).
    elapsed: u64,
    entries: Vec<Entry<T>>,
    free_head: u32,
    lists: Box<[List]>,
    /// One bit per slot and level: set iff the slot's list is non-empty.
    occupied: [u64; LEVELS],
    len: usize,
}

impl<T> TimerWheel<T> {
    /// An empty wheel whose tick 0 is `origin`.
    pub(crate) fn new(origin: Instant) -> Self {
        let lists =
            (0..NUM_LISTS).map(|_| List { head: NIL, tail: NIL, min: Cell::new(MIN_UNKNOWN) }).collect();
        TimerWheel {
            origin,
            elapsed: 0,
            entries: Vec::new(),
            free_head: NIL,
            lists,
            occupied: [0; LEVELS],
            len: 0,
        }
    }

    /// Number of pending timers.
    #[allow(dead_code, reason = "part of the wheel's API; the worker only needs `is_empty` so far")]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether no timer is pending.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a timer that fires `value` at `deadline` (rounded up to the next millisecond),
    /// however far away. A deadline that is already past fires on the next `advance`. O(1).
    pub(crate) fn insert(&mut self, deadline: Instant, value: T) -> TimerKey {
        let tick = self.ceil_tick(deadline);
        let index = self.alloc(tick, value);
        self.place(index);
        self.len += 1;
        TimerKey { index, generation: self.entries[index as usize].generation }
    }

    /// Removes a pending timer and returns its value; `None` if the timer already fired or was
    /// cancelled (the key is stale). O(1).
    pub(crate) fn cancel(&mut self, key: TimerKey) -> Option<T> {
        let entry = self.entries.get(key.index as usize)?;
        if entry.generation != key.generation || entry.value.is_none() {
            return None;
        }
        self.unlink(key.index);
        Some(self.release(key.index))
    }

    /// The earliest pending deadline, rounded up to the millisecond (so never earlier than the
    /// real deadline of any pending timer); `None` if no timer is pending. It may be in the past
    /// (timers that the next `advance` fires at once).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        if self.is_empty() {
            return None;
        }
        // No overflow: `origin` is a reading of the monotonic clock (seconds since boot), and
        // `u64::MAX` ms (1.8e16 s) is far below the `i64::MAX` seconds an `Instant` holds.
        self.next_tick().map(|tick| self.origin + Duration::from_millis(tick))
    }

    /// Fires (passes to `fire`) every timer whose rounded-up deadline is `<= now`, in deadline
    /// order as far as the 1 ms resolution allows, plus every timer inserted with a past
    /// deadline since the last call. Time never goes back: an earlier `now` than a previous
    /// call's fires only those past-deadline timers. `fire` cannot touch the wheel; if it
    /// panics, the wheel stays consistent and the timers not yet fired stay pending.
    pub(crate) fn advance(&mut self, now: Instant, mut fire: impl FnMut(T)) {
        let now_tick = self.floor_tick(now);
        self.fire_expired(&mut fire);
        while let Some((list, start)) = self.next_expiration() {
            if start > now_tick {
                break;
            }
            debug_assert!(start > self.elapsed);
            self.elapsed = start;
            // Every timer of the slot has `tick >= start`: it moves to the expired list if
            // `tick == start`, else to a lower level, or, from the overflow list, back to the
            // overflow list if it lies in a later block still ("overflow holds the later
            // blocks"). So the list is detached before its timers are placed again.
            let mut index = self.take_list(list);
            while index != NIL {
                let next = self.entries[index as usize].next;
                self.place(index);
                index = next;
            }
            self.fire_expired(&mut fire);
        }
        if now_tick > self.elapsed {
            self.elapsed = now_tick;
        }
    }

    /// `deadline` in ticks, rounded up.
    fn ceil_tick(&self, deadline: Instant) -> u64 {
        let since = deadline.saturating_duration_since(self.origin);
        let round_up = u128::from(!since.subsec_nanos().is_multiple_of(1_000_000));
        u64::try_from(since.as_millis() + round_up).unwrap_or(u64::MAX)
    }

    /// `now` in ticks, rounded down.
    fn floor_tick(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.origin).as_millis()).unwrap_or(u64::MAX)
    }

    /// The earliest pending tick.
    fn next_tick(&self) -> Option<u64> {
        if !self.list_is_empty(EXPIRED) {
            return Some(self.list_min(EXPIRED));
        }
        for level in 0..LEVELS {
            let occupied = self.occupied[level];
            if occupied != 0 {
                let slot = occupied.trailing_zeros() as usize;
                if level == 0 {
                    // A level-0 slot holds a single tick.
                    let tick = (self.elapsed & !(SLOTS as u64 - 1)) | slot as u64;
                    debug_assert_eq!(tick, self.list_min(slot));
                    return Some(tick);
                }
                return Some(self.list_min(level * SLOTS + slot));
            }
        }
        if !self.list_is_empty(OVERFLOW) {
            return Some(self.list_min(OVERFLOW));
        }
        None
    }

    /// The earliest non-empty list other than the expired one, and its first tick.
    fn next_expiration(&self) -> Option<(usize, u64)> {
        for level in 0..LEVELS {
            let occupied = self.occupied[level];
            if occupied != 0 {
                let slot = u64::from(occupied.trailing_zeros());
                let shift = SLOT_BITS * level as u32;
                let above = shift + SLOT_BITS;
                let start = (self.elapsed >> above << above) | (slot << shift);
                return Some((level * SLOTS + slot as usize, start));
            }
        }
        if !self.list_is_empty(OVERFLOW) {
            // The first tick of the next 2^36 block (`None` only past the end of time).
            let start = ((self.elapsed >> WHEEL_BITS) + 1).checked_mul(1 << WHEEL_BITS)?;
            return Some((OVERFLOW, start));
        }
        None
    }

    /// Fires every timer of the expired list.
    fn fire_expired(&mut self, fire: &mut impl FnMut(T)) {
        while let Some(index) = self.pop_front(EXPIRED) {
            let value = self.release(index);
            fire(value);
        }
    }

    /// Puts a pending, unlinked entry into the list its tick belongs to ("past is expired", "level by first differing digit", "overflow holds the later blocks").
    fn place(&mut self, index: u32) {
        let tick = self.entries[index as usize].tick;
        let list = if tick <= self.elapsed {
            EXPIRED
        } else {
            let level = ((63 - (tick ^ self.elapsed).leading_zeros()) / SLOT_BITS) as usize;
            if level >= LEVELS {
                debug_assert!(tick >> WHEEL_BITS > self.elapsed >> WHEEL_BITS);
                OVERFLOW
            } else {
                let slot = (tick >> (SLOT_BITS * level as u32)) as usize & (SLOTS - 1);
                self.occupied[level] |= 1 << slot;
                level * SLOTS + slot
            }
        };
        self.push_back(list, index);
    }

    fn list_is_empty(&self, list: usize) -> bool {
        self.lists[list].head == NIL
    }

    /// The minimum tick of a non-empty list, rescanning it if the cached one is unknown.
    fn list_min(&self, list: usize) -> u64 {
        let head = &self.lists[list];
        let cached = head.min.get();
        if cached != MIN_UNKNOWN {
            return cached;
        }
        let mut min = MIN_UNKNOWN;
        let mut index = head.head;
        while index != NIL {
            let entry = &self.entries[index as usize];
            min = min.min(entry.tick);
            index = entry.next;
        }
        head.min.set(min);
        min
    }

    fn push_back(&mut self, list: usize, index: u32) {
        let tail = self.lists[list].tail;
        let entry = &mut self.entries[index as usize];
        entry.list = list as u16;
        entry.prev = tail;
        entry.next = NIL;
        let tick = entry.tick;
        let head = &mut self.lists[list];
        if tail == NIL {
            head.head = index;
            head.min.set(tick);
        } else {
            let min = head.min.get();
            if min != MIN_UNKNOWN && tick < min {
                head.min.set(tick);
            }
            self.entries[tail as usize].next = index;
        }
        head.tail = index;
    }

    /// Removes a pending entry from its list.
    fn unlink(&mut self, index: u32) {
        let entry = &self.entries[index as usize];
        let (list, prev, next, tick) = (entry.list as usize, entry.prev, entry.next, entry.tick);
        if prev == NIL {
            self.lists[list].head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[list].tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
        let head = &self.lists[list];
        if head.head == NIL {
            if list < OVERFLOW {
                self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
            }
        } else if head.min.get() == tick {
            head.min.set(MIN_UNKNOWN);
        }
    }

    /// Empties a list and returns its first entry (or `NIL`). Its entries stay chained through
    /// their `next` links, still pending: the caller places each again.
    fn take_list(&mut self, list: usize) -> u32 {
        let head = &mut self.lists[list];
        let first = head.head;
        head.head = NIL;
        head.tail = NIL;
        if list < OVERFLOW {
            self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
        }
        first
    }

    fn pop_front(&mut self, list: usize) -> Option<u32> {
        let index = self.lists[list].head;
        if index == NIL {
            return None;
        }
        self.unlink(index);
        Some(index)
    }

    /// A pending, unlinked entry.
    fn alloc(&mut self, tick: u64, value: T) -> u32 {
        if self.free_head != NIL {
            let index = self.free_head;
            let entry = &mut self.entries[index as usize];
            self.free_head = entry.next;
            entry.value = Some(value);
            entry.tick = tick;
            index
        } else {
            let index =
                u32::try_from(self.entries.len()).ok().filter(|&i| i != NIL).expect("too many timers");
            self.entries.push(Entry {
                value: Some(value),
                tick,
                prev: NIL,
                next: NIL,
                generation: 0,
                list: 0,
            });
            index
        }
    }

    /// Frees an unlinked pending entry, making its keys stale, and returns its value.
    fn release(&mut self, index: u32) -> T {
        let entry = &mut self.entries[index as usize];
        let value = entry.value.take().expect("released a free timer entry");
        entry.generation = entry.generation.wrapping_add(1);
        entry.prev = NIL;
        entry.next = self.free_head;
        self.free_head = index;
        self.len -= 1;
        value
    }
}

impl<T> fmt::Debug for TimerWheel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerWheel")
            .field("origin", &self.origin)
            .field("elapsed_ms", &self.elapsed)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
