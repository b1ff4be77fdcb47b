//! One worker: a thread that runs fibers and polls tasks on one event loop.
//!
//! Rooms, one mechanism each:
//!
//! | file | mechanism |
//! |---|---|
//! | `event_loop.rs` | the loop: run, sleep in the reactor, busy polls, shutdown detection |
//! | `switch.rs` | context switches: resume, yield, park, finish a fiber; wake one |
//! | `switcher.rs` | `Switcher`: the running fiber, the scheduler context, the finished fiber, the stack pool, the registry, the live count; starting and recycling a fiber |
//! | `fiber_queue.rs` | `FiberQueue`: the fiber run queue and its LIFO slot; the worker's inbox hand-over, placing new fibers, balancing, the hand-off of a held worker's unstarted fibers |
//! | `handoff.rs` | the run queue's cell: borrowed by its owner, taken over by the watchdog while the owner is held |
//! | `task_queue.rs` | `TaskQueue`: the task queues, the live list, stealing; the worker's polling of tasks |
//! | `lifo.rs` | the LIFO slot both queues use |
//! | `timers.rs` | `Timers`: the worker's timer wheel with its own methods (the worker fires the due wakers) |
//! | `cancel.rs` | shutdown: cancelling every fiber and task left |
//! | `coop.rs` | `IoBudget`: a fiber whose socket operations never wait yields now and then |
//! | `flush.rs` | deferred flushes: writers sent out once the worker's burst of work is over |
//! | `shared.rs` | [`WorkerShared`], the part other threads touch |
//!
//! Each part (`FiberQueue`, `TaskQueue`, `Switcher`, `Timers`, `IoBudget`) owns its fields
//! and the methods that touch only them; what one of its methods needs of another part or
//! of the runtime (the reactor's `dispatching` flag, the `RuntimeShared`, the statistics) is
//! passed in; only the worker's identity is kept by a part itself (`Timers` its owner's
//! address, `Switcher` a counted `WorkerShared`, the owner of the fibers it starts), so that
//! the switch path passes nothing. `impl Worker` keeps what coordinates several parts: the loop, the switches
//! (which move fibers between the queues and the `Switcher`), placement, the inbox hand-over,
//! balancing, polling tasks, shutdown, and the crate's entry points, which forward to a part.
//!
//! # Queueing work: three verbs
//!
//! - **queue** ([`Worker::queue_fiber`], [`Worker::queue_task`]): onto this worker's own
//!   queues, from its own thread; [`Queued::Woken`] puts it in the LIFO slot (every wake-up
//!   but a completion's, whose joiner goes to the back: module `fiber::completion`).
//! - **send** ([`WorkerShared::send_fiber`], [`WorkerShared::send_task`]): into another
//!   worker's inbox, from any thread, waking it.
//! - **inject** (`RuntimeShared::inject_fiber`, `inject_task`): into the runtime's injector,
//!   where any worker takes it, waking an idle one.
//!
//! Deciding among them: [`Worker::place_new`] (a new fiber), [`reschedule`] (a woken fiber:
//! queue on its owner or send to it), `Task::schedule` (a task, by its home, through its vtable).
//!
//! # Contexts and switches
//!
//! A worker thread runs two kinds of contexts: its own (the *scheduler context*, on the
//! thread's stack, in `event_loop::run`) and fibers (each on its own stack). A fiber that
//! yields, parks or finishes switches **directly** to the next runnable fiber; only when
//! nothing is runnable does it switch to the scheduler context, which then sleeps until a
//! remote wake-up arrives. A yield between two fibers is therefore one context switch.
//!
//! # Invariants
//!
//! - **Owner-only state.** All `Worker` fields, its parts' included, are touched only by the
//!   worker's own thread;
//!   other threads reach the worker through [`WorkerShared`] (the inboxes and the driver).
//!   No `RefCell` borrow is held across a switch.
//! - **One current fiber.** `current` (in `Switcher`) holds the fiber that is running, `None`
//!   while the scheduler context runs.
//! - **Fibers stay home.** A started fiber belongs to exactly one worker (`Header::owner`) and
//!   is resumed only by it: a remote wake-up goes through the owner's inbox. A fiber is in at
//!   most one queue at a time, and only while it is runnable (park word `IDLE`).
//! - **A started fiber owns itself.** From its first run until it is recycled, a started
//!   fiber's cell has one counted reference that stands for the fiber itself, its *run
//!   reference* (the one its spawner queued). It moves, never cloned: `current` holds it while
//!   the fiber runs, a run queue, the LIFO slot or the owner's inbox while it is runnable,
//!   `finished` once it is done. While the fiber is parked (park word `PARKED`) nobody holds
//!   it: `park_current` forgets it, and the one rescheduler (module `fiber::park_word`'s "one
//!   rescheduler": the unparker whose compare-exchange moves the word out of `PARKED`, or
//!   shutdown's `claim_parked`) takes it back and queues it. So a parked fiber's cell and
//!   stack live until the fiber is resumed, or cancelled at shutdown, whoever else drops
//!   their references. The registry (module `sched::registry`) only points at started fibers
//!   that have switched away (for shutdown and the dump; "registered once it has switched
//!   away"), and recycling removes that pointer before it drops the run reference. A spawn
//!   thus costs no reference count beyond the join handle's.
//! - **Owners outlive their reschedulers.** A started fiber's header points at its owner's
//!   [`WorkerShared`] without counting it (`Header::owner_ptr`; a count per fiber cost two
//!   read-modify-writes per spawn). Only the one rescheduler of a parked fiber follows that
//!   pointer to another thread's worker (`reschedule`'s remote half), and it takes a count of
//!   its own before it touches the inbox. Until then the owner is alive: the fiber is
//!   registered there and cannot finish before the owner takes it from its inbox, and the
//!   owner's `run` returns only once its registry is empty (`cancel_all` waits for a remote
//!   unparker between its compare-exchange and its push), so the `Worker`'s `shared` still
//!   counts it. If the loop is left early (the worker thread unwinds), `Worker::drop` leaks
//!   one count of `shared` when a registered fiber cannot be claimed (its rescheduler may be
//!   in that window).
//! - **Recycled off its own stack.** A fiber that finished is recycled (stack back to the
//!   pool, registry entry dropped) by whichever context runs next, right after the switch.
//! - **Where tasks wait.** Async tasks (module `task`) wait in the worker's stealable queue
//!   (`tasks.deque`, a crossbeam deque: the owner pushes and pops, idle workers steal from the
//!   other end), the runtime's task injector, for tasks pinned to this worker `tasks.pinned`
//!   plus the inbox for wake-ups from other threads, and the task LIFO slot. A worker about
//!   to sleep with nothing runnable first takes injected tasks, then steals from the other
//!   workers' queues. `tasks.live` lists the tasks this worker must cancel at shutdown (it
//!   may hold finished ones; they are pruned as it grows).
//! - **Shutdown reaches every fiber.** Shutdown is seen by the loop, and by fibers every
//!   `BUSY_POLL_INTERVAL` switches (fibers that yield or ping-pong among themselves never
//!   return to the loop). From then on (`stopping`) every switch goes to the scheduler
//!   context, so `cancel_all` marks each fiber cancelled before it runs again: no fiber runs
//!   on uncancelled. Fibers that reach a worker's inbox after the worker exited (pinned spawns
//!   from another worker still cancelling) are cancelled by `Runtime::drop` once every worker
//!   has joined.
//! - **A fiber started from a task's poll** (`run_now`, for `fiber::Builder::spawn_now`).
//!   A task's poll runs in the scheduler context, so it may switch into a new fiber exactly
//!   as the loop does; fibers that switch "to the scheduler context" then resume the poll
//!   where it called `run_now`. Nothing else nests: tasks are polled only by `run_tasks`
//!   (which the poll is inside of, and fibers never call), and `current` is `None` again
//!   when the poll resumes ("one current fiber").
//! - **LIFO slots.** The worker has one fiber slot and one task slot (module `lifo`). A fiber
//!   that code running on this worker unparks (a send, a join completing, a lock released)
//!   goes into the fiber slot; a task that code running here wakes (`IDLE → SCHEDULED`,
//!   pinned or not) goes into the task slot, unless it is a batched task (below). The
//!   previous occupant goes to the back of its queue. Everything else keeps FIFO order:
//!   spawns, yields (`yield_now`, a task waking itself during its poll), remote wake-ups
//!   (inboxes, injector), and wake-ups the reactor dispatches (timers, epoll; the
//!   `dispatching` flag), so that a batch of readiness runs in arrival order. The next fiber to run is the fiber slot's, and the next task to poll the
//!   task slot's, unless `LIFO_CAP` (3) runs in a row came from that slot: then its occupant
//!   goes to the back of its queue and the queue's front runs. So a ping-pong pair gets at
//!   most 3 hand-offs before the rest of the queue runs, and `run_tasks` does not count slot
//!   polls against its budget (each budget unit allows at most `LIFO_CAP + 1` polls).
//!   Stealing: the fiber slot holds only started fibers (only a parked fiber is unparked),
//!   which never move anyway. The task slot is not stealable. Its task waits at most until
//!   the current task poll ends, or until the running fiber's next switch (`switch_away` goes
//!   to the scheduler context whenever a task is queued, slot included), the same wait as at
//!   the front of the deque; the worker never sleeps with a full slot (`has_runnable`), and a
//!   displaced occupant goes to the stealable queue, which wakes an idle worker as before.
//!   What a thief cannot take is the one task woken during a poll that then runs long:
//!   tokio's known LIFO pitfall, bounded here by the watchdog's warning about polls over
//!   `long_running_budget`.
//! - **Leaving the loop** (a [`LocalRuntime`](crate::LocalRuntime), whose one worker is the
//!   thread calling its `block_on`). The loop runs only inside `block_on`; the `block_on`
//!   fiber's end (return or panic) calls [`Worker::leave_soon`], which sets `leaving` with
//!   `stopping`, so its last switch goes to the scheduler context, which clears both and
//!   returns instead of cancelling. That context may resume inside a task's poll (the
//!   `block_on` fiber was switched to from a fiber the poll started: "a fiber started from a
//!   task's poll"), so the loop never sleeps in the reactor while `stopping` is set: it goes
//!   back to its top, which leaves. Nothing else is touched: the registry, the queues and the
//!   inbox keep every fiber and task, parked or runnable, for the next `block_on` (or the
//!   runtime's drop, which runs the loop once more to cancel them on this same thread). The
//!   thread never changes: a `LocalRuntime` is neither `Send` nor `Sync`, so "fibers stay
//!   home" holds across calls.
//! - **Batched tasks** (`task::Builder::batched`): a batched task's wake-ups never take the
//!   LIFO slot; they go to the back of its queue, as on tokio's current-thread scheduler, so
//!   it runs after the tasks already waiting. spindle-http's connections and HTTP/2 streams
//!   are batched: under load the queue then runs in phases (every ready connection's poll,
//!   then every stream's, ...), each phase's code staying in the instruction cache across
//!   the connections, where the LIFO slot (and the streams' eager first polls) ran each
//!   request's whole path (for HTTP/2, hyper's and h2's code, more than the L1 instruction
//!   cache holds) once per request (`docs/perf/scheduler.md`, "Batched tasks"). Other tasks
//!   keep the slot: a message's receiver behind busy tasks answers sooner with it.

