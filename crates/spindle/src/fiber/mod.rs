//! Fibers: stackful coroutines scheduled by spindle's workers.
//!
//! Code in a fiber is plain blocking code. When it waits (on a channel, a join, a lock, later
//! I/O and timers) the fiber *parks*: its worker switches to another fiber instead of blocking
//! the thread. [`park`] and [`Fiber::unpark`] are the primitive every waiting operation is
//! built on; they follow `std::thread::park`'s contract, permit included, so a wake-up that
//! arrives before the park is never lost and callers re-check their condition in a loop.
//!
//! Soundness rules (see `docs/ARCHITECTURE.md`):
//! - A fiber never changes thread once it has started, so thread-locals and `!Send` values
//!   on its stack stay on their thread. Thread-locals belong to the worker, shared by all its
//!   fibers; per-fiber state goes in [`fiber_local!`](crate::fiber_local) statics.
//! - Every stack has a guard page; an overflow aborts with a message naming the fiber.
//! - A panic is caught at the fiber's entry and handed to [`JoinHandle::join`]; it never
//!   unwinds across a context switch.

pub(crate) mod arch;
pub(crate) mod cancel;
pub(crate) mod cell;
mod local;
mod no_park;
pub(crate) mod overflow;
pub(crate) mod sanitizer;
pub(crate) mod stack;
pub(crate) mod sync_word;
mod valgrind;

use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

pub use cell::Cancelled;
use cell::{FiberCell, FiberRef, Output, StageImpl};
pub use local::FiberLocal;
pub(crate) use no_park::check as check_no_park;
pub use no_park::{no_park, NoPark};
pub use stack::{MAX_STACK_SIZE, MIN_STACK_SIZE};

use crate::sched::caller::{blocking_caller, Caller};
use crate::sched::{worker, Runtime, DEFAULT_STACK_SIZE};
use crate::sync::waiter::Waiter;

/// A fiber's unique id within the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FiberId(u64);

impl FiberId {
    fn next() -> FiberId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        FiberId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    pub fn as_u64(&self) -> u64 {
        self.0
    }
}

