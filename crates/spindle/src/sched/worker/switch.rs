//! Context switches: starting, resuming, yielding, parking and finishing fibers, and
//! waking one ([`reschedule`]).
//!
//! Every switch is one call to `fiber::arch::switch` (hand-written assembly): from the
//! scheduler context into a fiber (`resume_from_scheduler`), or from a fiber straight to the
//! next runnable one or back to the scheduler context (`switch_away`).
//!
//! Invariants: the module `sched::worker` doc's "one current fiber", "fibers stay home", "a
//! started fiber owns itself" and "recycled off its own stack"; the fiber's park word
//! is module `fiber::park_word`'s (loom-checked); `park_current` is its one use on the worker
//! side.
//! Around each switch the leaving context suspends its thread-local context and resumes it
//! when it is switched back to (module `fiber::context`, "a worker's span stack is the
//! running context's").

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{current, Queued, Worker, WorkerShared};
use crate::fiber::arch;
use crate::fiber::block::FiberPtr;
use crate::fiber::context;
use crate::fiber::control::{FiberRef, Header};
use crate::fiber::overflow;
use crate::fiber::park_word::Park;
use crate::fiber::sanitizer;
use crate::sched::metrics::bump;

impl Worker {
    /// Whether a fiber is running on this worker (the caller is that fiber), without cloning it.
    #[inline]
    pub(crate) fn in_fiber(&self) -> bool {
        // SAFETY: `current` is owner-only (we are on the worker's thread) and no reference
        // into the cell is alive; we only read whether it holds a fiber.
        unsafe { (*self.current.as_ptr()).is_some() }
    }

    /// The running fiber's cell, uncounted, if a fiber is running.
    #[inline]
    pub(crate) fn current_fiber_ptr(&self) -> Option<crate::fiber::block::FiberPtr> {
        self.with_current(|f| f.map(FiberRef::as_ptr))
    }

    /// The running fiber, if a fiber is running.
    #[inline]
    pub(crate) fn current_fiber(&self) -> Option<FiberRef> {
        self.with_current(|f| f.cloned())
    }

    /// Runs `f` on the running fiber (`None` in the scheduler context), borrowing it in place.
    /// `f` must not reach `current` again (none of this module's closures touch the worker).
    #[inline]
    fn with_current<R>(&self, f: impl FnOnce(Option<&FiberRef>) -> R) -> R {
        // SAFETY: `current` is owner-only ("owner-only state": we are on the worker's thread),
        // and it is not written while `f` runs: `f` only reads the fiber (callers above and
        // below), and no switch happens inside it.
        f(unsafe { (*self.current.as_ptr()).as_ref() })
    }

