//! [`Switcher`]: what a worker's context switches keep between them: the running fiber, the
//! scheduler context's saved stack pointer and sanitizer context, the fiber that finished
//! and awaits recycling, the stack pool, the registry of fibers that switched away, and the
//! count of live fibers. Its methods start a fiber (stack, owner, first frame), register it,
//! and recycle it; the switches themselves, which also need the queues and the loop's
//! flags, are the worker's (module `switch`).
//!
//! Invariants: the module `sched::worker` doc's "owner-only state", "one current fiber",
//! "a started fiber owns itself" and "recycled off its own stack"; module `sched::registry`'s
//! "registered once it has switched away" and "entries borrow the run reference".

use std::cell::{Cell, RefCell};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::WorkerShared;
use crate::fiber::arch;
use crate::fiber::block::FiberPtr;
use crate::fiber::control::{FiberRef, Header};
use crate::fiber::sanitizer;
use crate::fiber::stack::Stack;
use crate::fiber::stack_pool::StackPool;
use crate::sched::metrics::{bump, FiberInfo, WorkerStats};
use crate::sched::registry::Registry;

/// The switch state of one worker (module doc).
pub(super) struct Switcher {
    /// The running fiber ("one current fiber").
    current: Cell<Option<FiberRef>>,
    /// Saved stack pointer of the scheduler context while a fiber runs.
    sched_sp: Cell<usize>,
    /// What ASan and TSan know of the scheduler context (zero-sized unless built for them).
    san: sanitizer::Context,
    /// A fiber that finished and awaits recycling by the next context.
    finished: Cell<Option<FiberRef>>,
    pool: RefCell<StackPool>,
    registry: RefCell<Registry>,
    /// Started fibers not yet recycled (`WorkerStats::parked_fibers` publishes it): the
    /// registry holds only those that have switched away.
    live_fibers: Cell<u64>,
    /// The worker's `WorkerShared`: the owner its fibers' headers point at once started
    /// (`Header::owner_ptr`), and the statistics the starts and recycles are published to. A
    /// counted handle of its own, as `Timers` keeps its owner's address: the switch path then
    /// needs nothing passed in.
    owner: Arc<WorkerShared>,
}

impl Switcher {
    /// Made on the worker's own thread (the scheduler context's sanitizer context is that
    /// thread's).
    pub(super) fn new(pool: StackPool, owner: Arc<WorkerShared>) -> Switcher {
        let san = sanitizer::Context::default();
        san.this_thread();
        Switcher {
            current: Cell::new(None),
            sched_sp: Cell::new(0),
            san,
            finished: Cell::new(None),
            pool: RefCell::new(pool),
            registry: RefCell::new(Registry::default()),
            live_fibers: Cell::new(0),
            owner,
        }
    }

    /// Whether a fiber is running (the caller is that fiber), without cloning it.
    #[inline]
    pub(super) fn in_fiber(&self) -> bool {
        // SAFETY: `current` is owner-only (we are on the worker's thread) and no reference
        // into the cell is alive; we only read whether it holds a fiber.
        unsafe { (*self.current.as_ptr()).is_some() }
    }

    /// Runs `f` on the running fiber (`None` in the scheduler context), borrowing it in place.
    /// `f` must not reach `current` again (none of the callers' closures touch the worker).
    #[inline]
    pub(super) fn with_current<R>(&self, f: impl FnOnce(Option<&FiberRef>) -> R) -> R {
        // SAFETY: `current` is owner-only ("owner-only state": we are on the worker's thread),
        // and it is not written while `f` runs: `f` only reads the fiber (callers in this
        // module and module `switch`), and no switch happens inside it.
        f(unsafe { (*self.current.as_ptr()).as_ref() })
    }

    /// Takes the running fiber out of `current` (it is switching away, or finishing).
    #[inline]
    pub(super) fn take_current(&self) -> Option<FiberRef> {
        self.current.take()
    }

    /// Makes `fiber` the running one.
    #[inline]
    pub(super) fn set_current(&self, fiber: FiberRef) {
        self.current.set(Some(fiber));
    }

    /// The scheduler context's save slot, for the switches into and out of it.
    #[inline]
    pub(super) fn sched_sp_slot(&self) -> *mut usize {
        self.sched_sp.as_ptr()
    }

    /// The scheduler context's saved stack pointer, to switch back to it.
    #[inline]
    pub(super) fn sched_sp(&self) -> usize {
        self.sched_sp.get()
    }

    /// What the sanitizers know of the scheduler context.
    #[inline]
    pub(super) fn san(&self) -> &sanitizer::Context {
        &self.san
    }

