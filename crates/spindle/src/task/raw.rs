//! The raw task cell: a [`Header`] (state word and vtable) followed by where the task may
//! run and its future or output; the vtable's functions, and the waker, which is the header's
//! address.
//!
//! See the module `task` doc for where a task runs and the invariants; the state word is
//! module `sched::task_state` (loom-checked), the header and the counted reference module
//! `sched::task_ref` ("a header starts every cell", "a `TaskRef` owns one reference").

use std::cell::UnsafeCell;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Arc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::thread;

use crate::error::Cancelled;
use crate::sched::task_ref::{Header, TaskRef, Vtable};
use crate::sched::task_state::{AfterPoll, Claim, TaskState};
use crate::sched::worker::{self, Queued, WorkerShared};
use crate::sched::RuntimeShared;

/// Where a task may run.
pub(crate) enum Home {
    /// Any worker of this runtime (a `Send` future).
    Any(Arc<RuntimeShared>),
    /// Only this worker ("pinned futures stay home").
    Pinned(Arc<WorkerShared>),
}

pub(super) enum Stage<F: Future> {
    Pending(F),
    Done(thread::Result<F::Output>),
    Taken,
}

/// A task cell ("a header starts every cell": `repr(C)`, the header first).
#[repr(C)]
pub(crate) struct Task<F: Future> {
    header: Header,
    /// Wake-ups go to the back of the queue, never the LIFO slot (module `sched::worker`,
    /// "batched tasks").
    batched: bool,
    home: Home,
    /// Touched only by the holder of RUNNING (or before the first schedule), and by the
    /// joiner after completion.
    stage: UnsafeCell<Stage<F>>,
}