mod cancel;
mod coop;
mod event_loop;
mod fiber_queue;
mod flush;
mod handoff;
mod lifo;
mod shared;
mod switch;
mod switcher;
mod task_queue;
mod timers;

use std::cell::{Cell, RefCell};
use std::sync::{Arc, Weak};
use std::task::Waker;
use std::time::Instant;

use super::metrics::FiberInfo;
use super::RuntimeShared;
use crate::fiber::control::FiberRef;
use crate::fiber::stack_pool::StackPool;
use crate::sys::epoll::Event;
use coop::IoBudget;
pub(crate) use coop::{consume_io_budget, consume_polled_io_budget, poll_io_budget};
pub(crate) use event_loop::Exit;
pub(crate) use fiber_queue::hand_off_held;
use fiber_queue::FiberQueue;
pub(crate) use flush::DeferredFlush;
pub(crate) use shared::WorkerShared;
pub(crate) use switch::reschedule;
use switcher::Switcher;
use task_queue::TaskQueue;
pub(crate) use timers::TimerHandle;
use timers::Timers;

/// How a runnable fiber or task joins this worker's queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Queued {
    /// At the back: a spawn, a yield, a task that woke itself during its poll.
    Back,
    /// Woken by this worker's own code: into the LIFO slot, to run next ("LIFO slots"),
    /// unless the reactor is dispatching.
    Woken,
}