    /// A stack of `len` bytes from the pool, with an error that says what failed.
    pub(super) fn alloc_stack(&self, len: usize) -> io::Result<Stack> {
        self.pool.borrow_mut().get(len).map_err(|err| stack_error(len, err))
    }

    /// [`alloc_stack`](Self::alloc_stack) into `into` (a new fiber's header, empty), in place.
    #[inline]
    pub(super) fn alloc_stack_into(&self, len: usize, into: &Cell<Option<Stack>>) -> io::Result<()> {
        self.pool.borrow_mut().get_into(len, into).map_err(|err| stack_error(len, err))
    }

    /// Makes `fiber` ready to be switched to: on its first run, gives it a stack and its
    /// owner. Returns the stack pointer to switch to, or `None` when it could not start (it is
    /// then completed with the error as its panic payload).
    #[inline]
    pub(super) fn prepare(&self, fiber: &FiberRef) -> Option<usize> {
        let header = &fiber.header;
        if header.started() {
            return Some(header.sp.get());
        }
        self.start(fiber)
    }

    /// The first-run half of [`prepare`](Self::prepare): once per fiber, so out of line but
    /// not cold.
    #[inline(never)]
    fn start(&self, fiber: &FiberRef) -> Option<usize> {
        let owner = &self.owner;
        let header = &fiber.header;
        // SAFETY: `stack` is owner-only ("owner-only fields", module `fiber::control`): we are
        // the worker starting the fiber, and only read whether it holds a stack.
        if unsafe { (*header.stack.as_ptr()).is_none() } {
            // A fiber spawned on a worker got its stack at spawn; one spawned from outside
            // the runtime gets it now, and a failure here can only reach its joiner.
            match self.alloc_stack(header.stack_size) {
                Ok(stack) => header.stack.set(Some(stack)),
                Err(err) => {
                    crate::report::error(format_args!(
                        "spindle: fiber {} ({}): {err}",
                        header.id,
                        header.display_name()
                    ));
                    fiber.stage.abort_unstarted(header, Box::new(err.to_string()));
                    return None;
                }
            }
        }
        // SAFETY: owner-only, as above; the stack is read in place (not moved out and back)
        // and the slot is not written while this reference lives.
        let stack = unsafe { (*header.stack.as_ptr()).as_ref() }.expect("a starting fiber has a stack");
        // SAFETY: the stack is fresh or recycled (nothing runs on it), 16-aligned at the top,
        // and has a guard page below (Stack's contract).
        let sp = unsafe { arch::init_stack(stack.top(), super::switch::fiber_entry, std::ptr::null_mut()) };
        // SAFETY: the stack was just prepared and has not run; `sched_sp` holds the scheduler
        // context's saved stack pointer whenever a fiber of this worker runs ("fibers stay
        // home"), for as long as the worker lives, which outlives its fibers.
        unsafe { arch::link_stack(stack.top(), self.sched_sp.as_ptr()) };
        header.guard.set(stack.guard());
        header.san.start_fiber(stack.bottom(), stack.top());
        header.sp.set(sp);
        header.set_owner(owner);
        // Not registered yet: only at its first switch away (`register`).
        bump(&owner.stats.fibers_started, 1);
        self.live_fibers.set(self.live_fibers.get() + 1);
        owner.stats.parked_fibers.store(self.live_fibers.get(), Ordering::Relaxed);
        Some(sp)
    }

    /// Enters the running fiber `me` in the registry, unless it is there already: called
    /// before every switch away that does not finish it (module `sched::registry`,
    /// "registered once it has switched away"). A fiber that runs to its end without one
    /// (the common short fiber) never costs a registry entry.
    #[inline]
    pub(super) fn register(&self, me: &FiberRef) {
        if me.header.slot.get() == usize::MAX {
            self.register_first(FiberRef::as_ptr(me), &me.header.slot);
        }
    }

    /// The first switch away's half of [`register`](Self::register): once per fiber at most.
    /// Takes the cell and its header's slot by value and by reference: a reference to the
    /// caller's `FiberRef` would make the switch path keep it in memory.
    #[inline(never)]
    fn register_first(&self, fiber: FiberPtr, slot: &Cell<usize>) {
        slot.set(self.registry.borrow_mut().insert(fiber));
    }

    /// Hands the running fiber `me`, which has ended, to the next context for recycling.
    #[inline(always)]
    pub(super) fn set_finished(&self, me: FiberRef) {
        let previous = self.finished.replace(Some(me));
        debug_assert!(previous.is_none(), "two finished fibers awaiting recycling");
    }

