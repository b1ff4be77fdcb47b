//! Park and wake: how fibers, tasks and plain threads wait, in one place.
//!
//! Every waiting operation of spindle (channels, locks, joins, sleeps, sockets) is written
//! once against this module: [`park_on`] / [`park_until`] suspend the caller, and a
//! [`Waiter`] (or a `Waker` made here) wakes it. Who waits decides what parking means:
//!
//! | caller | park | wake |
//! |---|---|---|
//! | a fiber | its worker switches to other work (`sched::worker::switch`) | [`unpark`]: the park word, then the fiber's own worker queues it |
//! | a plain thread | `std::thread::park` | `Thread::unpark` |
//! | an async task | never parks (blocking-style calls panic there, `sched::caller`) | its `Waker` |
//!
//! Submodules: [`wait_list`] (the FIFO of waiters a blocking primitive keeps under its lock),
//! [`waker_set`] (the wakers of futures waiting for one event, keyed so a dropped future takes
//! its waker out), [`completion`] (the one join cell of fibers, tasks and blocking jobs).
//!
//! # Invariants
//!
//! - **The permit contract.** Fibers follow `std::thread::park`'s contract: an unpark that
//!   comes before the park leaves a permit, so the park returns at once and no wake-up is lost
//!   (the fiber's park word, [`ParkState`], below). Parks may return spuriously: every caller
//!   loops on its condition.
//! - **One rescheduler.** Of all the parties that unpark a parked fiber, exactly one (the one
//!   whose compare-exchange moves it out of `PARKED`) queues it again, and only on the worker
//!   that owns it: started fibers never change thread (soundness rule "fibers stay home").
//!   That party also takes over the fiber's run reference, which the fiber forgot when it
//!   parked (module `sched::worker`, "a started fiber owns itself"): a wake-up clones nothing.
//! - **Hand-over.** Acquire/release on every transition of the park word: what the unparker
//!   wrote before `unpark` is visible to the fiber after it returns from `park`.
//!
//! # The park word
//!
//! `IDLE` (running or runnable, no permit), `PARKED` (suspended in `park`), `NOTIFIED` (an
//! unpark arrived while not parked: the next park returns at once). Transitions:
//!
//! - `IDLE → PARKED`: the fiber itself, in [`ParkState::park`], just before switching away;
//! - `PARKED → IDLE`: the one unparker whose compare-exchange wins; it then owns the duty to
//!   reschedule the fiber (exactly once);
//! - `IDLE → NOTIFIED`: an unparker of a fiber that is not parked (a permit);
//! - `NOTIFIED → IDLE`: the fiber, consuming the permit instead of suspending.
//!
//! Only the fiber leaves `NOTIFIED` (no lost wake-up) and only an unparker leaves `PARKED`
//! (one rescheduler). Both are modelled with loom below.
//! - **Never block a worker.** A blocking-style wait from code on a worker outside a fiber (an
//!   async task) panics, naming the async alternative (`sched::caller`).

pub(crate) mod completion;
pub(crate) mod wait;
pub(crate) mod wait_list;
pub(crate) mod waker_set;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use crate::fiber::block::FiberPtr;
use crate::fiber::control::FiberRef;
use crate::loom::AtomicU8;
use crate::sched::caller::{blocking_caller, Caller};
use crate::sched::worker::{self, Queued, TimerHandle, Worker};
pub(crate) use wait_list::{wake, WaitList, WaitNode};

/// A parked fiber or thread that can be woken, or the waker of a pending future.
#[derive(Debug)]
pub(crate) enum Waiter {
    Fiber(FiberRef),
    Thread(Thread),
    /// A future's waker (an async task, or a fiber in `block_on`/`select!`).
    Task(Waker),
    /// A fiber of the waking party's own worker, uncounted: see [`HomeFiber`].
    Home(HomeFiber),
}

/// A joiner that waits for a fiber which can only run on the joiner's own worker (module
/// `park::completion`, "a joiner at home"): an uncounted pointer to the joining fiber's cell.
/// A counted [`FiberRef`] cost two atomic read-modify-writes a join (its clone and its drop).
///
/// Sound because the waking party runs on the joiner's thread, so the joiner cannot finish
/// meanwhile: it leaves its join only after the wake-up (which runs to its end without a
/// switch) or, unwinding, after taking the pointer back ([`Completion::join_at_home`]'s guard).
///
/// [`Completion::join_at_home`]: completion::Completion::join_at_home
#[derive(Debug)]
pub(crate) struct HomeFiber(FiberPtr);

// SAFETY: a `HomeFiber` is made, stored, taken and used on one thread (the joiner's worker,
// where the joined fiber runs: see the type's doc); it crosses no thread. `Send` and `Sync` only
// let it sit in the join word, which holds the other waiters too.
unsafe impl Send for HomeFiber {}
// SAFETY: as above.
unsafe impl Sync for HomeFiber {}

impl HomeFiber {
    /// The running fiber of `worker`.
    #[inline]
    pub(crate) fn current(worker: &Worker) -> HomeFiber {
        HomeFiber(worker.current_fiber_ptr().expect("a join at home from outside a fiber"))
    }
}