    /// Runs the body of the current fiber; called by [`fiber_entry`] on the fiber's stack.
    fn run_current(&self) {
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

    /// A stack of `len` bytes from this worker's pool, with an error that says what failed.
    pub(crate) fn alloc_stack(&self, len: usize) -> io::Result<crate::fiber::stack::Stack> {
        self.pool.borrow_mut().get(len).map_err(|err| stack_error(len, err))
    }

    /// [`alloc_stack`](Self::alloc_stack) into `into` (a new fiber's header, empty), in place.
    #[inline]
    pub(crate) fn alloc_stack_into(
        &self,
        len: usize,
        into: &std::cell::Cell<Option<crate::fiber::stack::Stack>>,
    ) -> io::Result<()> {
        self.pool.borrow_mut().get_into(len, into).map_err(|err| stack_error(len, err))
    }

    /// Makes `fiber` ready to be switched to: on its first run, gives it a stack and an owner.
    /// Returns the stack pointer to switch to, or `None` when it could not start (it is then
    /// completed with the error as its panic payload).
    #[inline]
    fn prepare(&self, fiber: &FiberRef) -> Option<usize> {
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
        let sp = unsafe { arch::init_stack(stack.top(), fiber_entry, std::ptr::null_mut()) };
        // SAFETY: the stack was just prepared and has not run; `sched_sp` holds the scheduler
        // context's saved stack pointer whenever a fiber of this worker runs ("fibers stay
        // home"), for as long as the worker lives, which outlives its fibers.
        unsafe { arch::link_stack(stack.top(), self.sched_sp.as_ptr()) };
        header.guard.set(stack.guard());
        header.san.start_fiber(stack.bottom(), stack.top());
        header.sp.set(sp);
        header.set_owner(&self.shared);
        // Not registered yet: only at its first switch away (`register`).
        bump(&self.shared.stats.fibers_started, 1);
        self.live_fibers.set(self.live_fibers.get() + 1);
        self.shared.stats.parked_fibers.store(self.live_fibers.get(), Ordering::Relaxed);
        Some(sp)
    }

    /// Enters the running fiber `me` in the registry, unless it is there already: called
    /// before every switch away that does not finish it (module `sched::registry`,
    /// "registered once it has switched away"). A fiber that runs to its end without one
    /// (the common short fiber) never costs a registry entry.
    #[inline]
    fn register(&self, me: &FiberRef) {
        if me.header.slot.get() == usize::MAX {
            self.register_first(me);
        }
    }

    /// The first switch away's half of [`register`](Self::register): once per fiber at most.
    #[inline(never)]
    fn register_first(&self, me: &FiberRef) {
        let slot = self.registry.borrow_mut().insert(FiberRef::as_ptr(me));
        me.header.slot.set(slot);
    }

    /// Starts a new fiber at once from an async task's poll ("a fiber started from a task's
    /// poll", module doc), until it switches back to the scheduler context: when it parks or
    /// finishes with nothing else runnable, or as soon as a task is queued (`switch_away`).
    /// From a fiber, or once shutdown was seen, queues it instead.
    pub(crate) fn run_now(&self, fiber: FiberRef) {
        if self.in_fiber() || self.stopping.get() {
            return self.queue_fiber(fiber, Queued::Back);
        }
        self.resume_from_scheduler(fiber);
    }

    /// From the scheduler context: switch into `fiber` until it switches back.
    pub(super) fn resume_from_scheduler(&self, fiber: FiberRef) {
        let Some(sp) = self.prepare(&fiber) else { return };
        // The scheduler context's thread-local context (tracing's spans) waits in this frame.
        let context = context::suspend();
        self.note_resume(&fiber.header);
        overflow::set_running(&fiber.header);
        let to: *const sanitizer::Context = &fiber.header.san;
        self.current.set(Some(fiber));
        // SAFETY: `to` is in the header of the fiber `current` now holds, alive until the
        // switch (and the fiber's header outlives its run).
        sanitizer::before_switch(&self.san, unsafe { &*to }, || false);
        // SAFETY: `sched_sp` is our own save slot; `sp` was saved by a switch away from this
        // fiber or made by init_stack, and is resumed once (the fiber was in exactly one
        // queue: "fibers stay home").
        unsafe { arch::switch(self.sched_sp.as_ptr(), sp, 0) };
        sanitizer::after_switch(&self.san);
        overflow::set_running(std::ptr::null());
        self.shared.stats.running_fiber.store(0, Ordering::Relaxed);
        self.after_switch();
        context::resume(context);
    }

    /// Counts a switch into `header`'s fiber and publishes it as running (for the watchdog).
    #[inline]
    fn note_resume(&self, header: &Header) {
        let stats = &self.shared.stats;
        bump(&stats.fibers_resumed, 1);
        bump(&stats.progress, 1);
        stats.running_fiber.store(header.id, Ordering::Relaxed);
        stats.running_site.store(std::ptr::from_ref(header.site).cast_mut(), Ordering::Relaxed);
    }

    /// From a fiber: switch to the next runnable fiber, or to the scheduler context. `save`
    /// is the running fiber's stack pointer slot; `me` identifies it, so that if it is the
    /// next runnable one (woken meanwhile, or yielding alone) we simply keep running.
    /// `next`, when given, is the fiber to try first (the caller popped it already).
    #[inline]
    fn switch_away(&self, save: *mut usize, me: *const Header, next: Option<FiberRef>) {
        self.switch_away_inline(save, me, next)
    }

    /// [`switch_away`](Self::switch_away), always inlined (for `finish`).
    #[inline(always)]
    fn switch_away_inline(&self, save: *mut usize, me: *const Header, mut next: Option<FiberRef>) {
        // The leaving fiber's thread-local context (tracing's spans) waits in its own frame.
        let context = context::suspend();
        self.count_switch();
        let (target, to): (usize, *const sanitizer::Context) = loop {
            if self.stopping.get() || self.tasks.has_queued() {
                // Tasks run in the scheduler context, and during shutdown every switch goes
                // there ("shutdown reaches every fiber"); a fiber we popped goes back first.
                if let Some(n) = next.take() {
                    self.fibers.push_front(n);
                }
                self.shared.stats.running_fiber.store(0, Ordering::Relaxed);
                overflow::set_running(std::ptr::null());
                break (self.sched_sp.get(), &self.san);
            }
            match next.take().or_else(|| self.pop_runnable()).or_else(|| self.take_injected()) {
                None => {
                    self.shared.stats.running_fiber.store(0, Ordering::Relaxed);
                    overflow::set_running(std::ptr::null());
                    break (self.sched_sp.get(), &self.san);
                }
                Some(next) if std::ptr::eq(&next.header, me) => {
                    self.current.set(Some(next));
                    return context::resume(context);
                }
                Some(next) => {
                    if let Some(sp) = self.prepare(&next) {
                        self.note_resume(&next.header);
                        overflow::set_running(&next.header);
                        let to: *const sanitizer::Context = &next.header.san;
                        self.current.set(Some(next));
                        break (sp, to);
                    }
                }
            }
        };
        // SAFETY: `me` is the running fiber's header (alive: `current` or `finished` holds
        // it), `to` the scheduler's context or the header of the fiber `current` now holds.
        let (from, to) = unsafe { (&(*me).san, &*to) };
        sanitizer::before_switch(from, to, || self.is_finished_fiber(me));
        // SAFETY: `save` is the running fiber's own slot; `target` is the scheduler context's
        // saved pointer or a runnable fiber's (prepared above), resumed exactly once.
        unsafe { arch::switch(save, target, 0) };
        sanitizer::after_switch(from);
        self.after_switch();
        context::resume(context);
    }

    /// Whether `me` is the fiber that finished and awaits recycling (it leaves for good).
    fn is_finished_fiber(&self, me: *const Header) -> bool {
        let done = self.finished.take();
        let is = done.as_ref().is_some_and(|f| std::ptr::eq(&f.header, me));
        self.finished.set(done);
        is
    }

    /// Recycles a fiber that finished before the switch that brought us here ("recycled off
    /// its own stack").
    #[inline]
    fn after_switch(&self) {
        let done = self.finished.take();
        if done.is_some() {
            self.recycle(done);
        }
    }

    /// Once per fiber: out of line, not cold.
    #[inline(never)]
    fn recycle(&self, done: Option<FiberRef>) {
        if let Some(done) = done {
            done.header.san.destroy_fiber();
            self.pool.borrow_mut().put_from(&done.header.stack);
            let slot = done.header.slot.get();
            if slot != usize::MAX {
                self.registry.borrow_mut().remove(slot);
            }
            self.live_fibers.set(self.live_fibers.get() - 1);
            self.shared.stats.parked_fibers.store(self.live_fibers.get(), Ordering::Relaxed);
            // The run reference goes last, once the registry no longer points at the cell.
            drop(done);
        }
    }

    /// Yields the running fiber: it goes to the back of the run queue. The case where nothing
    /// else is runnable (no fiber queued or in the slot, no remote work, no task queued: what
    /// `pop_runnable` and `has_queued` below would find) is inline and keeps running without
    /// entering the out-of-line switch path (whose register saves cost as much as the checks).
    #[inline]
    pub(crate) fn yield_fiber(&self) {
        if self.fibers.has_runnable() || self.shared.driver.has_remote_work() || self.tasks.has_queued() {
            return self.yield_switch();
        }
        self.keep_running_on_yield();
    }

    /// A yield with nothing else runnable: keep running, but still look at the reactor now
    /// and then, or a fiber spinning on yield_now would starve timers and I/O. The yield is
    /// progress for the watchdog all the same: the fiber offered the worker and nobody
    /// wanted it, so it holds nobody up.
    #[inline]
    fn keep_running_on_yield(&self) {
        bump(&self.shared.stats.progress, 1);
        self.count_switch();
        if self.stopping.get() {
            // Shutdown: let the scheduler context cancel us.
            self.yield_for_shutdown();
        }
        self.check_cancel()
    }

    /// At shutdown, a yield goes to the scheduler context (which cancels the fiber).
    #[cold]
    #[inline(never)]
    fn yield_for_shutdown(&self) {
        let me = self.current.take().expect("yield_now outside a fiber on a worker");
        let header: *const Header = &me.header;
        let save = me.header.sp.as_ptr();
        self.register(&me);
        self.fibers.push_back(me);
        self.switch_away(save, header, None);
    }

    /// The yield of [`yield_fiber`](Self::yield_fiber) when something else may be runnable.
    #[inline(never)]
    fn yield_switch(&self) {
        let next = self.pop_runnable();
        if next.is_none() && !self.tasks.has_queued() {
            // The remote work was no fiber and no task after all.
            return self.keep_running_on_yield();
        }
        // Another fiber, or queued tasks (`switch_away` then goes to the scheduler context
        // to poll them: a fiber spinning on yield_now must not starve the tasks either).
        let me = self.current.take().expect("yield_now outside a fiber on a worker");
        let header: *const Header = &me.header;
        let save = me.header.sp.as_ptr();
        self.register(&me);
        self.fibers.push_back(me);
        self.switch_away(save, header, next);
        self.check_cancel();
    }

    /// Parks the running fiber (module `fiber::park_word`): unless a permit is pending or it is being
    /// cancelled, its park word moves to `PARKED` and it switches away until an unparker
    /// queues it again; then it unwinds if it is being cancelled.
    pub(crate) fn park_current(&self, reason: &'static str) {
        let me = self.current.take().expect("park_current outside a fiber");
        if me.header.is_cancelled() || me.header.park.park() == Park::Return {
            self.current.set(Some(me));
            return self.check_cancel();
        }
        let header: *const Header = &me.header;
        me.header.waiting_on.set(reason);
        crate::trace::fiber_parked(me.header.id, reason);
        let save = me.header.sp.as_ptr();
        self.register(&me);
        // Parked, the fiber's run reference belongs to its one rescheduler ("a started fiber
        // owns itself"), which takes it back with `fiber::waiter::unpark` or `claim_parked`.
        std::mem::forget(me);
        self.switch_away(save, header, None);
        self.check_cancel();
    }

    /// Parks the running fiber as [`park_current`](Self::park_current) does, except that a
    /// cancellation neither prevents the park nor unwinds after it: the caller is lending
    /// memory to another thread and must not leave before that thread is done with it
    /// (module `hook::offload`, "the caller's memory outlives the job"). It loops on its own
    /// condition, so the unpark a cancellation sends is a spurious wake-up here.
    #[cfg(feature = "hook")]
    pub(crate) fn park_current_through_cancel(&self, reason: &'static str) {
        let me = self.current.take().expect("park_current_through_cancel outside a fiber");
        if me.header.park.park() == Park::Return {
            self.current.set(Some(me));
            return;
        }
        let header: *const Header = &me.header;
        me.header.waiting_on.set(reason);
        let save = me.header.sp.as_ptr();
        self.register(&me);
        // As in `park_current`: the run reference now belongs to the one rescheduler.
        std::mem::forget(me);
        self.switch_away(save, header, None);
    }

    /// Unwinds the running fiber if the runtime is cancelling it (and it is not unwinding yet).
    /// Inlined: after every yield and park, the common answer is one relaxed load.
    #[inline]
    pub(crate) fn check_cancel(&self) {
        if self.with_current(|f| f.is_some_and(|f| f.header.is_cancelled())) {
            self.unwind_cancelled();
        }
    }

    /// Whether the running fiber has been cancelled (its next park unwinds).
    #[cfg(feature = "hook")]
    pub(crate) fn current_fiber_cancelled(&self) -> bool {
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

    /// Ends the running fiber: the next context recycles it. Never returns. Inlined with its
    /// switch into `fiber_entry`: the last switch of a fiber then happens with no call of its
    /// own outstanding, so the context it resumes finds its own return addresses on the
    /// CPU's return stack buffer (module `fiber::arch::x86_64`, `trampoline`): each pending
    /// call left there mispredicted one `ret` of that context.
    #[inline(always)]
    fn finish(&self) -> ! {
        context::discard();
        let me = self.current.take().expect("finish outside a fiber");
        // Break the fiber -> waker -> fiber cycle now that nothing can wait on its behalf.
        drop(me.header.waker.take());
        let header: *const Header = &me.header;
        let save = me.header.sp.as_ptr();
        let previous = self.finished.replace(Some(me));
        debug_assert!(previous.is_none(), "two finished fibers awaiting recycling");
        self.switch_away_inline(save, header, None);
        unreachable!("a finished fiber was resumed");
    }
}

/// The error of a fiber stack that could not be had, saying what failed.
#[cold]
fn stack_error(len: usize, err: io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("could not allocate a {len} byte fiber stack: {err}"))
}

/// Queues a fiber that its waker has just moved out of `PARKED` (module `fiber::park_word`,
/// "one rescheduler") on the worker that owns it ("fibers stay home"): on this worker as `how`
/// says when that is the current one (`Woken`: the LIFO slot; `Back`: behind the queued
/// fibers, for a joiner woken by a completion, module `fiber::completion`), else through the
/// owner's inbox.
#[inline]
pub(crate) fn reschedule(fiber: FiberRef, how: Queued) {
    let owner = fiber.header.owner_ptr();
    assert!(!owner.is_null(), "a parked fiber has an owner");
    match current() {
        Some(worker) if std::ptr::eq(Arc::as_ptr(&worker.shared), owner) => worker.queue_fiber(fiber, how),
        _ => send_home(owner, fiber),
    }
}

/// The remote half of [`reschedule`]: sends `fiber` to the inbox of its owner, `owner`.
/// Out of line: the common wake-up is local.
#[inline(never)]
fn send_home(owner: *const WorkerShared, fiber: FiberRef) {
    // SAFETY: `owner` is the `WorkerShared` of a `Worker` whose `shared` still counts it:
    // `fiber` was parked there and we are its one rescheduler, so it is registered there and
    // cannot finish before that worker takes it from the inbox, and the worker's `run` does
    // not return before its registry is empty ("owners outlive their reschedulers"). The
    // count taken here keeps the inbox and the driver alive until our send has published.
    let owner = unsafe {
        Arc::increment_strong_count(owner);
        Arc::from_raw(owner)
    };
    owner.send_fiber(fiber);
}

/// The first function of every fiber, entered by the first switch onto its stack.
unsafe extern "C" fn fiber_entry(_arg: usize, _data: *mut u8) -> ! {
    let worker = current().expect("fiber started outside a worker");
    worker.with_current(|f| sanitizer::after_switch(&f.expect("a starting fiber is current").header.san));
    worker.after_switch();
    worker.run_current();
    worker.finish()
}