/// Configures a fiber before spawning it: its name and stack size.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let h = spindle::fiber::Builder::new()
///         .name("worker-1")
///         .stack_size(64 * 1024)
///         .spawn(|| spindle::fiber::current().name().map(str::to_owned))
///         .unwrap();
///     assert_eq!(h.join().unwrap().as_deref(), Some("worker-1"));
/// });
/// ```
#[derive(Debug, Default)]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    worker: Option<usize>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the fiber; the name shows in [`Fiber::name`] and in the stack overflow message.
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = Some(name.into());
        self
    }

    /// Stack size in bytes, guard page included, rounded up to whole pages (16 KiB to 1 GiB).
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// Starts the fiber on worker `index` (modulo the runtime's worker count) and keeps it
    /// there: it is never handed to another worker, even before it starts. For servers that
    /// place connections themselves (one per worker in turn).
    pub fn worker(mut self, index: usize) -> Builder {
        self.worker = Some(index);
        self
    }

    /// Spawns the fiber on the current worker (or the one chosen with [`Builder::worker`]).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a stack size out of range; the system's error (`ENOMEM`: out of
    /// memory or of mappings) when no stack can be mapped. The stack is taken at spawn, so a
    /// fiber that spawned will start.
    ///
    /// # Panics
    ///
    /// Outside a fiber of a spindle runtime (use [`Builder::spawn_on`] there).
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let worker = worker::current().expect(
            "spindle::spawn called outside a spindle runtime; use Runtime::spawn or Runtime::block_on",
        );
        let target = self.worker;
        let (fiber, handle) = self.build(f, worker.rt.config.stack_size, target.is_some())?;
        fiber.header.stack.set(Some(worker.alloc_stack(fiber.header.stack_size)?));
        match target {
            Some(i) => worker.rt.submit_to(i, fiber),
            None => worker.place_new(fiber),
        }
        Ok(handle)
    }

    /// Spawns the fiber on the current worker for good: it starts there and, like every
    /// started fiber, never leaves it; it is never handed to an idle worker. So `f` need not
    /// be `Send` (it may capture `Rc`s or other `!Send` state of this worker thread).
    ///
    /// # Errors
    ///
    /// As [`Builder::spawn`].
    ///
    /// # Panics
    ///
    /// Outside a fiber or task of a spindle runtime.
    pub fn spawn_local<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + 'static,
        T: Send + 'static,
    {
        let worker = worker::current().expect("spindle::fiber::spawn_local called outside a spindle worker");
        let local = LocalFn { f: std::mem::ManuallyDrop::new(f), thread: thread::current().id() };
        let (fiber, handle) = self.build(move || local.call(), worker.rt.config.stack_size, true)?;
        fiber.header.stack.set(Some(worker.alloc_stack(fiber.header.stack_size)?));
        worker.place_new(fiber);
        Ok(handle)
    }

    /// Spawns the fiber on `runtime`, from any thread.
    pub fn spawn_on<F, T>(self, runtime: &Runtime, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let target = self.worker;
        let (fiber, handle) = self.build(f, runtime.config().stack_size, target.is_some())?;
        match target {
            Some(i) => runtime.submit_to(i, fiber),
            None => runtime.submit(fiber),
        }
        Ok(handle)
    }

    /// Spawns the fiber on the runtime behind a [`Handle`](crate::Handle) (through the injector).
    pub(crate) fn spawn_on_shared<F, T>(
        self,
        rt: &crate::sched::RuntimeShared,
        f: F,
    ) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (fiber, handle) = self.build(f, rt.config.stack_size, false)?;
        rt.inject(fiber);
        Ok(handle)
    }

    fn build<F, T>(self, f: F, default_stack: usize, pinned: bool) -> io::Result<(FiberRef, JoinHandle<T>)>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let stack_size = match self.stack_size {
            Some(size) => stack::normalize_size(size)?,
            None => default_stack,
        };
        let mut header =
            cell::Header::new(FiberId::next().0, self.name.map(String::into_boxed_str), stack_size);
        header.pinned = pinned;
        let cell = Arc::new(FiberCell { header, stage: StageImpl::<F, T>::new(f) });
        let output: Arc<FiberCell<dyn Output<T>>> = cell.clone();
        Ok((
            cell,
            JoinHandle {
                cell: output,
                registered: std::cell::Cell::new(false),
                forward: None,
                _not_sync: PhantomData,
            },
        ))
    }
}

/// Spawns a fiber on the current worker and returns its join handle.
///
/// # Panics
///
/// Outside a fiber of a spindle runtime (use [`Runtime::spawn`] there), and when no stack can
/// be mapped (out of memory or of mappings), as `std::thread::spawn` panics when it cannot
/// start a thread; [`Builder::spawn`] returns that error instead.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new().spawn(f).unwrap_or_else(|e| panic!("spindle::spawn failed: {e}"))
}

/// Spawns a fiber that stays on the current worker (see [`Builder::spawn_local`]): `f` need
/// not be `Send`.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let counter = std::rc::Rc::new(std::cell::Cell::new(0));
///     let c = counter.clone();
///     let h = spindle::fiber::spawn_local(move || c.set(c.get() + 1));
///     h.join().unwrap();
///     assert_eq!(counter.get(), 1);
/// });
/// ```
///
/// # Panics
///
/// Outside a fiber or task of a spindle runtime, and when no stack can be mapped (see
/// [`spawn`]).
pub fn spawn_local<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + 'static,
    T: Send + 'static,
{
    Builder::new().spawn_local(f).unwrap_or_else(|e| panic!("spindle::fiber::spawn_local failed: {e}"))
}

/// The closure of a `spawn_local` fiber, which need not be `Send`.
struct LocalFn<F> {
    f: std::mem::ManuallyDrop<F>,
    /// The thread that spawned it, which is the only one that runs or drops `f`.
    thread: thread::ThreadId,
}

