//! Task-local storage: [`task_local!`](crate::task_local) statics hold a value for the extent
//! of a [`LocalKey::scope`] future or a [`LocalKey::sync_scope`] call (tokio's `task_local!`);
//! the async twin of [`fiber_local!`](crate::fiber_local).
//!
//! # Invariants
//!
//! - **A scope's value lives in its future between polls.** For each poll of the inner future
//!   the value is swapped into the current context's slot, and swapped back out after it, also
//!   when the poll unwinds; so a task that moves to another worker between polls takes its
//!   value along, and nothing else polled on that worker sees it.
//! - **The slot is the context's.** In a fiber the slot is fiber-local (module
//!   `fiber::local`): a fiber that parks inside a scope (in a `sync_scope`'s closure, or in a
//!   blocking call inside a scope future's poll) keeps the value to itself while other fibers
//!   run on its worker. In a task's poll (which never parks) and on a plain thread the slot is
//!   thread-local. A scope enters and leaves in the same context.
//! - **Scopes nest.** Entering swaps the new value in and keeps the outer one in the scope;
//!   leaving swaps them back, so the outer value is seen again after the inner scope.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::fiber::FiberLocal;
use crate::sched::worker;

/// A task-local key; declare it with [`task_local!`](crate::task_local).
pub struct LocalKey<T: 'static> {
    thread: &'static std::thread::LocalKey<RefCell<Option<T>>>,
    fiber: &'static FiberLocal<RefCell<Option<T>>>,
}

/// [`LocalKey::try_with`] outside any scope of the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessError;

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("task-local value not set: the access is outside any scope of the key")
    }
}

impl std::error::Error for AccessError {}

impl<T: 'static> LocalKey<T> {
    #[doc(hidden)]
    pub const fn __new(
        thread: &'static std::thread::LocalKey<RefCell<Option<T>>>,
        fiber: &'static FiberLocal<RefCell<Option<T>>>,
    ) -> LocalKey<T> {
        LocalKey { thread, fiber }
    }

    /// Runs `f` with the current context's slot ("the slot is the context's").
    fn with_slot<R>(&'static self, f: impl FnOnce(&RefCell<Option<T>>) -> R) -> R {
        if worker::current().is_some_and(|w| w.in_fiber()) {
            self.fiber.with(f)
        } else {
            self.thread.with(f)
        }
    }

    /// Swaps `value` with the slot's content.
    #[track_caller]
    fn swap(&'static self, value: &mut Option<T>) {
        self.with_slot(|slot| match slot.try_borrow_mut() {
            Ok(mut held) => std::mem::swap(&mut *held, value),
            Err(_) => {
                panic!("a task-local scope was entered or left inside `LocalKey::with` of the same key")
            }
        });
    }

    /// Runs `f` with `value` set for this key ("scopes nest").
    #[track_caller]
    fn enter<R>(&'static self, value: &mut Option<T>, f: impl FnOnce() -> R) -> R {
        struct Leave<'a, T: 'static> {
            key: &'static LocalKey<T>,
            value: &'a mut Option<T>,
        }
        impl<T: 'static> Drop for Leave<'_, T> {
            fn drop(&mut self) {
                self.key.swap(self.value);
            }
        }
        self.swap(value);
        let _leave = Leave { key: self, value };
        f()
    }

    /// A future that runs `future` with this key set to `value` in every poll (and when it is
    /// dropped).
    ///
    /// ```
    /// spindle::task_local! {
    ///     static REQUEST_ID: u64;
    /// }
    ///
    /// async fn log(what: &str) -> String {
    ///     format!("[{}] {what}", REQUEST_ID.get())
    /// }
    ///
    /// let rt = spindle::Runtime::new().unwrap();
    /// let h = rt.spawn_async(REQUEST_ID.scope(7, async {
    ///     spindle::task::yield_now().await; // the value travels with the task
    ///     log("done").await
    /// }));
    /// assert_eq!(h.join().unwrap(), "[7] done");
    /// ```
    pub fn scope<F: Future>(&'static self, value: T, future: F) -> TaskLocalFuture<T, F> {
        TaskLocalFuture { key: self, value: Some(value), future: Some(future) }
    }

    /// Runs `f` with this key set to `value`, blocking-style code included (a fiber that parks
    /// inside keeps the value to itself).
    ///
    /// ```
    /// spindle::task_local! {
    ///     static USER: String;
    /// }
    ///
    /// let greeting = USER.sync_scope("ada".to_string(), || USER.with(|u| format!("hello {u}")));
    /// assert_eq!(greeting, "hello ada");
    /// assert!(USER.try_with(|_| ()).is_err(), "set only inside the scope");
    /// ```
    #[track_caller]
    pub fn sync_scope<F, R>(&'static self, value: T, f: F) -> R
    where
        F: FnOnce() -> R,
    {
        let mut value = Some(value);
        self.enter(&mut value, f)
    }

    /// Runs `f` with a reference to the value of the innermost scope.
    ///
    /// # Panics
    ///
    /// Outside any scope of this key (use [`try_with`](Self::try_with) to ask).
    #[track_caller]
    pub fn with<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        match self.try_with(f) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// Runs `f` with a reference to the value of the innermost scope, or returns
    /// [`AccessError`] outside any scope.
    pub fn try_with<F, R>(&'static self, f: F) -> Result<R, AccessError>
    where
        F: FnOnce(&T) -> R,
    {
        self.with_slot(|slot| {
            let held = slot.borrow();
            match held.as_ref() {
                Some(value) => Ok(f(value)),
                None => Err(AccessError),
            }
        })
    }
}

impl<T: Clone + 'static> LocalKey<T> {
    /// A clone of the value of the innermost scope.
    ///
    /// # Panics
    ///
    /// Outside any scope of this key.
    #[track_caller]
    pub fn get(&'static self) -> T {
        self.with(T::clone)
    }
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKey").finish_non_exhaustive()
    }
}