std::thread_local! {
    /// The worker running on this thread, or null.
    static WORKER: Cell<*const Worker> = const { Cell::new(std::ptr::null()) };
}

/// The current thread's worker, if this thread is a worker.
///
/// The reference is valid for as long as code runs on this worker thread inside the loop
/// (`event_loop::run`): every fiber runs there, and the worker outlives all of them (they
/// finish or are cancelled before `run` returns). Callers must not keep it beyond that, which
/// holds for all crate-internal callers (they use it within one call).
#[inline]
pub(crate) fn current() -> Option<&'static Worker> {
    let ptr = WORKER.with(|w| w.get());
    // SAFETY: WORKER is set by `run` to a worker that lives on that frame until it clears
    // WORKER again before returning; see the function doc for the lifetime.
    unsafe { ptr.as_ref() }
}

/// A worker's thread-local state, grouped by mechanism.
///
/// `repr(C)` with the `Switcher` first: the switch paths then reach it at the worker's own
/// address, with no second pointer to keep in a register or on the stack across a switch.
#[repr(C)]
pub(crate) struct Worker {
    /// The running fiber, the scheduler context, the finished fiber, the stack pool, the
    /// registry and the live count (module `switcher`).
    switcher: Switcher,
    pub(crate) shared: Arc<WorkerShared>,
    /// The worker's thread (`Worker::new` runs on it).
    pub(crate) thread: std::thread::ThreadId,
    pub(crate) rt: Arc<RuntimeShared>,
    /// Runnable fibers (module `fiber_queue`).
    fibers: FiberQueue,
    /// Runnable and live tasks (module `task_queue`).
    tasks: TaskQueue,
    /// Timers of the fibers and futures of this worker (module `timers`).
    timers: Timers,
    /// Reused buffer of epoll events.
    events: RefCell<Vec<Event>>,
    /// Switches since the last non-blocking poll of the reactor (busy workers poll I/O and
    /// timers every `BUSY_POLL_INTERVAL` switches).
    switches: Cell<u32>,
    /// Shutdown was seen, or a local runtime's `block_on` fiber is done (`leaving`): every
    /// switch goes back to the scheduler context, which stops or leaves the loop.
    stopping: Cell<bool>,
    /// Set with `stopping` when the loop is to be left rather than stopped ("leaving the
    /// loop").
    leaving: Cell<bool>,
    /// Set while the reactor dispatches wake-ups (timers, epoll): those keep FIFO order.
    dispatching: Cell<bool>,
    /// Socket operations left before the fiber completing one yields (module `coop`).
    io_budget: IoBudget,
    /// Writers waiting for their deferred flush (module `flush`).
    flushes: RefCell<Vec<Weak<dyn DeferredFlush>>>,
}

