//! A detector for state that must not be held across a park.
//!
//! A `RefCell` borrow of a thread-local, or a `std::sync` lock guard, held while a fiber parks
//! is seen (or blocked on) by the next fiber the worker runs: a panic or a deadlock far from
//! the cause. Spindle cannot see those guards, but code can mark such a section with
//! [`no_park`]: a fiber that parks (any spindle wait, sleep or yield) while a marker is alive
//! panics at once, naming the marker, in release builds too: a marker costs a thread-local
//! increment and decrement, and a park one thread-local load (a `const` thread-local: one
//! instruction). spindle marks its own std-lock guard, `watch::Ref`, this way, so a `Ref`
//! held across a park is a panic naming it rather than a worker blocked on the lock.
//!
//! Invariant: the count of live markers is per thread; a marker is `!Send`, so it is dropped
//! on the thread that made it, and a fiber cannot switch away while one is alive, so the
//! count never leaks from one fiber to the next.

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    /// Live markers on this thread, and the name of the latest.
    static HELD: Cell<(usize, &'static str)> = const { Cell::new((0, "")) };
}

/// Marks a section that must not park (see the module docs); the section ends when the
/// marker drops.
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
///         spindle::yield_now(); // panics here, naming "CACHE borrow"
///     });
/// });
/// ```
pub fn no_park(what: &'static str) -> NoPark {
    HELD.with(|h| h.set((h.get().0 + 1, what)));
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
        HELD.with(|h| h.set((h.get().0.saturating_sub(1), h.get().1)));
    }
}

/// Whether a marker is alive on this thread: for yields that are optional, which skip rather
/// than panic.
#[inline]
pub(crate) fn held() -> bool {
    HELD.with(|h| h.get().0 > 0)
}

/// Called before a fiber parks or yields: panics if a marker is alive.
#[inline]
#[track_caller]
pub(crate) fn check(reason: &str) {
    let (count, what) = HELD.with(|h| h.get());
    if count > 0 {
        parked_while_held(reason, what);
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn parked_while_held(reason: &str, what: &str) {
    if crate::fiber::try_current().is_some() {
        // Reset first, so that the unwinding (which may park in destructors) does not
        // panic again.
        HELD.with(|h| h.set((0, "")));
        panic!(
            "a fiber parked ({reason}) while holding \"{what}\" (marked with spindle::fiber::no_park): \
             the next fiber on this worker would see it; release it before waiting"
        );
    }
}