impl Waiter {
    /// The caller: the running fiber if there is one, else the current thread. Inlined: a
    /// waiter returned through memory was copied into the join word's slot with loads that
    /// spanned two of its stores, which stalls (store-to-load forwarding fails) on every join.
    #[inline(always)]
    pub(crate) fn current() -> Waiter {
        match worker::current().and_then(|w| w.current_fiber()) {
            Some(fiber) => Waiter::Fiber(fiber),
            None => Waiter::Thread(thread::current()),
        }
    }

    pub(crate) fn wake(self) {
        self.wake_by_ref();
    }

    pub(crate) fn wake_by_ref(&self) {
        self.wake_as(Queued::Woken);
    }

    /// Wakes the joiner of a completion (module `completion`, "a completion wakes its joiner
    /// behind the queue"): a fiber of this worker goes to the back of its run queue, not into
    /// the LIFO slot.
    pub(crate) fn wake_joiner(self) {
        self.wake_as(Queued::Back);
    }

    /// Wakes the waiter; a fiber of the current worker is queued as `how` says.
    #[inline]
    fn wake_as(&self, how: Queued) {
        match self {
            Waiter::Fiber(fiber) => unpark_as(fiber, how),
            Waiter::Thread(thread) => thread.unpark(),
            Waiter::Task(waker) => waker.wake_by_ref(),
            Waiter::Home(HomeFiber(ptr)) => {
                // SAFETY: the joining fiber is alive ("a joiner at home": it cannot have left
                // its join while this waiter is registered); the reference made here is not
                // dropped, so no count is given up that was not taken.
                let fiber = std::mem::ManuallyDrop::new(unsafe { FiberRef::from_raw(*ptr) });
                unpark_as(&fiber, how)
            }
        }
    }

    /// Whether waking `self` wakes the task behind `waker` (so a re-poll need not requeue).
    pub(crate) fn will_wake(&self, waker: &Waker) -> bool {
        matches!(self, Waiter::Task(w) if w.will_wake(waker))
    }
}

/// Wakes a parked fiber, or leaves a permit if it is not parked. Callable from any thread.
/// A fiber of the current worker goes into its LIFO slot, to run next.
pub(crate) fn unpark(fiber: &FiberRef) {
    unpark_as(fiber, Queued::Woken);
}

/// [`unpark`], queueing a fiber of the current worker as `how` says.
#[inline]
fn unpark_as(fiber: &FiberRef, how: Queued) {
    if fiber.header.park.unpark() {
        crate::trace::fiber_woken(&fiber.header);
        // We moved it PARKED -> IDLE: queueing it is our duty (one rescheduler), on its owner.
        // SAFETY: a parked fiber forgot its run reference for its one rescheduler, which we
        // now are (module `sched::worker`, "a started fiber owns itself"); `fiber` is a
        // reference to the same cell, so its pointer is that reference's.
        let run_ref = unsafe { FiberRef::from_raw(FiberRef::as_ptr(fiber)) };
        worker::reschedule(run_ref, how);
    }
}

/// Wakes a fiber: the `Waker` of fibers, so that futures, timers and I/O wake them alike.
struct FiberWake(FiberRef);

impl Wake for FiberWake {
    fn wake(self: Arc<Self>) {
        unpark(&self.0);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        unpark(&self.0);
    }
}

/// Wakes a plain thread.
struct ThreadWake(Thread);

impl Wake for ThreadWake {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the running fiber of `worker` (cached in its control block until it
/// finishes).
pub(crate) fn fiber_waker(worker: &Worker) -> Waker {
    let fiber = worker.current_fiber().expect("fiber_waker outside a fiber");
    let cached = fiber.header.waker.take();
    let waker = cached.unwrap_or_else(|| Waker::from(Arc::new(FiberWake(fiber.clone()))));
    fiber.header.waker.set(Some(waker.clone()));
    waker
}

/// A waker for the caller: its fiber's, or one that unparks the current thread.
pub(crate) fn current_waker() -> Waker {
    match worker::current().filter(|w| w.in_fiber()) {
        Some(worker) => fiber_waker(worker),
        None => Waker::from(Arc::new(ThreadWake(thread::current()))),
    }
}

/// Parks the caller (fiber or thread) until woken, recording what a fiber waits for (shown by
/// `Runtime::dump_fibers`); may return spuriously.
///
/// # Panics
///
/// In an async task on a spindle worker (see `sched::caller`), naming the async alternative.
#[track_caller]
pub(crate) fn park_on(reason: &'static str) {
    crate::fiber::check_no_park(reason);
    match blocking_caller(reason) {
        Caller::Fiber(worker) => worker.park_current(reason),
        Caller::Thread => thread::park(),
    }
}

/// Like [`park_on`], but returns by `deadline` at the latest (`None`: no deadline). A fiber
/// arms a timer on its worker's wheel for the park (cancelled on every way out); a thread uses
/// `std::thread::park_timeout`. May return spuriously: callers re-check their condition and
/// the clock.
#[track_caller]
pub(crate) fn park_until(deadline: Option<Instant>, reason: &'static str) {
    let Some(deadline) = deadline else { return park_on(reason) };
    crate::fiber::check_no_park(reason);
    let caller = blocking_caller(reason);
    // The runtime's clock, as the deadline (module `sched::clock`); a thread's is the real one.
    let now = crate::sched::clock::now();
    if now >= deadline {
        return;
    }
    match caller {
        Caller::Fiber(w) => {
            struct CancelTimer(TimerHandle);
            impl Drop for CancelTimer {
                fn drop(&mut self) {
                    if let Some(w) = worker::current() {
                        w.cancel_timer(self.0);
                    }
                }
            }
            let _timer = CancelTimer(w.add_timer(deadline, fiber_waker(w)));
            w.park_current(reason);
        }
        Caller::Thread => thread::park_timeout(deadline - now),
    }
}

const IDLE: u8 = 0;
const PARKED: u8 = 1;
const NOTIFIED: u8 = 2;

/// What [`ParkState::park`] tells the fiber to do.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum Park {
    /// A permit was pending (or arrived meanwhile): do not suspend.
    Return,
    /// The fiber is now `PARKED`: suspend; an unparker will reschedule it.
    Suspend,
}

/// A fiber's park state; see the module doc.
#[derive(Debug)]
pub(crate) struct ParkState(AtomicU8);

impl ParkState {
    pub(crate) fn new() -> ParkState {
        ParkState(AtomicU8::new(IDLE))
    }