impl<F: FnOnce() -> T, T> LocalFn<F> {
    fn call(mut self) -> T {
        // SAFETY: `f` is taken once, here; `self` is then forgotten, so Drop never sees it.
        let f = unsafe { std::mem::ManuallyDrop::take(&mut self.f) };
        std::mem::forget(self);
        f()
    }
}

impl<F> Drop for LocalFn<F> {
    fn drop(&mut self) {
        if thread::current().id() == self.thread {
            // SAFETY: `f` was not taken (`call` forgets `self`), and is dropped once, here.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.f) };
        }
        // Elsewhere (only if the worker thread died, leaving the fiber unrun): leak it.
    }
}

// SAFETY: a pinned fiber (`Header::pinned`) is queued only on the worker that spawned it
// (`place_new`, `balance` and the injector never take it) and so starts and runs there: `f`
// is called on the spawning thread. The fiber's cell may be freed on another thread (its
// join handle is Send); `f` is then either consumed already or, unrun, dropped only on the
// spawning thread (the worker's shutdown aborts unstarted fibers there) or leaked by the
// Drop above. So `f` itself never crosses threads.
unsafe impl<F> Send for LocalFn<F> {}

/// Owns the right to wait for a fiber and take its result, like `std::thread::JoinHandle`.
/// Dropping it detaches the fiber.
pub struct JoinHandle<T> {
    cell: Arc<FiberCell<dyn Output<T>>>,
    /// The join slot takes one waiter, once: set when `wait_until` registered the caller.
    registered: std::cell::Cell<bool>,
    /// Set when a poll registered: the join slot's waiter, which wakes the latest poller.
    forward: Option<Arc<ForwardWake>>,
    _not_sync: PhantomData<*const ()>,
}

/// The join slot's waiter for a handle that is awaited: the slot takes one waiter for good,
/// while each poll may bring another waker, so the slot wakes this, which wakes the latest.
#[derive(Default)]
struct ForwardWake(std::sync::Mutex<Option<std::task::Waker>>);

impl std::task::Wake for ForwardWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let waker = crate::sync::lock(&self.0).take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// Awaiting a fiber's handle (from an async task, or in `select!`) gives what
/// [`JoinHandle::join`] gives, without blocking the worker.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let fiber = rt.spawn(|| 6 * 7);
/// let task = rt.spawn_async(async move { fiber.await.unwrap() });
/// assert_eq!(task.join().unwrap(), 42);
/// ```
impl<T> std::future::Future for JoinHandle<T> {
    type Output = thread::Result<T>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = self.get_mut();
        let header = &this.cell.header;
        if !header.is_complete() {
            match &this.forward {
                Some(forward) => *crate::sync::lock(&forward.0) = Some(cx.waker().clone()),
                None => {
                    assert!(
                        !this.registered.get(),
                        "a fiber JoinHandle that a blocking call waited on cannot then be awaited"
                    );
                    let forward = Arc::new(ForwardWake(std::sync::Mutex::new(Some(cx.waker().clone()))));
                    let waker = std::task::Waker::from(forward.clone());
                    this.registered.set(true);
                    this.forward = Some(forward);
                    if header.set_join_waiter(Waiter::Task(waker)) {
                        return std::task::Poll::Pending;
                    }
                }
            }
            // Completion may have come before the waker was stored: check again.
            if !header.is_complete() {
                return std::task::Poll::Pending;
            }
        }
        std::task::Poll::Ready(this.cell.stage.take())
    }
}

