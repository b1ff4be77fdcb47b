//! A debug-build detector for state that must not be held across a park.
//!
//! A `RefCell` borrow of a thread-local, or a `std::sync` lock guard, held while a fiber parks
//! is seen (or blocked on) by the next fiber the worker runs: a panic or a deadlock far from
//! the cause. Spindle cannot see those guards, but code can mark such a section with
//! [`no_park`]: in debug builds, a fiber that parks (any spindle wait, sleep or yield) while a
//! marker is alive panics at once, naming the marker. Release builds compile the check away.
//! spindle marks its own std-lock guard, `watch::Ref`, this way.
//!
//! Invariant: the count of live markers is per thread; a marker is `!Send`, so it is dropped
//! on the thread that made it, and a fiber cannot switch away while one is alive (debug
//! builds), so the count never leaks from one fiber to the next.

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    /// Live markers on this thread, and the name of the latest.
    static HELD: Cell<(usize, &'static str)> = const { Cell::new((0, "")) };
}

/// Marks a section that must not park: in debug builds, a park or yield of the fiber while
/// the marker lives panics, naming the section (a std lock guard or a thread-local `RefCell`
/// borrow held across a park is the mistake it catches). Release builds compile the check
/// away. The section ends when the marker drops.
///
// The example is compiled, not run: whether a doctest sees `debug_assertions` does not follow
// the build of spindle it links (under `cargo test --release` it read "debug" while spindle's
// check was compiled away); tests/fiber_no_park.rs asserts the panic in debug builds.
/// ```no_run
/// use std::cell::RefCell;
/// thread_local! { static CACHE: RefCell<Vec<u8>> = RefCell::new(Vec::new()); }
///
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     CACHE.with(|c| {
///         let _no_park = spindle::fiber::no_park("CACHE borrow");
///         let _borrow = c.borrow_mut();
///         spindle::yield_now(); // debug builds panic here, naming "CACHE borrow"
///     });
/// });
/// ```
pub fn no_park(what: &'static str) -> NoPark {
    if cfg!(debug_assertions) {
        HELD.with(|h| h.set((h.get().0 + 1, what)));
    }
    NoPark { _not_send: PhantomData }
}

/// The marker of [`no_park`].
#[derive(Debug)]
#[must_use = "the section ends when the marker is dropped"]
pub struct NoPark {
    _not_send: PhantomData<*const ()>,
}

impl Drop for NoPark {
    fn drop(&mut self) {
        if cfg!(debug_assertions) {
            HELD.with(|h| h.set((h.get().0.saturating_sub(1), h.get().1)));
        }
    }
}

/// Whether a marker is alive on this thread (always `false` in release builds, where
/// markers are not counted): for yields that are optional, which skip rather than panic.
#[inline]
pub(crate) fn held() -> bool {
    cfg!(debug_assertions) && HELD.with(|h| h.get().0 > 0)
}

/// Called before a fiber parks or yields: panics in debug builds if a marker is alive.
#[inline]
pub(crate) fn check(reason: &str) {
    if cfg!(debug_assertions) {
        let (count, what) = HELD.with(|h| h.get());
        if count > 0 && crate::fiber::try_current().is_some() {
            // Reset first, so that the unwinding (which may park in destructors) does not
            // panic again.
            HELD.with(|h| h.set((0, "")));
            panic!(
                "a fiber parked ({reason}) while holding \"{what}\" (marked with spindle::fiber::no_park): \
                 the next fiber on this worker would see it; release it before waiting"
            );
        }
    }
}