impl Worker {
    pub(crate) fn new(rt: Arc<RuntimeShared>, index: usize) -> Worker {
        let pool = StackPool::new(rt.config.stack_cache, rt.config.stack_keep_warm);
        let deque = rt.workers[index].take_deque();
        let run_queue = rt.workers[index].run_queue.clone();
        let owner = Arc::as_ptr(&rt.workers[index]) as usize;
        // Worker::new runs on the worker's thread: its kernel id, for the watchdog.
        rt.workers[index]
            .tid
            .store(crate::sched::stuck::this_thread_tid(), std::sync::atomic::Ordering::Relaxed);
        let switcher_owner = rt.workers[index].clone();
        Worker {
            shared: rt.workers[index].clone(),
            thread: std::thread::current().id(),
            rt,
            fibers: FiberQueue::new(run_queue),
            tasks: TaskQueue::new(deque),
            // Worker::new runs on the worker's own thread.
            switcher: Switcher::new(pool, switcher_owner),
            timers: Timers::new(owner),
            events: RefCell::new(Vec::with_capacity(256)),
            switches: Cell::new(0),
            stopping: Cell::new(false),
            leaving: Cell::new(false),
            dispatching: Cell::new(false),
            io_budget: IoBudget::new(),
            flushes: RefCell::new(Vec::new()),
        }
    }