/// The future of [`LocalKey::scope`].
#[must_use = "futures do nothing unless polled"]
pub struct TaskLocalFuture<T: 'static, F> {
    key: &'static LocalKey<T>,
    /// The scope's value while the inner future is not being polled.
    value: Option<T>,
    /// `None` once dropped (in the scope, by `Drop`).
    future: Option<F>,
}

impl<T: 'static, F: Future> Future for TaskLocalFuture<T, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: structural pinning of `future` only: it is never moved out while pinned
        // (`Drop` drops it in place through `Pin::set`), and `key` and `value` are never
        // pinned (the value moves in and out of the slot).
        let this = unsafe { self.get_unchecked_mut() };
        let future = &mut this.future;
        this.key.enter(&mut this.value, || {
            let future = future.as_mut().expect("a task-local scope future polled after it was dropped");
            // SAFETY: see above: `future` stays in place until the TaskLocalFuture drops it.
            unsafe { Pin::new_unchecked(future) }.poll(cx)
        })
    }
}

impl<T: 'static, F> Drop for TaskLocalFuture<T, F> {
    fn drop(&mut self) {
        if self.future.is_none() {
            return;
        }
        // The inner future's destructors run in the scope too, as its polls did.
        let future = &mut self.future;
        // SAFETY: dropping in place (`Pin::set` runs the destructor where the future lies),
        // as structural pinning requires.
        let drop_in_place = || unsafe { Pin::new_unchecked(future) }.set(None);
        let key = self.key;
        let in_scope = key.with_slot(|slot| slot.try_borrow_mut().is_ok());
        if in_scope {
            key.enter(&mut self.value, drop_in_place);
        } else {
            drop_in_place();
        }
    }
}

impl<T: 'static, F> fmt::Debug for TaskLocalFuture<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskLocalFuture").finish_non_exhaustive()
    }
}
