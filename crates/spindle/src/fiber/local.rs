//! Fiber-local storage: [`fiber_local!`](crate::fiber_local) statics hold one value per fiber.
//!
//! Thread-locals belong to the *worker*: every fiber a worker runs sees the same
//! `thread_local!` values, so state kept there leaks between fibers (and a `RefCell` borrow
//! held across a park panics in the next fiber that borrows it). A `fiber_local!` value is
//! per fiber instead: created from its initialiser on the fiber's first access, dropped when
//! the fiber finishes, on the fiber itself.
//!
//! Invariants:
//! - A fiber's map (`Header::locals`) is touched only by the fiber itself, on its owner
//!   thread (owner-only field, module `cell`); entries are boxed, and removed only when the
//!   fiber's body has returned, so a `&T` lent to `with` stays valid for the whole call even if
//!   the call initialises other fiber-locals.
//! - Outside a fiber (a plain thread) each thread has one map of its own, as if it were one
//!   fiber. In an async task (on a worker, outside any fiber) access panics: a task may move
//!   between workers and has no fiber to own the value.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;

use crate::sched::worker;

/// The values of one fiber (or plain thread): (key, value) in first-use order.
pub(crate) type LocalMap = Vec<(usize, Box<dyn Any>)>;

thread_local! {
    static THREAD_MAP: RefCell<LocalMap> = const { RefCell::new(Vec::new()) };
}

/// A fiber-local static; declare it with [`fiber_local!`](crate::fiber_local).
pub struct FiberLocal<T: 'static> {
    init: fn() -> T,
}

impl<T: 'static> FiberLocal<T> {
    #[doc(hidden)]
    pub const fn new(init: fn() -> T) -> FiberLocal<T> {
        FiberLocal { init }
    }

    fn key(&'static self) -> usize {
        self as *const Self as usize
    }

    /// Runs `f` with this fiber's value, creating it on first use.
    ///
    /// # Panics
    ///
    /// In an async task (outside any fiber) on a spindle worker.
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        let key = self.key();
        match worker::current() {
            Some(w) => {
                let fiber = w.current_fiber().expect(
                    "a spindle::fiber_local! value was accessed from an async task; tasks have no fiber: \
                     pass the value in, or use a task-local of your executor",
                );
                let ptr = get_or_init(&fiber.header.locals, key, self.init);
                // SAFETY: `ptr` points into a box of this fiber's map, which is removed only
                // after the fiber's body returns (module invariant); `fiber` keeps the header
                // alive and we are that fiber, so the value outlives this call.
                f(unsafe { &*ptr })
            }
            None => THREAD_MAP.with(|map| {
                let ptr = get_or_init(map, key, self.init);
                // SAFETY: as above; the thread's map is only cleared when the thread exits.
                f(unsafe { &*ptr })
            }),
        }
    }
}

impl<T: Clone + 'static> FiberLocal<T> {
    /// A clone of this fiber's value.
    pub fn get(&'static self) -> T {
        self.with(T::clone)
    }
}

impl<T: 'static> FiberLocal<std::cell::Cell<T>> {
    /// Replaces this fiber's value (for `Cell` locals).
    pub fn set(&'static self, value: T) {
        self.with(|c| c.set(value));
    }
}

/// The value for `key` in `map`, created by `init` if absent. `init` runs with the map not
/// borrowed (it may use other fiber-locals).
fn get_or_init<T: 'static>(map: &RefCell<LocalMap>, key: usize, init: fn() -> T) -> *const T {
    if let Some(ptr) = find::<T>(map, key) {
        return ptr;
    }
    let value: Box<dyn Any> = Box::new(init());
    let mut m = map.borrow_mut();
    // `init` may have created this same key meanwhile (recursion): keep the first.
    if !m.iter().any(|(k, _)| *k == key) {
        m.push((key, value));
    }
    drop(m);
    find::<T>(map, key).expect("just inserted")
}

fn find<T: 'static>(map: &RefCell<LocalMap>, key: usize) -> Option<*const T> {
    map.borrow().iter().find(|(k, _)| *k == key).map(|(_, v)| {
        let v: &T = v.downcast_ref().expect("fiber_local key maps to its own type");
        v as *const T
    })
}

/// Drops a finished fiber's values, on the fiber, repeating if destructors created new ones
/// (bounded).
pub(crate) fn drop_all(map: &RefCell<LocalMap>) {
    for _ in 0..8 {
        let values = std::mem::take(&mut *map.borrow_mut());
        if values.is_empty() {
            return;
        }
        drop(values);
    }
}

impl<T: 'static> fmt::Debug for FiberLocal<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FiberLocal").finish_non_exhaustive()
    }
}

/// Declares fiber-local statics: like `thread_local!`, but one value per fiber (and one per
/// plain thread outside fibers). Access them with [`FiberLocal::with`].
///
/// ```
/// use std::cell::Cell;
///
/// spindle::fiber_local! {
///     static REQUEST_ID: Cell<u64> = Cell::new(0);
/// }
///
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let handles: Vec<_> = (1..=3u64)
///         .map(|id| {
///             spindle::spawn(move || {
///                 REQUEST_ID.set(id);
///                 spindle::yield_now(); // other fibers run on this worker meanwhile
///                 REQUEST_ID.get().get()
///             })
///         })
///         .collect();
///     let ids: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
///     assert_eq!(ids, vec![1, 2, 3]);
/// });
/// ```
#[macro_export]
macro_rules! fiber_local {
    ($($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr);* $(;)?) => {
        $(
            $(#[$attr])*
            $vis static $name: $crate::fiber::FiberLocal<$t> = $crate::fiber::FiberLocal::new({
                fn __init() -> $t {
                    $init
                }
                __init
            });
        )*
    };
}
