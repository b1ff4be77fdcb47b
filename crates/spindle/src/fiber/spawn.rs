//! Spawning fibers: [`Builder`], [`spawn`] and [`spawn_local`].
//!
//! A spawn builds the fiber's control block (module `fiber::control`), takes its stack from
//! the worker's pool (so a fiber that spawned will start), and hands it to the scheduler
//! (`Worker::place_new`; from outside a runtime, `Runtime::spawn` and
//! `fiber::Builder::spawn_on` in module `runtime` inject it). The first run happens in
//! `sched::worker::switch`.

use std::io;
use std::mem::ManuallyDrop;
use std::thread;

use super::block::{self, OutputRef};
use super::control::{FiberRef, Header, Job, StageImpl};
use super::{stack, FiberId, JoinHandle};
use crate::sched::worker;

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
    name: Option<super::Name>,
    stack_size: Option<usize>,
    worker: Option<usize>,
    /// The span the fiber runs in; `None`: the spawner's current span (feature `tracing`).
    /// Boxed, as in the header: a builder is moved through every spawn function.
    #[cfg(feature = "tracing")]
    span: Option<Box<tracing::Span>>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the fiber; the name shows in [`Fiber::name`](super::Fiber::name), in the stack
    /// overflow message and in fiber dumps. A name of up to [`Name::INLINE`](super::Name::INLINE)
    /// bytes is kept without an allocation.
    pub fn name(mut self, name: impl Into<super::Name>) -> Builder {
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

    /// Runs the fiber's body inside `span` (feature `tracing`): entered when the body starts,
    /// exited while the fiber is parked, closed when it ends. Without it, a fiber runs in the
    /// spawner's current span, as a future wrapped in tracing's `in_current_span` does;
    /// `instrument(Span::none())` runs it in none.
    ///
    /// ```
    /// # #[cfg(feature = "tracing")] {
    /// let rt = spindle::Runtime::new().unwrap();
    /// rt.block_on(|| {
    ///     let span = tracing::info_span!("request", id = 7);
    ///     spindle::fiber::Builder::new().instrument(span).spawn(|| tracing::info!("inside")).unwrap().join().unwrap();
    /// });
    /// # }
    /// ```
    #[cfg(feature = "tracing")]
    pub fn instrument(mut self, span: tracing::Span) -> Builder {
        self.span = Some(Box::new(span));
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
    #[track_caller]
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let worker = worker::current().expect(
            "spindle::spawn called outside a spindle runtime; use Runtime::spawn or Runtime::block_on",
        );
        let target = self.worker;
        let (fiber, output) = self.build(f, worker.rt.config.stack_size, target.is_some(), Some(worker))?;
        match target {
            Some(i) => worker.rt.place_pinned(i, fiber),
            None => worker.place_new(fiber),
        }
        Ok(JoinHandle::new(output))
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
    #[track_caller]
    pub fn spawn_local<F, T>(self, mut f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + 'static,
        T: Send + 'static,
    {
        let worker = worker::current().expect("spindle::fiber::spawn_local called outside a spindle worker");
        let thread = worker.thread;
        let write_job = |job, f: Moving<'_, F>| {
            // SAFETY: `job` is the job's place in a fresh block (`build_with`); `f` is read
            // once, and forgotten below.
            unsafe { LocalFn::write(job, f.take(), thread) }
        };
        // SAFETY: `LocalFn::write` writes a whole `LocalFn`.
        let built = unsafe {
            self.build_with(Moving(&mut f), write_job, worker.rt.config.stack_size, true, Some(worker))
        };
        let (fiber, output) = moved(f, built)?;
        worker.place_new(fiber);
        Ok(JoinHandle::new(output))
    }

    /// Spawns the fiber on the current worker and, when called from an async task's poll,
    /// runs it at once: `spawn_now` returns when the fiber first parks or finishes. A fiber
    /// that did not park has finished by then, and its handle is ready (awaiting it takes
    /// the result without waiting). For blocking-style work that a task hands to a fiber and
    /// that often completes without waiting (a server's request handler): no queueing, and
    /// no wake-up of the task when it does not park. Called from a fiber (or while the
    /// runtime shuts down) it queues the fiber as [`Builder::spawn_local`] does: one fiber
    /// cannot run another inside itself.
    ///
    /// The fiber starts on this worker and stays there, so `f` need not be `Send`. The
    /// calling task's poll is suspended while the fiber runs, and other fibers of this
    /// worker may run before the call returns (when the new fiber parks, the worker may
    /// switch to them first): a fiber that computes for long holds up the calling task.
    ///
    /// # Errors
    ///
    /// As [`Builder::spawn`].
    ///
    /// # Panics
    ///
    /// Outside a fiber or task of a spindle runtime.
    #[track_caller]
    pub fn spawn_now<F, T>(self, mut f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + 'static,
        T: Send + 'static,
    {
        let worker =
            worker::current().expect("spindle::fiber::Builder::spawn_now called outside a spindle worker");
        let thread = worker.thread;
        let write_job = |job, f: Moving<'_, F>| {
            // SAFETY: `job` is the job's place in a fresh block (`build_with`); `f` is read
            // once, and forgotten below.
            unsafe { LocalFn::write(job, f.take(), thread) }
        };
        // SAFETY: `LocalFn::write` writes a whole `LocalFn`.
        let built = unsafe {
            self.build_with(Moving(&mut f), write_job, worker.rt.config.stack_size, true, Some(worker))
        };
        let (fiber, output) = moved(f, built)?;
        worker.run_now(fiber);
        Ok(JoinHandle::new(output))
    }

    /// The worker chosen with [`Builder::worker`], if any.
    pub(crate) fn target_worker(&self) -> Option<usize> {
        self.worker
    }

    /// Builds the fiber's control block. With `worker` (a spawn on a worker), its stack is
    /// taken from that worker's pool at once, so that a fiber that spawned will start; without,
    /// its owner takes one on the first run. Returns the run reference and the join handle's
    /// reference, which the caller wraps in the `JoinHandle` once the fiber is placed: a handle
    /// built before the call that places the fiber was kept in a temporary across it, and
    /// copying it out after the call read a half-written word (a store-to-load forwarding
    /// stall on every spawn).
    #[inline]
    #[track_caller]
    pub(crate) fn build<F, T>(
        self,
        mut f: F,
        default_stack: usize,
        pinned: bool,
        worker: Option<&worker::Worker>,
    ) -> io::Result<(FiberRef, OutputRef<T>)>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let write_job = |job: *mut F, f: Moving<'_, F>| {
            // SAFETY: `job` is the job's place in a fresh block (`build_with`); `f` is read
            // once, and forgotten below.
            unsafe { job.write(f.take()) }
        };
        // SAFETY: `write_job` writes a whole `F`.
        let built = unsafe { self.build_with(Moving(&mut f), write_job, default_stack, pinned, worker) };
        moved(f, built)
    }

    /// [`build`](Self::build) for the job that `write_job(job, input)` writes at `job`. The
    /// job is written into the block after everything that might fail or unwind (the block,
    /// the name, the id, the stack), straight from where the spawner's closure is
    /// ([`Moving`]; "`Vacant`", module `fiber::block`): a server's request inside it moved
    /// through six more copies, one per wrapper and per function it was handed to.
    ///
    /// # Safety
    ///
    /// `write_job` writes a whole `J` at the pointer it is given.
    #[inline(always)]
    #[track_caller]
    unsafe fn build_with<A, J, T>(
        self,
        input: Moving<'_, A>,
        write_job: impl FnOnce(*mut J, Moving<'_, A>),
        default_stack: usize,
        pinned: bool,
        worker: Option<&worker::Worker>,
    ) -> io::Result<(FiberRef, OutputRef<T>)>
    where
        J: Job<T> + 'static,
        T: Send + 'static,
    {
        let stack_size = match self.stack_size {
            Some(size) => stack::normalize_size(size)?,
            None => default_stack,
        };
        let name = self.name;
        let id = FiberId::next().0;
        let site = std::panic::Location::caller();
        #[cfg(feature = "tracing")]
        let span = self.span.or_else(super::context::spawner_span);
        let building = block::Vacant::<StageImpl<J, T>>::take().write_header(move || {
            let header = Header::new(id, name, stack_size, site);
            if pinned {
                header.pin();
            }
            header
        });
        #[cfg(feature = "tracing")]
        if let Some(span) = span.filter(|s| !s.is_none()) {
            building.header().span.set(Some(span));
        }
        {
            let header = building.header();
            crate::trace::fiber_spawned(header.id, || header.name.as_deref(), header.site);
        }
        if let Some(worker) = worker {
            // Straight into the header: a stack returned by value and then moved in was
            // copied through temporaries whose reloads stalled on the stores they only partly
            // overlapped (store-to-load forwarding fails then), on every spawn. On an
            // error the unfilled block is given back (`Building`'s drop).
            worker.alloc_stack_into(stack_size, &building.header().stack)?;
        }
        // SAFETY: `write_pending` writes a whole stage, whose job `write_job` writes whole
        // (the caller's contract).
        Ok(unsafe { building.fill(input, |stage, input| StageImpl::write_pending(stage, input, write_job)) })
    }
}