impl<F> Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    const VTABLE: Vtable = Vtable {
        run: Self::run,
        cancel: Self::cancel,
        schedule: Self::schedule,
        read_output: Self::read_output,
        dealloc: Self::dealloc,
    };

    /// A new task, `SCHEDULED`, and the one reference to it; `registered` when the caller
    /// puts it in a live list at once.
    pub(super) fn allocate(home: Home, future: F, registered: bool, batched: bool) -> TaskRef {
        let task = Box::new(Task {
            header: Header { state: TaskState::new(registered), vtable: &Self::VTABLE },
            batched,
            home,
            stage: UnsafeCell::new(Stage::Pending(future)),
        });
        let header = NonNull::from(Box::leak(task)).cast::<Header>();
        // Tasks have no id of their own: the address names one while it lives.
        crate::trace::task_spawned(header.as_ptr() as u64);
        // SAFETY: the cell is alive and `TaskState::new` counted one reference, ours.
        unsafe { TaskRef::from_raw(header) }
    }

    /// The cell of `header`.
    ///
    /// # Safety
    ///
    /// `header` starts a live `Task<F>` ("a header starts every cell": only this type's
    /// vtable calls this, with its own headers).
    #[inline(always)]
    unsafe fn cell<'a>(header: NonNull<Header>) -> &'a Task<F> {
        // SAFETY: the cell is `repr(C)` with the header first, and alive (contract).
        unsafe { header.cast::<Task<F>>().as_ref() }
    }

    /// Queues the task, which the caller has just moved to SCHEDULED ("one queue entry"):
    /// `Back` for a spawn, an abort, or a task that woke itself during its poll (a yield must
    /// not run again before the others); `Woken` for a wake-up, which on its worker goes to
    /// the LIFO slot (a batched task's goes to the back). Out of line: the poll's own code
    /// stays small enough for the future's poll to be inlined into it.
    #[inline(never)]
    unsafe fn schedule(header: NonNull<Header>, how: Queued) {
        // SAFETY: the vtable's contract: a live header of a `Task<F>`.
        let task = unsafe { Self::cell(header) };
        let how = if task.batched { Queued::Back } else { how };
        // SAFETY: the caller holds a reference for the call (the vtable's contract).
        let me = unsafe { TaskRef::clone_from_raw(header) };
        let current = worker::current();
        match &task.home {
            Home::Any(rt) => match current {
                Some(w) if Arc::ptr_eq(&w.rt, rt) => w.queue_task(me, false, how),
                _ => rt.inject_task(me),
            },
            Home::Pinned(home) => match current {
                Some(w) if Arc::ptr_eq(&w.shared, home) => w.queue_task(me, true, how),
                _ => home.send_task(me),
            },
        }
    }

    fn complete(&self, result: thread::Result<F::Output>) {
        // SAFETY: we hold RUNNING ("one poller at a time"): nobody else touches the stage
        // until completion is published below.
        unsafe { *self.stage.get() = Stage::Done(result) };
        if let Some(waiter) = self.header.state.complete() {
            waiter.wake_joiner();
        }
    }

    /// Drops the future in place and completes as cancelled. The caller holds RUNNING.
    #[cold]
    fn drop_future_and_complete(&self, why: Cancelled) {
        // SAFETY: the caller holds RUNNING ("one poller at a time").
        unsafe { *self.stage.get() = Stage::Taken };
        self.complete(Err(Box::new(why)));
    }

    /// Moves the output into `*out`; only by the single joiner, after completion.
    unsafe fn read_output(header: NonNull<Header>, out: *mut ()) {
        // SAFETY: the vtable's contract.
        let task = unsafe { Self::cell(header) };
        // SAFETY: completion was observed (acquire), after which only the single joiner (the
        // JoinHandle, not Clone) touches the stage.
        let result = match std::mem::replace(unsafe { &mut *task.stage.get() }, Stage::Taken) {
            Stage::Done(r) => r,
            _ => panic!("spindle task output taken twice"),
        };
        // SAFETY: the join handle of a `Task<F>` passes a slot for `F::Output`'s result.
        unsafe { out.cast::<thread::Result<F::Output>>().write(result) };
    }

    unsafe fn run(header: NonNull<Header>) {
        // SAFETY: the vtable's contract.
        let task = unsafe { Self::cell(header) };
        let state = &task.header.state;
        if !state.start_poll() {
            return; // finished (cancelled) meanwhile
        }
        if state.is_aborted() {
            return task.drop_future_and_complete(Cancelled::HANDLE);
        }
        // A waker borrowed from the caller's reference for the poll: no reference count
        // traffic (a future that keeps the waker clones it, which counts a reference).
        // SAFETY: the waker's data is a live header; ManuallyDrop keeps it from returning a
        // reference it never counted, and the caller's reference outlives the poll.
        let waker = ManuallyDrop::new(unsafe { Waker::from_raw(raw_waker(header)) });
        let mut cx = Context::from_waker(&waker);
        // SAFETY: RUNNING grants us the stage ("one poller at a time").
        let stage = unsafe { &mut *task.stage.get() };
        let Stage::Pending(future) = stage else { return };
        // SAFETY: the future stays at this address (inside the boxed cell) until it is
        // dropped in place.
        let future = unsafe { Pin::new_unchecked(future) };
        let result = match catch_unwind(AssertUnwindSafe(|| future.poll(&mut cx))) {
            Ok(Poll::Ready(v)) => Ok(v),
            Err(payload) => Err(payload),
            Ok(Poll::Pending) => {
                match state.end_poll() {
                    // Woken during the poll: run again, after the others.
                    // SAFETY: the caller's reference keeps the header alive.
                    AfterPoll::Requeue => unsafe { Self::schedule(header, Queued::Back) },
                    // Aborted during the poll: its scheduling attempt saw RUNNING.
                    // SAFETY: as above.
                    AfterPoll::Wait if state.is_aborted() => unsafe {
                        wake_by_ref(header.as_ptr() as *const ())
                    },
                    AfterPoll::Wait => {}
                }
                return;
            }
        };
        // SAFETY: still RUNNING; drop the future in place before storing the output.
        unsafe { *task.stage.get() = Stage::Taken };
        task.complete(result);
    }

    unsafe fn cancel(header: NonNull<Header>) {
        // SAFETY: the vtable's contract.
        let task = unsafe { Self::cell(header) };
        loop {
            match task.header.state.claim() {
                Claim::Claimed => return task.drop_future_and_complete(Cancelled::SHUTDOWN),
                Claim::Done => return,
                // Another worker is polling it (it has not seen the shutdown yet): the poll
                // ends soon, then the claim succeeds.
                Claim::Busy => thread::yield_now(),
            }
        }
    }

    unsafe fn dealloc(header: NonNull<Header>) {
        // SAFETY: the cell was made by `Box::new` in `new` and the last reference is gone
        // ("the last reference frees"): nobody else reaches it.
        drop(unsafe { Box::from_raw(header.cast::<Task<F>>().as_ptr()) });
    }
}