    /// Whether `me` is the fiber that finished and awaits recycling (it leaves for good).
    pub(super) fn is_finished_fiber(&self, me: *const Header) -> bool {
        let done = self.finished.take();
        let is = done.as_ref().is_some_and(|f| std::ptr::eq(&f.header, me));
        self.finished.set(done);
        is
    }

    /// Takes the fiber that finished before the switch that brought us here, if any: the
    /// caller recycles it ("recycled off its own stack").
    #[inline]
    pub(super) fn take_finished(&self) -> Option<FiberRef> {
        self.finished.take()
    }

    /// Recycles a fiber that finished: its stack back to the pool, its registry entry
    /// dropped, the live count published in `stats`. Once per fiber: out of line, not cold.
    #[inline(never)]
    pub(super) fn recycle(&self, done: Option<FiberRef>, stats: &WorkerStats) {
        if let Some(done) = done {
            done.header.san.destroy_fiber();
            self.pool.borrow_mut().put_from(&done.header.stack);
            let slot = done.header.slot.get();
            if slot != usize::MAX {
                self.registry.borrow_mut().remove(slot);
            }
            self.live_fibers.set(self.live_fibers.get() - 1);
            stats.parked_fibers.store(self.live_fibers.get(), Ordering::Relaxed);
            // The run reference goes last, once the registry no longer points at the cell.
            drop(done);
        }
    }

    /// Runs the body of the current fiber; called by `fiber_entry` on the fiber's stack.
    pub(super) fn run_current(&self) {
        let cell: FiberPtr = self.with_current(|f| FiberRef::as_ptr(f.expect("fiber entry without a fiber")));
        // SAFETY: the fiber's run reference lives until it is recycled, after this call
        // returns ("a started fiber owns itself"), so the cell outlives this call; no RefCell
        // borrow is held while the user's closure runs.
        let cell = unsafe { &*cell };
        if let Some(why) = cell.header.cancellation() {
            // Cancelled before its first run: complete without running the closure.
            cell.stage.abort_unstarted(&cell.header, Box::new(why));
            return;
        }
        cell.stage.run(&cell.header);
    }

    /// Unwinds the running fiber if the runtime is cancelling it (and it is not unwinding yet).
    /// Inlined: after every yield and park, the common answer is one relaxed load.
    #[inline]
    pub(super) fn check_cancel(&self) {
        if self.current_cancelled() {
            self.unwind_cancelled();
        }
    }

    /// Whether the running fiber has been cancelled (its next park unwinds).
    #[inline]
    pub(super) fn current_cancelled(&self) -> bool {
        self.with_current(|f| f.is_some_and(|f| f.header.is_cancelled()))
    }

    /// The cancelled half of [`check_cancel`](Self::check_cancel).
    #[cold]
    #[inline(never)]
    fn unwind_cancelled(&self) {
        let cancelled = self.with_current(|f| {
            let f = f?;
            let why = f.header.cancellation()?;
            Some((f.header.id, f.header.display_name().to_owned(), why))
        });
        if let Some((id, name, why)) = cancelled {
            if !std::thread::panicking() {
                crate::fiber::cancel::begin(id, &name);
                std::panic::resume_unwind(Box::new(why));
            }
        }
    }

    /// The registered fibers (parked, or runnable after a switch away), for shutdown.
    pub(super) fn registered(&self) -> Vec<FiberPtr> {
        self.registry.borrow().iter().collect()
    }

    /// How many fibers are registered.
    pub(super) fn registered_len(&self) -> usize {
        self.registry.borrow().len()
    }

    /// The registered fibers as [`FiberInfo`], for the dump.
    pub(super) fn dump(&self) -> Vec<FiberInfo> {
        let index = self.owner.index;
        self.registry
            .borrow()
            .iter()
            .map(|f| {
                // SAFETY: a registered pointer is to a live cell (module `sched::registry`,
                // "entries borrow the run reference"); nothing is recycled while we iterate.
                unsafe { &*f }
            })
            .map(|f| FiberInfo {
                id: f.header.id,
                name: f.header.name.as_deref().map(str::to_owned),
                worker: index,
                waiting_on: if f.header.park.is_parked() { f.header.waiting_on.get() } else { "runnable" },
                spawned_at: f.header.site,
            })
            .collect()
    }

    /// Whether the stack pool has pages an idle worker should give back.
    pub(super) fn pool_needs_trim(&self) -> bool {
        self.pool.borrow().needs_trim()
    }

    /// Gives the idle stack pool's pages back.
    pub(super) fn trim_pool(&self) {
        self.pool.borrow_mut().trim();
    }
}

/// The error of a fiber stack that could not be had, saying what failed.
#[cold]
fn stack_error(len: usize, err: io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("could not allocate a {len} byte fiber stack: {err}"))
}