/// Spawns a fiber on the current worker and returns its join handle.
///
/// # Panics
///
/// Outside a fiber of a spindle runtime (use [`Runtime::spawn`](crate::Runtime::spawn) there), and when no stack can
/// be mapped (out of memory or of mappings), as `std::thread::spawn` panics when it cannot
/// start a thread; [`Builder::spawn`] returns that error instead.
#[track_caller]
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
#[track_caller]
pub fn spawn_local<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + 'static,
    T: Send + 'static,
{
    Builder::new().spawn_local(f).unwrap_or_else(|e| panic!("spindle::fiber::spawn_local failed: {e}"))
}

/// A spawn's closure on its way into the fiber's block: a reference to where the spawner
/// holds it, read once by the write into the block ([`Moving::take`]), after which the
/// spawner forgets its own ([`moved`]). Passed by value through the spawn's functions, the
/// closure was copied at each (the unwinding paths of the calls in between kept every copy
/// alive), and a `ManuallyDrop` around it was one more copy.
struct Moving<'a, A>(&'a mut A);

impl<A> Moving<'_, A> {
    /// The value, read out.
    ///
    /// # Safety
    ///
    /// The caller moves it into the block, and `build_with` succeeds after this (nothing
    /// between this and its return fails or unwinds), so that the spawner forgets its own.
    #[inline(always)]
    unsafe fn take(self) -> A {
        // SAFETY: `self.0` is a live value; the caller's contract makes this the one move of it.
        unsafe { std::ptr::read(self.0) }
    }
}