/// The handle's abort: mark it, and queue it if idle so that a worker drops the future
/// promptly.
pub(super) fn abort(task: &TaskRef) {
    crate::trace::task_cancelled(task.as_raw().as_ptr() as u64);
    let state = &task.header().state;
    state.set_aborted();
    if state.schedule_idle() {
        task.schedule(Queued::Back);
    }
}

/// The task is its own waker: the waker's data is the header's address, a clone counts a
/// reference and a drop returns one; waking schedules the task.
static WAKER_VTABLE: RawWakerVTable = RawWakerVTable::new(clone_waker, wake, wake_by_ref, drop_waker);

fn raw_waker(header: NonNull<Header>) -> RawWaker {
    RawWaker::new(header.as_ptr() as *const (), &WAKER_VTABLE)
}

/// # Safety
///
/// `data` is a live header's address (every waker of this vtable holds a reference, or
/// borrows a poll's).
unsafe fn header_of(data: *const ()) -> NonNull<Header> {
    // SAFETY: a waker's data is a header's address, never null (contract).
    unsafe { NonNull::new_unchecked(data as *mut Header) }
}

unsafe fn clone_waker(data: *const ()) -> RawWaker {
    // SAFETY: the waker being cloned keeps the header alive (`header_of`'s contract).
    let header = unsafe { header_of(data) };
    // SAFETY: as above; the new waker owns the counted reference.
    std::mem::forget(unsafe { TaskRef::clone_from_raw(header) });
    raw_waker(header)
}

unsafe fn wake(data: *const ()) {
    // SAFETY: the waker's own reference, returned when `task` drops.
    let task = unsafe { TaskRef::from_raw(header_of(data)) };
    if task.header().state.wake() {
        task.schedule(Queued::Woken);
    }
}

unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: the waker keeps the header alive for the call.
    let header = unsafe { header_of(data) };
    // SAFETY: as above.
    let h = unsafe { header.as_ref() };
    if h.state.wake() {
        // SAFETY: as above; the vtable is the cell's ("a header starts every cell").
        unsafe { (h.vtable.schedule)(header, Queued::Woken) };
    }
}

unsafe fn drop_waker(data: *const ()) {
    // SAFETY: the waker's own reference, returned here.
    drop(unsafe { TaskRef::from_raw(header_of(data)) });
}

impl<F: Future> Drop for Task<F> {
    fn drop(&mut self) {
        if let Home::Pinned(home) = &self.home {
            if !home.is_current_thread() {
                if let Stage::Pending(future) = std::mem::replace(self.stage.get_mut(), Stage::Taken) {
                    // "Pinned futures stay home": never dropped off their home thread.
                    std::mem::forget(future);
                }
            }
        }
    }
}

/// A pinned task's future, which need not be `Send`.
pub(super) struct Pinned<F>(pub(super) F);

// SAFETY: a `Pinned` future lives in a task whose home is one worker (`Home::Pinned`): it is
// created on that worker's thread (`spawn_local` checks), polled only there (pinned tasks are
// queued only on their home and never stolen), and dropped only there ("pinned futures stay
// home": by its poll, its home's shutdown, or leaked by `Task::drop` elsewhere). So the
// future never crosses threads; only the references to the task and its `Send` output do.
unsafe impl<F> Send for Pinned<F> {}

impl<F: Future> Future for Pinned<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: structural pinning: the inner future is never moved out of `Pinned`.
        unsafe { self.map_unchecked_mut(|p| &mut p.0) }.poll(cx)
    }
}
