//! Context switches: resuming, yielding, parking and finishing fibers, and waking one
//! ([`reschedule`]). What the switches keep between them, and starting and recycling a
//! fiber, is the worker's [`Switcher`](super::switcher::Switcher) (module `switcher`); the
//! switches here coordinate it with the queues and the loop's flags.
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
        self.switcher.in_fiber()
    }

    /// The running fiber's cell, uncounted, if a fiber is running.
    #[inline]
    pub(crate) fn current_fiber_ptr(&self) -> Option<FiberPtr> {
        self.switcher.with_current(|f| f.map(FiberRef::as_ptr))
    }

    /// The running fiber, if a fiber is running.
    #[inline]
    pub(crate) fn current_fiber(&self) -> Option<FiberRef> {
        self.switcher.with_current(|f| f.cloned())
    }

    /// A stack of `len` bytes from this worker's pool, into `into` (a new fiber's header,
    /// empty), in place, with an error that says what failed.
    #[inline]
    pub(crate) fn alloc_stack_into(
        &self,
        len: usize,
        into: &std::cell::Cell<Option<crate::fiber::stack::Stack>>,
    ) -> io::Result<()> {
        self.switcher.alloc_stack_into(len, into)
    }

    /// Recycles a fiber that finished before the switch that brought us here ("recycled off
    /// its own stack"), publishing the live count in this worker's statistics.
    #[inline]
    fn after_switch(&self) {
        let done = self.switcher.take_finished();
        if done.is_some() {
            self.switcher.recycle(done, &self.shared.stats);
        }
    }

    /// Starts a new fiber at once from an async task's poll ("a fiber started from a task's
    /// poll", module doc), until it switches back to the scheduler context: when it parks or
    /// finishes with nothing else runnable, or as soon as a task is queued (`switch_away`).
    /// From a fiber, or once shutdown was seen, queues it instead.
    pub(crate) fn run_now(&self, fiber: FiberRef) {
        if self.switcher.in_fiber() || self.stopping.get() {
            return self.queue_fiber(fiber, Queued::Back);
        }
        self.resume_from_scheduler(fiber);
    }

    /// From the scheduler context: switch into `fiber` until it switches back.
    pub(super) fn resume_from_scheduler(&self, fiber: FiberRef) {
        let sw = &self.switcher;
        let Some(sp) = sw.prepare(&fiber) else { return };
        // The scheduler context's thread-local context (tracing's spans) waits in this frame.
        let context = context::suspend();
        self.note_resume(&fiber.header);
        overflow::set_running(&fiber.header);
        let to: *const sanitizer::Context = &fiber.header.san;
        sw.set_current(fiber);
        // SAFETY: `to` is in the header of the fiber `current` now holds, alive until the
        // switch (and the fiber's header outlives its run).
        sanitizer::before_switch(sw.san(), unsafe { &*to }, || false);
        // SAFETY: `sched_sp` is our own save slot; `sp` was saved by a switch away from this
        // fiber or made by init_stack, and is resumed once (the fiber was in exactly one
        // queue: "fibers stay home").
        unsafe { arch::switch(sw.sched_sp_slot(), sp, 0) };
        sanitizer::after_switch(sw.san());
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
        let sw = &self.switcher;
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
                break (sw.sched_sp(), sw.san());
            }
            match next.take().or_else(|| self.pop_runnable()).or_else(|| self.take_injected()) {
                None => {
                    self.shared.stats.running_fiber.store(0, Ordering::Relaxed);
                    overflow::set_running(std::ptr::null());
                    break (sw.sched_sp(), sw.san());
                }
                Some(next) if std::ptr::eq(&next.header, me) => {
                    sw.set_current(next);
                    return context::resume(context);
                }
                Some(next) => {
                    if let Some(sp) = sw.prepare(&next) {
                        self.note_resume(&next.header);
                        overflow::set_running(&next.header);
                        let to: *const sanitizer::Context = &next.header.san;
                        sw.set_current(next);
                        break (sp, to);
                    }
                }
            }
        };
        // SAFETY: `me` is the running fiber's header (alive: `current` or `finished` holds
        // it), `to` the scheduler's context or the header of the fiber `current` now holds.
        let (from, to) = unsafe { (&(*me).san, &*to) };
        sanitizer::before_switch(from, to, || sw.is_finished_fiber(me));
        // SAFETY: `save` is the running fiber's own slot; `target` is the scheduler context's
        // saved pointer or a runnable fiber's (prepared above), resumed exactly once.
        unsafe { arch::switch(save, target, 0) };
        sanitizer::after_switch(from);
        self.after_switch();
        context::resume(context);
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
        self.switcher.check_cancel()
    }

    /// At shutdown, a yield goes to the scheduler context (which cancels the fiber).
    #[cold]
    #[inline(never)]
    fn yield_for_shutdown(&self) {
        let me = self.switcher.take_current().expect("yield_now outside a fiber on a worker");
        let header: *const Header = &me.header;
        let save = me.header.sp.as_ptr();
        self.switcher.register(&me);
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
        let me = self.switcher.take_current().expect("yield_now outside a fiber on a worker");
        let header: *const Header = &me.header;
        let save = me.header.sp.as_ptr();
        self.switcher.register(&me);
        self.fibers.push_back(me);
        self.switch_away(save, header, next);
        self.switcher.check_cancel();
    }

    /// Parks the running fiber (module `fiber::park_word`): unless a permit is pending or it is being
    /// cancelled, its park word moves to `PARKED` and it switches away until an unparker
    /// queues it again; then it unwinds if it is being cancelled.
    pub(crate) fn park_current(&self, reason: &'static str) {
        let sw = &self.switcher;
        let me = sw.take_current().expect("park_current outside a fiber");
        if me.header.is_cancelled() || me.header.park.park() == Park::Return {
            sw.set_current(me);
            return sw.check_cancel();
        }
        let header: *const Header = &me.header;
        me.header.waiting_on.set(reason);
        crate::trace::fiber_parked(me.header.id, reason);
        let save = me.header.sp.as_ptr();
        sw.register(&me);
        // Parked, the fiber's run reference belongs to its one rescheduler ("a started fiber
        // owns itself"), which takes it back with `fiber::waiter::unpark` or `claim_parked`.
        std::mem::forget(me);
        self.switch_away(save, header, None);
        sw.check_cancel();
    }

    /// Parks the running fiber as [`park_current`](Self::park_current) does, except that a
    /// cancellation neither prevents the park nor unwinds after it: the caller is lending
    /// memory to another thread and must not leave before that thread is done with it
    /// (module `hook::offload`, "the caller's memory outlives the job"). It loops on its own
    /// condition, so the unpark a cancellation sends is a spurious wake-up here.
    #[cfg(feature = "hook")]
    pub(crate) fn park_current_through_cancel(&self, reason: &'static str) {
        let sw = &self.switcher;
        let me = sw.take_current().expect("park_current_through_cancel outside a fiber");
        if me.header.park.park() == Park::Return {
            sw.set_current(me);
            return;
        }
        let header: *const Header = &me.header;
        me.header.waiting_on.set(reason);
        let save = me.header.sp.as_ptr();
        sw.register(&me);
        // As in `park_current`: the run reference now belongs to the one rescheduler.
        std::mem::forget(me);
        self.switch_away(save, header, None);
    }

    /// Whether the running fiber has been cancelled (its next park unwinds).
    #[cfg(feature = "hook")]
    pub(crate) fn current_fiber_cancelled(&self) -> bool {
        self.switcher.current_cancelled()
    }

    /// Ends the running fiber: the next context recycles it. Never returns. Inlined with its
    /// switch into `fiber_entry`: the last switch of a fiber then happens with no call of its
    /// own outstanding, so the context it resumes finds its own return addresses on the
    /// CPU's return stack buffer (module `fiber::arch::x86_64`, `trampoline`): each pending
    /// call left there mispredicted one `ret` of that context.
    #[inline(always)]
    fn finish(&self) -> ! {
        context::discard();
        let me = self.switcher.take_current().expect("finish outside a fiber");
        // Break the fiber -> waker -> fiber cycle now that nothing can wait on its behalf.
        drop(me.header.waker.take());
        let header: *const Header = &me.header;
        let save = me.header.sp.as_ptr();
        self.switcher.set_finished(me);
        self.switch_away_inline(save, header, None);
        unreachable!("a finished fiber was resumed");
    }
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

/// The first function of every fiber, entered by the first switch onto its stack
/// (`Switcher::start` writes its first frame).
pub(super) unsafe extern "C" fn fiber_entry(_arg: usize, _data: *mut u8) -> ! {
    let worker = current().expect("fiber started outside a worker");
    let sw = &worker.switcher;
    sw.with_current(|f| sanitizer::after_switch(&f.expect("a starting fiber is current").header.san));
    worker.after_switch();
    sw.run_current();
    worker.finish()
}