    /// This worker's fibers, for `Runtime::dump_fibers` (runs on the worker's thread).
    pub(crate) fn dump(&self) -> Vec<FiberInfo> {
        self.switcher.dump()
    }

    /// Whether anything is runnable here: a fiber, a task, or remote work in the inbox.
    fn has_runnable(&self) -> bool {
        self.fibers.has_runnable() || self.tasks.has_queued() || self.shared.driver.has_remote_work()
    }

    /// Adds a timer on this worker's wheel that wakes `waker` at `deadline` (module `timers`).
    #[inline]
    pub(crate) fn add_timer(&self, deadline: Instant, waker: Waker) -> TimerHandle {
        self.timers.add(deadline, waker)
    }

    /// Cancels a timer (no-op if it fired already, or if it is on another worker's wheel).
    #[inline]
    pub(crate) fn cancel_timer(&self, timer: TimerHandle) {
        self.timers.cancel(timer)
    }

    /// Whether `timer` is on this worker's wheel and not due yet (`Timers::not_due`).
    #[inline]
    pub(crate) fn timer_not_due(&self, timer: TimerHandle, deadline: Instant) -> bool {
        self.timers.not_due(timer, deadline)
    }

    /// When the idle loop must wake up for its next timer (`Timers::next_wake`).
    fn next_timer_deadline(&self) -> Option<Instant> {
        self.timers.next_wake(&self.rt.clock)
    }

    /// Fires the timers due on the runtime's clock now: for `time::advance`, which has just
    /// moved a paused clock (called from a fiber or task of this worker, which holds no
    /// borrow of the wheel).
    pub(crate) fn fire_due_timers(&self) {
        if !self.timers.is_empty() {
            self.fire_timers(Instant::now());
        }
    }

    /// Wakes the owners of every timer that is due, after the wheel is released; `now` is a
    /// real instant. The wake-ups keep FIFO order (`dispatching`, "LIFO slots").
    fn fire_timers(&self, now: Instant) {
        let Some(mut wakers) = self.timers.take_due(now, &self.rt.clock, || !self.has_runnable()) else {
            return;
        };
        self.dispatching.set(true);
        for w in wakers.drain(..) {
            w.wake();
        }
        self.dispatching.set(false);
        self.timers.give_back(wakers);
    }
}

impl Drop for Worker {
    /// Normally the registry is empty here (`cancel_all` ran every fiber to its end). If the
    /// loop was left early (the worker thread is unwinding), the parked fibers left are taken
    /// out of `PARKED`, so that no later unpark sends them to this gone worker, and their run
    /// references are dropped: the cell is freed once its other references go (its stack is
    /// leaked then, module `fiber::control`). Runnable ones are dropped with their queues, the
    /// run queue's here too (it lives in `shared` for the watchdog, which must not find fibers
    /// of a worker that is gone).
    fn drop(&mut self) {
        drop(self.fibers.take_all());
        let parked = self.switcher.registered();
        let mut unclaimed = false;
        for fiber in parked {
            // SAFETY: a registered pointer is to a live cell ("entries borrow the run
            // reference"); nothing runs or is recycled any more.
            let header = unsafe { &(*fiber).header };
            if header.park.claim_parked() {
                // SAFETY: we moved the fiber out of `PARKED`, so we are its one rescheduler and
                // own the run reference it forgot when it parked ("a started fiber owns
                // itself").
                drop(unsafe { FiberRef::from_raw(fiber) });
            } else {
                unclaimed = true;
            }
        }
        if unclaimed {
            // Runnable, or woken by a remote unparker that has yet to take its count of
            // `shared` ("owners outlive their reschedulers"): keep `shared` alive for good.
            std::mem::forget(self.shared.clone());
        }
    }
}
