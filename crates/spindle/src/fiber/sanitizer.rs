//! Sanitizer annotations of the context switch.
//!
//! AddressSanitizer and ThreadSanitizer track one stack per thread; a fiber switch that they
//! are not told about looks to ASan like a huge frame ("ignoring requested
//! __asan_handle_no_return") and fills TSan's per-thread shadow call stack (a fiber never
//! returns from its entry). Their fiber interfaces fix that:
//!
//! - ASan: `__sanitizer_start_switch_fiber(save, bottom, size)` right before a switch names the
//!   stack being entered (and with a null `save`, tells it the leaving fiber is gone for good);
//!   `__sanitizer_finish_switch_fiber(save, ..)` right after a context is resumed.
//! - TSan: one TSan fiber per spindle fiber (`__tsan_create_fiber` when it starts,
//!   `__tsan_destroy_fiber` when it is recycled), the worker thread's own fiber for the
//!   scheduler context, and `__tsan_switch_to_fiber` right before every switch.
//!
//! Invariants:
//! - **Annotations bracket every switch.** `before_switch` runs immediately before
//!   `arch::switch` and `after_switch` immediately after it returns (or first thing in a new
//!   fiber's entry), with no other code between that could touch the stack being left. Both
//!   are `#[inline(always)]`: TSan keeps a shadow call stack per fiber, and a function of ours
//!   returning between `__tsan_switch_to_fiber` and the switch would pop a frame off the
//!   *next* fiber's shadow stack (its underflow crashed the first function entry there).
//! - **Zero cost when off.** Compiled in only with `--cfg spindle_asan` / `--cfg spindle_tsan`
//!   (set by `scripts/sanitizers.sh` together with `-Zsanitizer`); otherwise [`Context`] is a
//!   zero-sized type and every function is an empty inline function.

#[cfg(any(spindle_asan, spindle_tsan))]
use std::cell::Cell;
#[cfg(any(spindle_asan, spindle_tsan))]
use std::ffi::c_void;

#[cfg(spindle_asan)]
extern "C" {
    fn __sanitizer_start_switch_fiber(fake_stack_save: *mut *mut c_void, bottom: *const c_void, size: usize);
    fn __sanitizer_finish_switch_fiber(
        fake_stack_save: *mut c_void,
        bottom_old: *mut *const c_void,
        size_old: *mut usize,
    );
}

#[cfg(spindle_tsan)]
extern "C" {
    fn __tsan_get_current_fiber() -> *mut c_void;
    fn __tsan_create_fiber(flags: std::ffi::c_uint) -> *mut c_void;
    fn __tsan_destroy_fiber(fiber: *mut c_void);
    fn __tsan_switch_to_fiber(fiber: *mut c_void, flags: std::ffi::c_uint);
}

/// What the sanitizers need to know about one execution context (a fiber, or a worker's
/// scheduler context on the thread's own stack).
#[derive(Debug, Default)]
pub(crate) struct Context {
    /// ASan's fake-stack handle while this context is switched out.
    #[cfg(spindle_asan)]
    fake_stack: Cell<*mut c_void>,
    /// The stack's lowest address and size, for `__sanitizer_start_switch_fiber`.
    #[cfg(spindle_asan)]
    bounds: Cell<(usize, usize)>,
    /// The TSan fiber of this context.
    #[cfg(spindle_tsan)]
    tsan: Cell<*mut c_void>,
}

impl Context {
    /// Describes a fiber about to start on the stack `[bottom, top)`.
    #[inline]
    pub(crate) fn start_fiber(&self, bottom: *mut u8, top: *mut u8) {
        #[cfg(spindle_asan)]
        self.bounds.set((bottom as usize, top as usize - bottom as usize));
        #[cfg(spindle_tsan)]
        // SAFETY: creating a TSan fiber has no preconditions.
        self.tsan.set(unsafe { __tsan_create_fiber(0) });
        let _ = (bottom, top);
    }

    /// Describes the calling thread's own context (a worker's scheduler context).
    pub(crate) fn this_thread(&self) {
        #[cfg(spindle_asan)]
        self.bounds.set(thread_stack_bounds());
        #[cfg(spindle_tsan)]
        // SAFETY: reading the current TSan fiber has no preconditions.
        self.tsan.set(unsafe { __tsan_get_current_fiber() });
    }

    /// Forgets a fiber that finished (called from another context, after the switch away).
    #[inline]
    pub(crate) fn destroy_fiber(&self) {
        #[cfg(spindle_tsan)]
        {
            let fiber = self.tsan.replace(std::ptr::null_mut());
            if !fiber.is_null() {
                // SAFETY: the fiber was created by `start_fiber` and is not running (we run).
                unsafe { __tsan_destroy_fiber(fiber) };
            }
        }
    }
}

/// Right before switching from `from` to `to`. `leaving_for_good` is asked only under ASan:
/// whether `from` is a finished fiber that will never be resumed.
#[inline(always)] // no function exit of ours between the TSan switch and the real one
pub(crate) fn before_switch(from: &Context, to: &Context, leaving_for_good: impl FnOnce() -> bool) {
    #[cfg(spindle_asan)]
    {
        let save = if leaving_for_good() { std::ptr::null_mut() } else { from.fake_stack.as_ptr() };
        let (bottom, size) = to.bounds.get();
        // SAFETY: `save` is null or this context's own slot; the bounds describe the stack
        // being entered (set when it was described).
        unsafe { __sanitizer_start_switch_fiber(save, bottom as *const c_void, size) };
    }
    #[cfg(spindle_tsan)]
    // SAFETY: `to.tsan` is a live TSan fiber (created at start or the thread's own).
    unsafe {
        __tsan_switch_to_fiber(to.tsan.get(), 0)
    };
    #[cfg(not(spindle_asan))]
    let _ = (from, to, leaving_for_good);
}

/// Right after `me` was resumed by a switch (or first thing in a new fiber, whose slot is
/// still null).
#[inline(always)]
pub(crate) fn after_switch(me: &Context) {
    #[cfg(spindle_asan)]
    // SAFETY: the slot holds what `before_switch` saved when `me` left (or null for a first
    // entry); ASan does not need the previous stack's bounds (null out-pointers are allowed).
    unsafe {
        __sanitizer_finish_switch_fiber(me.fake_stack.get(), std::ptr::null_mut(), std::ptr::null_mut())
    };
    let _ = me;
}

/// The calling thread's stack as `(lowest address, size)`.
#[cfg(spindle_asan)]
fn thread_stack_bounds() -> (usize, usize) {
    let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    let mut addr: *mut c_void = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: pthread_getattr_np initialises `attr` for the calling thread.
    if unsafe { libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) } != 0 {
        return (0, 0);
    }
    // SAFETY: `attr` was initialised above; the out-pointers are our locals.
    unsafe { libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size) };
    // SAFETY: destroyed once, after its last use.
    unsafe { libc::pthread_attr_destroy(attr.as_mut_ptr()) };
    (addr as usize, size)
}
