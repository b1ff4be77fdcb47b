//! The fiber control block: one allocation per fiber holding its header, its closure and,
//! once it has run, its result.
//!
//! # Handles
//!
//! A `FiberCell<StageImpl<F, T>>` is allocated and counted by module `fiber::block` (which
//! recycles the memory; the count is in the header) and seen through two unsized views:
//! [`FiberRef`] (a `FiberCell<dyn Stage>`), which the scheduler, the registry of started
//! fibers and waiters hold, and `OutputRef<T>` (a `FiberCell<dyn Output<T>>`), which the
//! `JoinHandle` holds. The header sits at offset 0, so reaching it costs no virtual call and
//! no offset computation.
//!
//! # Invariants
//!
//! - **Owner-only fields.** `sp`, `stack`, `guard`, `slot`, `waker`, `locals` and the stage
//!   before completion are touched only by the thread of the worker that runs the fiber, or by
//!   the thread that creates the fiber before the fiber is published to any queue. A fiber
//!   never migrates once started, so "the owner" is well defined from its first run on.
//! - **Shared words.** Other threads write only the park word (`park`, module
//!   `fiber::park_word`, loom-checked), the cancel word, and the completion (`join`, module
//!   `fiber::completion`, loom-checked).
//! - **Result before completion.** The fiber writes its result, then completes (release),
//!   which wakes the joiner if one registered. The result is read only after completion was
//!   observed (acquire), by the single joiner.

use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Arc;
use std::thread;

use super::completion::Completion;
use super::park_word::ParkState;
use super::stack::Stack;
use crate::error::{CancelReason, Cancelled};
use crate::sched::worker::WorkerShared;

pub(crate) use super::block::FiberRef;

/// Everything the scheduler needs to know about a fiber, whatever its closure.
pub(crate) struct Header {
    /// The cell's reference count (module `fiber::block`, "counted like `Arc`"). In the
    /// header, at a fixed offset, rather than before the cell, whose offset would then depend
    /// on the closure's alignment.
    pub(crate) refs: super::block::Count,
    pub(crate) id: u64,
    pub(crate) name: Option<super::Name>,
    /// Where the fiber was spawned (the caller of the spawn function): named by the watchdog
    /// and the dump.
    pub(crate) site: &'static std::panic::Location<'static>,
    /// Stack size in bytes, guard page included, rounded to pages.
    pub(crate) stack_size: usize,
    /// Saved stack pointer while suspended (owner-only).
    pub(crate) sp: Cell<usize>,
    /// The stack: given by the spawner before the fiber is published (a spawn on a worker),
    /// else by the owner on the first run; taken back when the fiber has finished (owner-only).
    pub(crate) stack: Cell<Option<Stack>>,
    /// What ASan and TSan know of this fiber (zero-sized unless built for them; owner-only).
    pub(crate) san: super::sanitizer::Context,
    /// The guard page range of `stack`, readable from the overflow signal handler.
    pub(crate) guard: Cell<(usize, usize)>,
    /// Set at shutdown or by `JoinHandle::cancel` (any thread), to the [`CancelReason`] plus
    /// one: the fiber unwinds with a [`Cancelled`] payload at its next suspension point, or
    /// never starts.
    cancel: std::sync::atomic::AtomicU8,
    /// Index in the owner's registry (owner-only): `usize::MAX` until the fiber's first switch
    /// away (module `sched::registry`, "registered once it has switched away").
    pub(crate) slot: Cell<usize>,
    /// What the fiber last parked on (owner-only; read by the dump on the owner's thread).
    pub(crate) waiting_on: Cell<&'static str>,
    /// The fiber's waker, created on first use and dropped when it finishes (owner-only).
    pub(crate) waker: Cell<Option<std::task::Waker>>,
    /// The span the fiber's body runs in (feature `tracing`, module `fiber::context`): set
    /// by the spawner before publication, taken by the first run (owner-only). Boxed: a
    /// `Span` inline made the header too large for the spawn to write it in place (it was
    /// built aside and copied with `memcpy` at every spawn), and most fibers have none.
    #[cfg(feature = "tracing")]
    pub(crate) span: Cell<Option<Box<tracing::Span>>>,
    /// The fiber's `fiber_local!` values (owner-only; module `fiber::local`).
    pub(crate) locals: std::cell::RefCell<super::local::LocalMap>,
    /// Park word (module `fiber::park_word`): written by the fiber and its unparkers.
    pub(crate) park: ParkState,
    /// The worker that started the fiber: null until its first run, then set once (release)
    /// to its `WorkerShared`, uncounted: only a rescheduler of the parked fiber follows it,
    /// and takes a count of its own first (module `sched::worker`, "owners outlive their
    /// reschedulers"). A counted pointer cost two read-modify-writes per fiber, a
    /// `OnceLock` a trip through `Once`; this is one store.
    owner: AtomicPtr<WorkerShared>,
    /// Completion and the joiner's waiter (module `fiber::completion`).
    pub(crate) join: Completion,
    /// Set before publication for a `spawn_local` fiber (or one placed on a chosen worker): it
    /// starts on the worker it was queued on and is never shared with other workers, even
    /// before its first run. Also set later by that worker's own thread for an unstarted fiber
    /// in its local run queue that a fiber of the worker joins (`Worker::keeps_for_join`):
    /// only that thread can move such a fiber, so the flag is read and written by one thread
    /// at a time, with the queue's hand-overs in between (relaxed suffices).
    pinned: AtomicBool,
}

