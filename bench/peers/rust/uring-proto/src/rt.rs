//! The prototype's fiber loop: stackful fibers (corosensei), one run queue and one I/O
//! driver per thread, run in passes.
//!
//! A pass resumes the fibers that were ready when it began, then hands the driver one turn
//! ([`Driver::pass`]): the epoll driver polls for readiness, the io_uring driver submits
//! every operation the pass queued in one `io_uring_enter` and reaps the completions. The
//! driver blocks only when no fiber is ready.
//!
//! Invariants:
//! - **one thread**: everything here is thread-local; a fiber is created, resumed and dropped
//!   on the thread of the loop that spawned it, and only that loop resumes it.
//! - **wakes are hints**: a fiber may be resumed without the thing it waits for having
//!   happened (a wake for an ended fiber whose slot was reused, two wakes for one wait); every
//!   caller of [`park`] re-checks its condition in a loop.
//! - **lent stacks outlive the kernel's use**: a fiber parked in an io_uring operation has lent
//!   the kernel a buffer on its stack; its stack is neither freed nor reused before that
//!   operation's completion was reaped. At the end of [`block_on`] the driver cancels what is
//!   still in flight and waits for every completion ([`Driver::quiesce`]) before the remaining
//!   fibers are dropped (which unwinds them).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::ptr;
use std::rc::Rc;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::epoll::Epoll;
use crate::uring::Uring;

/// Stack size of every fiber (committed lazily by the kernel, as spindle's default).
const STACK: usize = 256 * 1024;
/// A loop with ready fibers still polls epoll every this many passes (fairness to I/O).
const EPOLL_EVERY: u32 = 32;

/// Which I/O backend a loop drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Readiness, as spindle does it: try the syscall, on `EAGAIN` register the socket
    /// (edge-triggered, once) and park until `epoll_wait` reports it.
    Epoll,
    /// Completions: each operation is a submission entry, all of one pass submitted in one
    /// `io_uring_enter`.
    Uring {
        /// Multishot accept on listeners and multishot recv from a provided buffer ring.
        multishot: bool,
        /// `IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN`: completions are produced
        /// only inside `io_uring_enter`, never by interrupting the thread.
        defer: bool,
    },
}

impl Backend {
    /// Parses the command-line name: `epoll`, `uring`, `uring-multi`, `uring-defer`,
    /// `uring-multi-defer`.
    pub fn parse(name: &str) -> Option<Backend> {
        Some(match name {
            "epoll" => Backend::Epoll,
            "uring" => Backend::Uring { multishot: false, defer: false },
            "uring-multi" => Backend::Uring { multishot: true, defer: false },
            "uring-defer" => Backend::Uring { multishot: false, defer: true },
            "uring-multi-defer" => Backend::Uring { multishot: true, defer: true },
            _ => return None,
        })
    }
}

pub(crate) enum Driver {
    Epoll(Epoll),
    Uring(Box<Uring>),
}

impl Driver {
    /// One turn of the driver at the end of a pass; `block`: no fiber is ready.
    fn pass(&self, block: bool, passes: u32) {
        match self {
            Driver::Epoll(e) => {
                if block {
                    e.poll(-1);
                } else if passes.is_multiple_of(EPOLL_EVERY) {
                    e.poll(0);
                }
            }
            Driver::Uring(u) => u.pass(block),
        }
    }

    /// Cancels every operation still in flight and reaps until each has completed.
    fn quiesce(&self) {
        if let Driver::Uring(u) = self {
            u.quiesce();
        }
    }
}

type Fiber = Coroutine<(), (), (), DefaultStack>;

pub(crate) struct Rt {
    ready: RefCell<VecDeque<usize>>,
    /// `Some` while a fiber is suspended or not started; `None` while it runs or the slot is free.
    fibers: RefCell<Vec<Option<Fiber>>>,
    free: RefCell<Vec<usize>>,
    stacks: RefCell<Vec<DefaultStack>>,
    current: Cell<usize>,
    pub(crate) driver: Driver,
}

thread_local! {
    /// The loop of this thread while [`block_on`] runs, else null.
    static RT: Cell<*const Rt> = const { Cell::new(ptr::null()) };
    /// The yielder of the fiber running on this thread.
    static YIELDER: Cell<*const Yielder<(), ()>> = const { Cell::new(ptr::null()) };
}

/// This thread's loop. Panics outside [`block_on`].
pub(crate) fn rt() -> &'static Rt {
    let p = RT.with(Cell::get);
    assert!(!p.is_null(), "uring_proto: called outside uring_proto::block_on");
    // SAFETY: RT is non-null only while `block_on` holds the boxed `Rt` alive on its stack
    // frame, and every fiber (the only callers after setup) is dropped before it clears RT.
    unsafe { &*p }
}

/// The id of the fiber running now.
pub(crate) fn current() -> usize {
    rt().current.get()
}

/// Queues fiber `id` to run in a later pass.
pub(crate) fn wake(id: usize) {
    rt().ready.borrow_mut().push_back(id);
}