/// The spawner's half of [`Moving`]: a `build_with` that succeeded moved `f` into the block
/// (forgotten here: dropped there); one that failed (the stack size, no stack) returned before
/// it read it (dropped here).
#[inline(always)]
fn moved<F, R>(f: F, built: io::Result<R>) -> io::Result<R> {
    match built {
        Ok(built) => {
            std::mem::forget(f);
            Ok(built)
        }
        Err(e) => {
            drop(f);
            Err(e)
        }
    }
}

/// The closure of a `spawn_local` fiber, which need not be `Send`.
struct LocalFn<F> {
    f: ManuallyDrop<F>,
    /// The thread that spawned it, which is the only one that runs or drops `f`: the worker's,
    /// read from the worker (`thread::current()` would cost a thread-local access and a
    /// reference count taken and given back per spawn).
    thread: thread::ThreadId,
}

impl<F> LocalFn<F> {
    /// Writes `LocalFn { f, thread }` at `job`, field by field: `f` moves once, into place.
    ///
    /// # Safety
    ///
    /// `job` is valid for writes of a `LocalFn<F>`.
    #[inline(always)]
    unsafe fn write(job: *mut LocalFn<F>, f: F, thread: thread::ThreadId) {
        // SAFETY: `job` is valid for writes (the caller's contract); `ManuallyDrop<F>` has
        // `F`'s layout.
        unsafe { std::ptr::addr_of_mut!((*job).f).cast::<F>().write(f) };
        // SAFETY: as above.
        unsafe { std::ptr::addr_of_mut!((*job).thread).write(thread) };
    }
}

impl<F: FnOnce() -> T, T> Job<T> for LocalFn<F> {
    #[inline(always)]
    fn call(mut self) -> T {
        // SAFETY: `f` is taken once, here; `self` is then forgotten, so Drop never sees it.
        let f = unsafe { ManuallyDrop::take(&mut self.f) };
        std::mem::forget(self);
        f()
    }
}

impl<F> Drop for LocalFn<F> {
    fn drop(&mut self) {
        if thread::current().id() == self.thread {
            // SAFETY: `f` was not taken (`call` forgets `self`), and is dropped once, here.
            unsafe { ManuallyDrop::drop(&mut self.f) };
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