// SAFETY: the Cell and UnsafeCell fields follow the invariants of the module doc: owner-only
// fields are used by one thread at a time with happens-before edges at every hand-over (the
// queue that publishes a new fiber), and the joiner's waiter is handed over through the completion word.
unsafe impl Sync for Header {}
// SAFETY: as above; `Stack` is Send and the other fields are plain data or Send + Sync.
unsafe impl Send for Header {}

impl Header {
    pub(crate) fn new(
        id: u64,
        name: Option<super::Name>,
        stack_size: usize,
        site: &'static std::panic::Location<'static>,
    ) -> Header {
        Header {
            refs: super::block::Count::new(),
            id,
            name,
            site,
            stack_size,
            sp: Cell::new(0),
            stack: Cell::new(None),
            guard: Cell::new((0, 0)),
            cancel: std::sync::atomic::AtomicU8::new(0),
            slot: Cell::new(usize::MAX),
            waiting_on: Cell::new("not started"),
            san: super::sanitizer::Context::default(),
            waker: Cell::new(None),
            #[cfg(feature = "tracing")]
            span: Cell::new(None),
            locals: std::cell::RefCell::new(Vec::new()),
            park: ParkState::new(),
            owner: AtomicPtr::new(std::ptr::null_mut()),
            join: Completion::new(),
            pinned: AtomicBool::new(false),
        }
    }

    /// Whether the fiber is pinned to the worker it is queued on (see the field).
    #[inline]
    pub(crate) fn is_pinned(&self) -> bool {
        self.pinned.load(Ordering::Relaxed)
    }

    /// Pins the fiber to the worker it is queued on: by its spawner before publication, or by
    /// that worker's thread while the unstarted fiber sits in its local run queue.
    #[inline]
    pub(crate) fn pin(&self) {
        self.pinned.store(true, Ordering::Relaxed);
    }

    /// Whether the fiber has run (it has an owner worker from its first run on).
    pub(crate) fn started(&self) -> bool {
        !self.owner.load(Ordering::Acquire).is_null()
    }

    /// Records the worker that starts the fiber. Called once, by that worker, on the first run.
    #[inline]
    pub(crate) fn set_owner(&self, owner: &Arc<WorkerShared>) {
        // Not a swap: only the one worker that popped the unstarted fiber from a queue starts
        // it ("owner-only fields"), so nobody else writes the word; others only read it.
        assert!(self.owner.load(Ordering::Relaxed).is_null(), "fiber started twice");
        self.owner.store(Arc::as_ptr(owner).cast_mut(), Ordering::Release);
    }

    /// The `WorkerShared` of the worker that started the fiber (null if it has not started),
    /// uncounted: valid to follow only under module `sched::worker`'s "owners outlive their
    /// reschedulers".
    #[inline]
    pub(crate) fn owner_ptr(&self) -> *const WorkerShared {
        self.owner.load(Ordering::Acquire)
    }

    pub(crate) fn is_complete(&self) -> bool {
        self.join.is_complete()
    }

    /// Publishes the result stored by the stage and wakes the joiner, if one waits.
    fn complete(&self) {
        self.join.complete();
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) != 0
    }

    /// The payload the fiber unwinds with, if it is cancelled.
    pub(crate) fn cancellation(&self) -> Option<Cancelled> {
        match self.cancel.load(Ordering::Relaxed) {
            0 => None,
            1 => Some(Cancelled::SHUTDOWN),
            _ => Some(Cancelled::HANDLE),
        }
    }

    /// Marks the fiber cancelled (the first reason stays).
    pub(crate) fn set_cancelled(&self, reason: CancelReason) {
        let code = match reason {
            CancelReason::Shutdown => 1,
            _ => 2,
        };
        let _ = self.cancel.compare_exchange(0, code, Ordering::Relaxed, Ordering::Relaxed);
    }

    pub(crate) fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or("<unnamed>")
    }
}

impl Drop for Header {
    /// Inlined into the block's free: the common header, of a fiber that finished, has no
    /// stack left, and this is one load and a branch.
    #[inline]
    fn drop(&mut self) {
        if self.stack.get_mut().is_some() {
            self.drop_stack();
        }
    }
}

