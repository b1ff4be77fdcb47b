//! The atomics and cells of the lock-free pieces, swapped for loom's under `--cfg spindle_loom` so
//! that loom can model-check them (`RUSTFLAGS="--cfg spindle_loom" cargo test -p spindle --lib loom`; a name of our own, since tokio, a dev-dependency, changes under `--cfg loom`).

#[cfg(spindle_loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(spindle_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU8, AtomicUsize};

#[cfg(not(spindle_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU8, AtomicUsize};

/// `std::cell::UnsafeCell` with loom's closure-based API.
#[cfg(not(spindle_loom))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(spindle_loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a raw pointer to the value; the caller's protocol makes access exclusive.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