    /// Called by the fiber itself, running: consumes a pending permit or becomes `PARKED`.
    /// One compare-exchange: the word is `IDLE` or `NOTIFIED` here (only the fiber enters
    /// `PARKED`, and it is running).
    pub(crate) fn park(&self) -> Park {
        match self.0.compare_exchange(IDLE, PARKED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Park::Suspend,
            Err(_) => {
                // A permit is pending (IDLE -> NOTIFIED, before or during this call; the failed
                // exchange acquired it). Only the fiber leaves NOTIFIED, so a plain store
                // consumes the permit.
                self.0.store(IDLE, Ordering::Relaxed);
                Park::Return
            }
        }
    }

    /// From any thread: wakes the fiber. Returns true when the caller moved it out of
    /// `PARKED` and must now reschedule it; false when it left or found a permit instead.
    pub(crate) fn unpark(&self) -> bool {
        let mut state = self.0.load(Ordering::Acquire);
        loop {
            let next = match state {
                IDLE => NOTIFIED,
                PARKED => IDLE,
                _ => return false, // NOTIFIED: a permit is pending already
            };
            match self.0.compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return state == PARKED,
                Err(actual) => state = actual,
            }
        }
    }

    /// Whether the fiber is suspended in `park` (a snapshot, for diagnostics).
    pub(crate) fn is_parked(&self) -> bool {
        self.0.load(Ordering::Relaxed) == PARKED
    }

    /// For shutdown, by the owner worker: takes a `PARKED` fiber out of `PARKED` without
    /// leaving a permit. True when the caller must reschedule it.
    pub(crate) fn claim_parked(&self) -> bool {
        self.0.compare_exchange(PARKED, IDLE, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }
}

#[cfg(all(test, spindle_loom))]
mod park_word_loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::{Arc, Notify};
    use loom::thread;

    /// The fiber waits for `data` with the usual park loop; an unparker publishes it. The
    /// "scheduler" is a Notify: rescheduling a PARKED fiber notifies it. A lost wake-up
    /// leaves the fiber waiting forever, which loom reports as a deadlock.
    #[test]
    fn loom_no_lost_wakeup_and_data_is_visible() {
        loom::model(|| {
            let state = Arc::new(ParkState::new());
            let data = Arc::new(AtomicUsize::new(0));
            let resched = Arc::new(Notify::new());
            let unparker = {
                let (state, data, resched) = (state.clone(), data.clone(), resched.clone());
                thread::spawn(move || {
                    data.store(42, Ordering::Relaxed);
                    if state.unpark() {
                        resched.notify();
                    }
                })
            };
            while data.load(Ordering::Relaxed) == 0 {
                if state.park() == Park::Suspend {
                    resched.wait();
                }
            }
            assert_eq!(data.load(Ordering::Relaxed), 42);
            unparker.join().unwrap();
        });
    }

    /// Two unparkers race on a fiber that parks once: it is rescheduled at most once, and is
    /// rescheduled whenever it suspended.
    #[test]
    fn loom_two_unparkers_reschedule_once() {
        loom::model(|| {
            let state = Arc::new(ParkState::new());
            let rescheduled = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (state, rescheduled) = (state.clone(), rescheduled.clone());
                    thread::spawn(move || {
                        if state.unpark() {
                            rescheduled.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            let outcome = state.park();
            for t in threads {
                t.join().unwrap();
            }
            let n = rescheduled.load(Ordering::Relaxed);
            match outcome {
                Park::Suspend => assert_eq!(n, 1, "a suspended fiber is rescheduled exactly once"),
                Park::Return => assert_eq!(n, 0, "nobody reschedules a fiber that did not suspend"),
            }
        });
    }
}