impl Header {
    /// The stack of a fiber that never started (freed) or never finished (leaked).
    #[cold]
    #[inline(never)]
    fn drop_stack(&mut self) {
        let owner = *self.owner.get_mut();
        if let Some(stack) = self.stack.take() {
            if owner.is_null() {
                // Given at spawn and never run on: an ordinary free stack.
                drop(stack);
                return;
            }
            // The fiber started and never finished, and nothing can resume it: its frames may
            // hold pinned values that other objects still point to, so the memory must not be
            // reused. Leak it (address space only; its resident pages stay).
            crate::report::warn(format_args!(
                "spindle: fiber {} ({}) was dropped while suspended; its stack is leaked",
                self.id,
                self.display_name()
            ));
            std::mem::forget(stack);
            // Its fiber-locals belong to its thread and may not be `Send`: leak them too.
            std::mem::forget(std::mem::take(self.locals.get_mut()));
        }
    }
}

/// A header followed by the fiber's typed stage. `repr(C)` fixes the stage's offset, which
/// [`Output::fiber_ref`] relies on to get from the stage back to its cell, and puts the header
/// at offset 0 whatever the stage's alignment.
#[repr(C)]
pub(crate) struct FiberCell<S: ?Sized> {
    pub(crate) header: Header,
    pub(crate) stage: S,
}

impl<S: ?Sized> std::fmt::Debug for FiberCell<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fiber").field("id", &self.header.id).field("name", &self.header.name).finish()
    }
}

/// The scheduler's view of a fiber's closure.
pub(crate) trait Stage: Send + Sync {
    /// Runs the closure on the current (fiber) stack, catching a panic, stores the result and
    /// completes the fiber. Called once, by the owner, on the fiber's own stack.
    fn run(&self, header: &Header);
    /// Drops the closure without running it and completes with `payload` as the error
    /// (as if the closure had panicked with it).
    fn abort_unstarted(&self, header: &Header, payload: Box<dyn Any + Send>);
}

/// The join handle's view of a fiber's result.
pub(crate) trait Output<T>: Send + Sync {
    /// Takes the result. Only after `header.is_complete()`, once.
    fn take(&self) -> thread::Result<T>;
    /// The scheduler's handle on the same fiber (a new strong reference to its cell).
    fn fiber_ref(&self) -> FiberRef;
}

/// What a fiber runs, called once on the fiber: a `Send` closure, or a `spawn_local`
/// closure in its wrapper (module `fiber::spawn`), which then sits in the cell directly rather
/// than inside one more closure (each wrapper was one more copy of the closure at the spawn).
pub(crate) trait Job<T>: Send {
    fn call(self) -> T;
}

impl<F: FnOnce() -> T + Send, T> Job<T> for F {
    #[inline(always)]
    fn call(self) -> T {
        self()
    }
}

/// Where a stage is (`StageImpl::phase`): which of the slot's fields holds a value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// The slot holds the job.
    Pending,
    /// The job was taken out to run; the slot holds nothing.
    Running,
    /// The slot holds the result.
    Done,
    /// The result was taken; the slot holds nothing.
    Taken,
}

/// The job, then its result, in the same memory. `repr(C)`: both at offset 0, so a spawn
/// writes the job straight into its place in the block (an enum's payload has no address to
/// write to: its value was built on the stack and copied in, and copied again through every
/// wrapper).
#[repr(C)]
union Slot<F, T> {
    job: ManuallyDrop<F>,
    result: ManuallyDrop<thread::Result<T>>,
}

/// The typed stage of a fiber running `F`, which returns `T`.
pub(crate) struct StageImpl<F, T> {
    phase: Cell<Phase>,
    slot: UnsafeCell<Slot<F, T>>,
}

// SAFETY: the phase and the slot are touched by the creator before publication, then by the
// owner worker ("owner-only fields"), then by the single joiner after completion ("result
// before completion"). F and T move between those threads, hence the Send bounds.
unsafe impl<F: Send, T: Send> Sync for StageImpl<F, T> {}

impl<F, T> StageImpl<F, T> {
    /// Makes a stage at `stage`, whose job `write_job(job, input)` writes in place.
    ///
    /// # Safety
    ///
    /// `stage` is valid for writes of a `StageImpl<F, T>` and holds no value (it is
    /// overwritten); `write_job` writes a whole `F` at the pointer it is given.
    #[inline(always)]
    pub(crate) unsafe fn write_pending<A>(stage: *mut Self, input: A, write_job: impl FnOnce(*mut F, A)) {
        // SAFETY: `stage` is valid for writes (the caller's contract).
        unsafe { std::ptr::addr_of_mut!((*stage).phase).write(Cell::new(Phase::Pending)) };
        // SAFETY: as above; the union's fields start at its start (`repr(C)`), and
        // `ManuallyDrop<F>` has `F`'s layout.
        let job = unsafe { std::ptr::addr_of_mut!((*stage).slot) }.cast::<F>();
        write_job(job, input);
    }

