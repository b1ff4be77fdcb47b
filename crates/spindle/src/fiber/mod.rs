//! Fibers: stackful coroutines scheduled by spindle's workers.
//!
//! Code in a fiber is plain blocking code. When it waits (on a channel, a join, a lock, later
//! I/O and timers) the fiber *parks*: its worker switches to another fiber instead of blocking
//! the thread. [`park`] and [`Fiber::unpark`] are the primitive every waiting operation is
//! built on; they follow `std::thread::park`'s contract, permit included, so a wake-up that
//! arrives before the park is never lost and callers re-check their condition in a loop.
//!
//! What spindle guarantees about fibers:
//! - A fiber never changes thread once it has started, so thread-locals and `!Send` values
//!   on its stack stay on their thread. Thread-locals belong to the worker, shared by all its
//!   fibers; per-fiber state goes in [`fiber_local!`](crate::fiber_local) statics.
//! - Every stack has a guard page; an overflow aborts with a message naming the fiber.
//! - A panic is caught at the fiber's entry and handed to [`JoinHandle::join`]; it never
//!   unwinds across a context switch.

// Layering: the fiber core is the lowest layer above `sys` (with `report`, `trace`, `error`,
// `lock` and `loom` as leaves): the switch (`arch`), stacks (`stack`, `stack_pool`,
// `overflow`), the control block (`block`, `block_cache`, `control`) and what the control
// block embeds: the park word (`park_word`), the join cell (`completion`) and its `Waiter`
// (`waiter`). The core and the scheduler (module `sched`) call each other; everything above
// them (`park`, `sync`, `net`, `time`, `task`, `runtime`) imports them and never the reverse.
// `spawn`, `join`, `local` and the functions of this file are the user's API on top, and may
// use `park`.

pub(crate) mod arch;
pub(crate) mod block;
pub(crate) mod block_cache;
pub(crate) mod cancel;
pub(crate) mod completion;
pub(crate) mod context;
pub(crate) mod control;
mod join;
mod local;
mod name;
mod no_park;
pub(crate) mod overflow;
pub(crate) mod park_word;
pub(crate) mod sanitizer;
mod spawn;
pub(crate) mod stack;
pub(crate) mod stack_pool;
mod valgrind;
pub(crate) mod waiter;

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

pub use crate::error::{CancelReason, Cancelled, JoinError};
use block::FiberRef;
pub use join::JoinHandle;
pub use local::FiberLocal;
pub use name::Name;
pub(crate) use no_park::check as check_no_park;
pub(crate) use no_park::held as no_park_held;
pub use no_park::{no_park, NoPark};
pub use spawn::{spawn, spawn_local, Builder};
pub use stack::{MAX_STACK_SIZE, MIN_STACK_SIZE};

use crate::sched::{worker, DEFAULT_STACK_SIZE};

/// A fiber's unique id within the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FiberId(u64);

/// How many ids a thread takes from the global counter at a time (see [`FiberId::next`]).
const ID_BLOCK: u64 = 1024;

impl FiberId {
    /// A new id. Each thread takes a block of `ID_BLOCK` ids from one global counter and hands
    /// them out locally, so a spawn costs no shared atomic: ids stay unique in the process
    /// (blocks never overlap) and increase on each thread, though not across threads.
    fn next() -> FiberId {
        static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);
        thread_local! {
            /// The next id of this thread's block, and the end of the block.
            static BLOCK: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
        }
        BLOCK.with(|block| {
            let (mut next, mut end) = block.get();
            if next == end {
                next = NEXT_BLOCK.fetch_add(ID_BLOCK, Ordering::Relaxed);
                end = next + ID_BLOCK;
            }
            block.set((next + 1, end));
            FiberId(next)
        })
    }

    pub fn as_u64(&self) -> u64 {
        self.0
    }
}

/// A handle to a fiber, to read its identity or wake it (like `std::thread::Thread`).
#[derive(Clone)]
pub struct Fiber {
    inner: FiberRef,
}

impl Fiber {
    pub fn id(&self) -> FiberId {
        FiberId(self.inner.header.id)
    }

    pub fn name(&self) -> Option<&str> {
        self.inner.header.name.as_deref()
    }

    /// Stack size in bytes, guard page included.
    pub fn stack_size(&self) -> usize {
        self.inner.header.stack_size
    }

    /// Wakes the fiber if it is parked, or makes its next [`park`] return at once.
    /// Callable from any thread.
    pub fn unpark(&self) {
        waiter::unpark(&self.inner);
    }
}

impl fmt::Debug for Fiber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fiber").field("id", &self.inner.header.id).field("name", &self.name()).finish()
    }
}

/// The fiber running this code, if the caller is a fiber.
pub fn try_current() -> Option<Fiber> {
    worker::current()?.current_fiber().map(|inner| Fiber { inner })
}

/// The fiber running this code.
///
/// # Panics
///
/// Outside a fiber.
pub fn current() -> Fiber {
    try_current().expect("spindle::fiber::current called outside a fiber")
}

/// Parks the current fiber until its [`Fiber::unpark`] is called; returns at once if an unpark
/// happened since the last park. May also return spuriously: call it in a loop that checks
/// the awaited condition. Outside a fiber, parks the thread (`std::thread::park`).
#[track_caller]
pub fn park() {
    crate::sched::api::park("park");
}

/// Lets the other runnable fibers of this worker run; the caller goes to the back of the
/// queue. Returns at once when nothing else is runnable. Outside a fiber, yields the thread.
pub fn yield_now() {
    check_no_park("yield_now");
    match worker::current() {
        Some(worker) => worker.yield_fiber(),
        None => thread::yield_now(),
    }
}

/// The default fiber stack size of runtimes built with default settings.
pub const fn default_stack_size() -> usize {
    DEFAULT_STACK_SIZE
}