// SAFETY: the handle only reaches the result through the join protocol (module `cell`,
// ground rule 3), which is thread-safe; T: Send because the result moves to the joiner.
unsafe impl<T: Send> Send for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// Waits for the fiber to finish and returns its result, or the payload of its panic
    /// (a [`Cancelled`] payload if its runtime shut down first). In a fiber this parks the
    /// fiber; on any other thread it blocks the thread.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker, even when the fiber has finished (so that the
    /// misuse shows the first time, not only when the join would wait): `.await` a task's
    /// handle there, or join from a fiber.
    #[track_caller]
    pub fn join(self) -> thread::Result<T> {
        blocking_caller("join");
        let header = &self.cell.header;
        assert!(self.forward.is_none(), "a fiber JoinHandle that was polled as a future must be awaited");
        if !header.is_complete() && (self.registered.get() || header.set_join_waiter(Waiter::current())) {
            while !header.is_complete() {
                crate::sync::waiter::park_on("join");
            }
        }
        self.cell.stage.take()
    }

    /// Waits at most `timeout` for the fiber: `Ok` with what [`join`](Self::join) gives, or,
    /// if it is still running, `Err` with the handle back (to join or cancel later). The
    /// caller becomes the fiber's joiner: join it later from the same fiber or thread.
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = spindle::Runtime::new().unwrap();
    /// rt.block_on(|| {
    ///     let slow = spindle::spawn(|| spindle::time::sleep(Duration::from_millis(50)));
    ///     let slow = slow.join_timeout(Duration::from_millis(1)).unwrap_err();
    ///     slow.join().unwrap();
    /// });
    /// ```
    pub fn join_timeout(self, timeout: std::time::Duration) -> Result<thread::Result<T>, JoinHandle<T>> {
        match crate::sync::wait::deadline_in(timeout) {
            Some(deadline) => self.join_deadline(deadline),
            None => Ok(self.join()),
        }
    }

    /// Waits until `deadline` at the latest for the fiber; see [`join_timeout`](Self::join_timeout).
    pub fn join_deadline(self, deadline: std::time::Instant) -> Result<thread::Result<T>, JoinHandle<T>> {
        assert!(self.forward.is_none(), "a fiber JoinHandle that was polled as a future must be awaited");
        if self.wait_until(deadline) {
            Ok(self.cell.stage.take())
        } else {
            Err(self)
        }
    }

    /// Cancels the fiber: it unwinds (running destructors) with a [`Cancelled`] payload at its
    /// next suspension point (a park, yield, sleep, lock, channel or socket wait), or never
    /// starts if it has not yet. `join` then returns that payload, unless the fiber finished
    /// first. Code that never suspends cannot be interrupted. Callable from any thread.
    pub fn cancel(&self) {
        let fiber = self.cell.stage.fiber_ref();
        fiber.header.set_cancelled();
        worker::unpark(&fiber);
    }

    /// Waits at most until `deadline` for the fiber to finish; true if it has. Registers the
    /// caller as the joiner for good: the same fiber or thread must be the one that joins.
    pub(crate) fn wait_until(&self, deadline: std::time::Instant) -> bool {
        let header = &self.cell.header;
        if header.is_complete() {
            return true;
        }
        match blocking_caller("join (with timeout)") {
            Caller::Fiber(w) => {
                let waker = w.current_waker();
                // The join slot takes one waiter for good; our fiber is it from now on.
                if !self.registered.get() && !header.set_join_waiter(Waiter::current()) {
                    return true;
                }
                self.registered.set(true);
                let timer = w.add_timer(deadline, waker);
                while !header.is_complete() && std::time::Instant::now() < deadline {
                    crate::sync::waiter::park_on("join (with timeout)");
                }
                w.cancel_timer(timer);
            }
            Caller::Thread => {
                if !self.registered.get() && !header.set_join_waiter(Waiter::current()) {
                    return true;
                }
                self.registered.set(true);
                while !header.is_complete() {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    thread::park_timeout(left);
                }
            }
        }
        header.is_complete()
    }

    /// Whether the fiber has finished (its result is ready).
    pub fn is_finished(&self) -> bool {
        self.cell.header.is_complete()
    }

    pub fn id(&self) -> FiberId {
        FiberId(self.cell.header.id)
    }

    pub fn name(&self) -> Option<&str> {
        self.cell.header.name.as_deref()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.cell.header.id).field("name", &self.name()).finish()
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
        worker::unpark(&self.inner);
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
pub fn park() {
    crate::sync::waiter::park();
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