    /// The job's place in the slot.
    fn job(&self) -> *mut F {
        self.slot.get().cast::<F>()
    }

    /// The result's place in the slot.
    fn result(&self) -> *mut thread::Result<T> {
        self.slot.get().cast::<thread::Result<T>>()
    }
}

impl<F, T> Drop for StageImpl<F, T> {
    fn drop(&mut self) {
        match self.phase.get() {
            // SAFETY: `Pending`: the slot holds the job, dropped once, here.
            Phase::Pending => unsafe { std::ptr::drop_in_place(self.job()) },
            // SAFETY: `Done`: the slot holds the result, dropped once, here.
            Phase::Done => unsafe { std::ptr::drop_in_place(self.result()) },
            Phase::Running | Phase::Taken => {}
        }
    }
}

impl<F, T> Stage for StageImpl<F, T>
where
    F: Job<T>,
    T: Send,
{
    fn run(&self, header: &Header) {
        // Owner-only before completion ("owner-only fields"): nobody else touches the phase
        // or the slot.
        assert_eq!(self.phase.get(), Phase::Pending, "fiber stage run twice");
        // SAFETY: `Pending`: the slot holds the job, moved out once, here (the phase says
        // `Running` next).
        let job = unsafe { self.job().read() };
        self.phase.set(Phase::Running);
        let result = self.result();
        let phase = &self.phase;
        #[cfg(feature = "tracing")]
        let span = header.span.take();
        // The result is written into the slot by the closure that `catch_unwind` calls,
        // rather than returned through it (two copies of the result in `catch_unwind`).
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            // Entered around the body, and exited as it returns or unwinds.
            #[cfg(feature = "tracing")]
            let _span = span.map(|span| span.entered());
            let value = job.call();
            // SAFETY: `Running`: the slot holds nothing.
            unsafe { result.write(Ok(value)) };
            phase.set(Phase::Done);
        }));
        if header.is_cancelled() {
            // Only a cancelled fiber records its unwinding (`cancel::begin`, called for a
            // fiber whose cancel word is set, which is never cleared): one relaxed load
            // instead of a thread-local access for every fiber that ends.
            super::cancel::end();
        }
        if let Err(payload) = caught {
            // SAFETY: `Running` (the job panicked before its result was written): the slot
            // holds nothing.
            unsafe { result.write(Err(payload)) };
            self.phase.set(Phase::Done);
        }
        // Fiber-locals are dropped on the fiber, before completion is published.
        if !header.locals.borrow().is_empty() {
            let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                super::local::drop_all(&header.locals)
            }));
            if let Err(payload) = dropped {
                // SAFETY: `Done`: the slot holds the result, owner-only. A panic replaces
                // (and drops) an `Ok` result; the first panic stays.
                let result = unsafe { &mut *result };
                if result.is_ok() {
                    *result = Err(payload);
                }
            }
        }
        header.complete();
    }

    fn abort_unstarted(&self, header: &Header, payload: Box<dyn Any + Send>) {
        // Owner-only before completion ("owner-only fields").
        if self.phase.get() == Phase::Pending {
            // Drop the job before publishing completion.
            self.phase.set(Phase::Running);
            // SAFETY: it was `Pending`: the slot holds the job, dropped once, here (the phase
            // says `Running` already, so an unwinding drop leaves nothing to drop again).
            unsafe { std::ptr::drop_in_place(self.job()) };
            // SAFETY: `Running`: the slot holds nothing.
            unsafe { self.result().write(Err(payload)) };
            self.phase.set(Phase::Done);
            header.complete();
        }
    }
}

impl<F, T> Output<T> for StageImpl<F, T>
where
    F: Job<T> + 'static,
    T: Send + 'static,
{
    fn take(&self) -> thread::Result<T> {
        // The caller observed COMPLETE (acquire) and is the single joiner ("result before
        // completion"), so nobody else touches the phase or the slot any more.
        assert_eq!(self.phase.get(), Phase::Done, "fiber result taken before completion or twice");
        self.phase.set(Phase::Taken);
        // SAFETY: `Done`: the slot holds the result, moved out once, here (the phase says
        // `Taken` now).
        unsafe { self.result().read() }
    }

    fn fiber_ref(&self) -> FiberRef {
        // SAFETY: every StageImpl lives as the `stage` field of a cell made by
        // `block::Building::fill` (fiber::Builder::build_with), which the caller's handle keeps
        // alive.
        unsafe { FiberRef::from_stage(self) }
    }
}
