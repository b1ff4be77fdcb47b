//! `task_local!`: the macro that declares a task-local [`LocalKey`](crate::task::LocalKey)
//! (module `local` has the rules).

#[cfg(doc)]
use super::local::LocalKey;

/// Declares task-local statics (tokio's `task_local!`): a value set for the extent of a
/// [`LocalKey::scope`] future (every poll of it) or a [`LocalKey::sync_scope`] call, read with
/// [`LocalKey::with`], [`try_with`](LocalKey::try_with) or [`get`](LocalKey::get). The async
/// twin of [`fiber_local!`](crate::fiber_local), which keeps a value per fiber for its whole
/// life: a task's scope follows the task from worker to worker, and a fiber's follows the
/// fiber across its parks.
///
/// ```
/// spindle::task_local! {
///     static TENANT: &'static str;
///     pub static TRACE: u64;
/// }
///
/// let rt = spindle::Runtime::new().unwrap();
/// let got = rt.block_on(TENANT.scope("acme", async {
///     TRACE.scope(42, async { format!("{}/{}", TENANT.get(), TRACE.get()) }).await
/// }));
/// assert_eq!(got, "acme/42");
/// ```
#[macro_export]
macro_rules! task_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty; $($rest:tt)*) => {
        $crate::__task_local_key!($(#[$attr])* $vis $name, $t);
        $crate::task_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty) => {
        $crate::__task_local_key!($(#[$attr])* $vis $name, $t);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __task_local_key {
    ($(#[$attr:meta])* $vis:vis $name:ident, $t:ty) => {
        $(#[$attr])*
        $vis static $name: $crate::task::LocalKey<$t> = {
            ::std::thread_local! {
                static __SPINDLE_THREAD_SLOT: ::core::cell::RefCell<::core::option::Option<$t>> =
                    const { ::core::cell::RefCell::new(::core::option::Option::None) };
            }
            fn __spindle_fiber_slot() -> ::core::cell::RefCell<::core::option::Option<$t>> {
                ::core::cell::RefCell::new(::core::option::Option::None)
            }
            static __SPINDLE_FIBER_SLOT: $crate::fiber::FiberLocal<
                ::core::cell::RefCell<::core::option::Option<$t>>,
            > = $crate::fiber::FiberLocal::new(__spindle_fiber_slot);
            $crate::task::LocalKey::__new(&__SPINDLE_THREAD_SLOT, &__SPINDLE_FIBER_SLOT)
        };
    };
}