/// Suspends the running fiber until the loop resumes it (after a [`wake`]). Callers re-check
/// what they wait for (wakes are hints).
pub(crate) fn park() {
    let y = YIELDER.with(Cell::get);
    assert!(!y.is_null(), "uring_proto: park outside a fiber");
    // SAFETY: YIELDER holds the yielder of the fiber running on this thread (set when it
    // started and restored below after every resume); it lives on that fiber's stack, which
    // is the stack we are on.
    unsafe { (*y).suspend(()) };
    YIELDER.with(|c| c.set(y));
}

struct JoinSlot<T> {
    value: RefCell<Option<T>>,
    waiter: Cell<Option<usize>>,
}

/// Waits for a spawned fiber's return value.
pub struct JoinHandle<T> {
    slot: Rc<JoinSlot<T>>,
}

impl<T> JoinHandle<T> {
    /// Parks the calling fiber until the spawned one has returned, and gives its value.
    pub fn join(self) -> T {
        loop {
            if let Some(v) = self.slot.value.borrow_mut().take() {
                return v;
            }
            self.slot.waiter.set(Some(current()));
            park();
        }
    }
}

/// Spawns a fiber on this thread's loop.
pub fn spawn<T: 'static>(f: impl FnOnce() -> T + 'static) -> JoinHandle<T> {
    let slot = Rc::new(JoinSlot { value: RefCell::new(None), waiter: Cell::new(None) });
    let done = slot.clone();
    rt().spawn_fiber(Box::new(move || {
        let v = f();
        *done.value.borrow_mut() = Some(v);
        if let Some(w) = done.waiter.take() {
            wake(w);
        }
    }));
    JoinHandle { slot }
}

impl Rt {
    fn new(backend: Backend) -> io::Result<Rt> {
        let driver = match backend {
            Backend::Epoll => Driver::Epoll(Epoll::new()?),
            Backend::Uring { multishot, defer } => Driver::Uring(Box::new(Uring::new(multishot, defer)?)),
        };
        Ok(Rt {
            ready: RefCell::new(VecDeque::new()),
            fibers: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            stacks: RefCell::new(Vec::new()),
            current: Cell::new(usize::MAX),
            driver,
        })
    }

    fn spawn_fiber(&self, body: Box<dyn FnOnce()>) {
        let stack = self.stacks.borrow_mut().pop();
        let stack = stack.unwrap_or_else(|| DefaultStack::new(STACK).expect("fiber stack"));
        let co = Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
            YIELDER.with(|c| c.set(y as *const _));
            body();
        });
        let mut fibers = self.fibers.borrow_mut();
        let id = match self.free.borrow_mut().pop() {
            Some(id) => {
                fibers[id] = Some(co);
                id
            }
            None => {
                fibers.push(Some(co));
                fibers.len() - 1
            }
        };
        self.ready.borrow_mut().push_back(id);
    }

    /// Runs fiber `id` until it parks or returns; a stale wake (slot empty) is ignored.
    fn resume(&self, id: usize) {
        let Some(mut co) = self.fibers.borrow_mut().get_mut(id).and_then(Option::take) else {
            return;
        };
        self.current.set(id);
        match co.resume(()) {
            CoroutineResult::Yield(()) => self.fibers.borrow_mut()[id] = Some(co),
            CoroutineResult::Return(()) => {
                self.stacks.borrow_mut().push(co.into_stack());
                self.free.borrow_mut().push(id);
            }
        }
        self.current.set(usize::MAX);
    }
}

/// Restores RT to null when `block_on` ends, also by a panic.
struct Enter;

impl Drop for Enter {
    fn drop(&mut self) {
        RT.with(|c| c.set(ptr::null()));
    }
}

/// Runs `f` as a fiber on a new loop on this thread with `backend`, until `f` returns.
/// Fibers still parked then are dropped (unwound) after the driver has quiesced.
pub fn block_on<T: 'static>(backend: Backend, f: impl FnOnce() -> T + 'static) -> io::Result<T> {
    assert!(RT.with(Cell::get).is_null(), "uring_proto: nested block_on");
    let rt = Box::new(Rt::new(backend)?);
    RT.with(|c| c.set(&*rt as *const Rt));
    let _enter = Enter;
    let main = spawn(f);
    let mut passes = 0u32;
    while main.slot.value.borrow().is_none() {
        let n = rt.ready.borrow().len();
        for _ in 0..n {
            let id = rt.ready.borrow_mut().pop_front();
            if let Some(id) = id {
                rt.resume(id);
            }
        }
        passes = passes.wrapping_add(1);
        let block = rt.ready.borrow().is_empty();
        if block && main.slot.value.borrow().is_some() {
            break;
        }
        rt.driver.pass(block, passes);
    }
    rt.driver.quiesce();
    // Unwinds the fibers still parked: their sockets close through the driver.
    let left: Vec<Fiber> = rt.fibers.borrow_mut().iter_mut().filter_map(Option::take).collect();
    drop(left);
    rt.driver.quiesce();
    let v = main.slot.value.borrow_mut().take().expect("main fiber returned");
    Ok(v)
}
