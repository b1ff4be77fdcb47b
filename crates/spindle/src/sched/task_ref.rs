//! What the scheduler knows of an async task: [`TaskRef`], a counted reference it can poll,
//! cancel and list, to a raw task cell whose [`Header`] holds the state word and the
//! [`Vtable`]. The cells themselves (future, home, output, join handle, waker) are module
//! `task`'s (`task::raw`); the scheduler only queues these references, so it never depends on
//! that module.
//!
//! # Invariants
//!
//! - **A header starts every cell.** A task cell is `#[repr(C)]` with its [`Header`] first,
//!   so a pointer to the cell is a pointer to its header and back; the vtable's functions are
//!   the cell's own, and receive only pointers to headers of their own cell type.
//! - **A `TaskRef` owns one reference.** It is made only from a reference counted for it in
//!   the state word (module `sched::task_state`, "the last reference frees"); its `Clone`
//!   counts another and its `Drop` returns its own, freeing the cell through the vtable when
//!   it was the last. So the header it points to is alive for as long as it exists.

use std::fmt;
use std::ptr::NonNull;

use super::task_state::TaskState;
use super::worker::Queued;

/// The start of every task cell ("a header starts every cell").
#[repr(C)]
pub(crate) struct Header {
    /// The state word and the join cell around it (module `sched::task_state`).
    pub(crate) state: TaskState,
    pub(crate) vtable: &'static Vtable,
}

/// A task cell's functions. Each takes a pointer to a live header of the cell type that made
/// the vtable ("a header starts every cell"); none consumes a reference.
pub(crate) struct Vtable {
    /// Polls the task once (on a worker's own stack, in the scheduler context).
    pub(crate) run: unsafe fn(NonNull<Header>),
    /// Shutdown: claims the task (waiting for a poll under way on another worker), drops the
    /// future and completes it as cancelled. A no-op on a finished task.
    pub(crate) cancel: unsafe fn(NonNull<Header>),
    /// Queues the task, which the caller has just moved to `SCHEDULED` ("one queue entry").
    pub(crate) schedule: unsafe fn(NonNull<Header>, Queued),
    /// Moves the output out, into `*out` (a `std::thread::Result` of the output type): by
    /// the single joiner, once, after completion.
    pub(crate) read_output: unsafe fn(NonNull<Header>, out: *mut ()),
    /// Frees the cell: by the party that dropped the last reference.
    pub(crate) dealloc: unsafe fn(NonNull<Header>),
}

/// A counted reference to a task, as the workers and the join handle hold it.
pub(crate) struct TaskRef {
    header: NonNull<Header>,
}

// SAFETY: a cell is only built from a `Send` future with a `Send` output (a pinned `!Send`
// future is wrapped in `task::raw::Pinned`, whose own impl states why that is sound); the
// header's shared parts are atomics and the join cell, whose slot is handed over by the
// state word; the future and output are touched only under "one poller at a time".
unsafe impl Send for TaskRef {}
// SAFETY: as above: `&TaskRef` gives only the header's atomics and the vtable's functions,
// which follow the state word's protocol.
unsafe impl Sync for TaskRef {}

impl TaskRef {
    /// Adopts one reference to `header`.
    ///
    /// # Safety
    ///
    /// `header` starts a live cell and one reference was counted for the new `TaskRef`
    /// ("a `TaskRef` owns one reference").
    #[inline]
    pub(crate) unsafe fn from_raw(header: NonNull<Header>) -> TaskRef {
        TaskRef { header }
    }

    /// A new reference to the task whose header is `header`, counted.
    ///
    /// # Safety
    ///
    /// `header` starts a live cell whose count the caller keeps above zero for the call.
    #[inline]
    pub(crate) unsafe fn clone_from_raw(header: NonNull<Header>) -> TaskRef {
        // SAFETY: the cell is alive (this function's contract).
        unsafe { header.as_ref() }.state.ref_inc();
        TaskRef { header }
    }

    #[inline(always)]
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: we own a reference, so the cell is alive ("a `TaskRef` owns one reference").
        unsafe { self.header.as_ref() }
    }

    #[inline(always)]
    pub(crate) fn as_raw(&self) -> NonNull<Header> {
        self.header
    }

    /// Polls the task once (on a worker's own stack, in the scheduler context).
    #[inline]
    pub(crate) fn run(&self) {
        // SAFETY: the header is alive (we own a reference) and the vtable is its cell's
        // ("a header starts every cell").
        unsafe { (self.header().vtable.run)(self.header) }
    }

    /// Shutdown: claims the task, drops the future and completes it as cancelled. A no-op
    /// on a finished task.
    pub(crate) fn cancel(&self) {
        // SAFETY: as in `run`.
        unsafe { (self.header().vtable.cancel)(self.header) }
    }

    /// Queues the task, which the caller has just moved to `SCHEDULED`.
    #[inline]
    pub(crate) fn schedule(&self, how: Queued) {
        // SAFETY: as in `run`.
        unsafe { (self.header().vtable.schedule)(self.header, how) }
    }

    /// Whether the task has completed (output stored, or cancelled).
    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.header().state.is_done()
    }

    /// Marks the task as registered in a worker's live list; true the first time only.
    #[inline]
    pub(crate) fn register_once(&self) -> bool {
        self.header().state.register_once()
    }
}

impl Clone for TaskRef {
    #[inline]
    fn clone(&self) -> TaskRef {
        self.header().state.ref_inc();
        TaskRef { header: self.header }
    }
}

impl Drop for TaskRef {
    #[inline]
    fn drop(&mut self) {
        if self.header().state.ref_dec() {
            // SAFETY: ours was the last reference ("the last reference frees"): nobody else
            // can reach the cell, and its vtable frees it.
            unsafe { (self.header().vtable.dealloc)(self.header) }
        }
    }
}

impl fmt::Debug for TaskRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task").field("done", &self.is_done()).finish()
    }
}
