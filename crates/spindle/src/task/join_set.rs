//! [`JoinSet`]: fibers and tasks whose results are taken in the order they finish.
//!
//! # Invariants
//!
//! - **Every member reports once.** Each member's body (a task's future, a fiber's closure)
//!   owns a `Report` that, when dropped, queues the member's id on the set's `Ready` list and
//!   wakes the set's waiter. The body drops it however it ends: returning, panicking,
//!   unwinding after an abort, or dropped unstarted (a fiber aborted before its first run, a
//!   task cancelled before its first poll, a runtime shutting down).
//! - **A reported member completes without waiting for anyone.** The report comes as the body
//!   ends, before its result is published; what is left (the worker storing the result, a
//!   task's output) follows on the member's own worker without a wait on another party. So a
//!   waiter that took a reported id joins that member's handle and gets its result at once, or
//!   after that last step.
//! - **Results stay until taken.** The set owns every member's handle, and so its result,
//!   until `join_next` returns it; `taking` holds the handle whose id was taken while its
//!   result is still on its way, so that a `join_next_async` future dropped in between loses
//!   nothing. Every id on `Ready` is of a member still in `members`.
//! - **One waiter.** Only the set's owner waits (every wait takes `&mut self`), so a wake-up
//!   is never passed on. A blocking wait is a `Wait` of its own, left on every way out;
//!   `slot` is the wait of the polls, left when the set drops. Dropping the set aborts every
//!   member it still holds.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::error::JoinError;
use crate::lock::lock;
use crate::park::wait::{pass_none, Wait, WaitSlot};
use crate::park::{self, WaitList};
use crate::time::timeout::Elapsed;

/// A set of fibers and tasks of one result type, joined in the order they finish (tokio's
/// `JoinSet`, with fibers). Results stay in the set until [`join_next`](Self::join_next) (a
/// fiber, blocking-style) or [`join_next_async`](Self::join_next_async) (a task) takes them;
/// dropping the set aborts every fiber and task still in it.
///
/// ```
/// use std::time::Duration;
/// use spindle::task::JoinSet;
///
/// let rt = spindle::Builder::new().start_paused(true).build().unwrap(); // sleeps end at once
/// rt.block_on(|| {
///     let mut set = JoinSet::new();
///     for ms in [30u64, 10, 20] {
///         set.spawn_fiber(move || {
///             spindle::time::sleep(Duration::from_millis(ms));
///             ms
///         });
///     }
///     set.spawn(async { 0u64 }); // a task
///     let mut order = Vec::new();
///     while let Some(done) = set.join_next() {
///         order.push(done.unwrap());
///     }
///     assert_eq!(order, [0, 10, 20, 30]);
/// });
/// ```
pub struct JoinSet<T> {
    members: HashMap<u64, Member<T>>,
    next_id: u64,
    ready: Arc<Mutex<Ready>>,
    /// The member whose id was taken, until its result is ("results stay until taken").
    taking: Option<Member<T>>,
    /// The owner's wait on `ready` ("one waiter").
    slot: WaitSlot,
}

/// The ids of the members that ended, in that order, and the set's waiter.
#[derive(Debug, Default)]
struct Ready {
    ids: VecDeque<u64>,
    waiters: WaitList,
}

fn waiters(r: &mut Ready) -> &mut WaitList {
    &mut r.waiters
}

/// Reports a member's end when dropped ("every member reports once").
struct Report {
    id: u64,
    ready: Arc<Mutex<Ready>>,
}

impl Drop for Report {
    fn drop(&mut self) {
        let wake = {
            let mut r = lock(&self.ready);
            r.ids.push_back(self.id);
            r.waiters.take_all()
        };
        wake.into_iter().for_each(park::wake);
    }
}

enum Member<T> {
    Task(super::join::JoinHandle<T>),
    Fiber(crate::fiber::JoinHandle<T>),
}

impl<T> Member<T> {
    fn abort(&self) {
        match self {
            Member::Task(h) => h.abort(),
            Member::Fiber(h) => h.abort(),
        }
    }

    fn is_finished(&self) -> bool {
        match self {
            Member::Task(h) => h.is_finished(),
            Member::Fiber(h) => h.is_finished(),
        }
    }

    #[track_caller]
    fn join(self) -> Result<T, JoinError> {
        match self {
            Member::Task(h) => h.join(),
            Member::Fiber(h) => h.join(),
        }
    }

    fn poll_result(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, JoinError>> {
        match self {
            Member::Task(h) => Pin::new(h).poll(cx),
            Member::Fiber(h) => Pin::new(h).poll(cx),
        }
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> Self {
        JoinSet::new()
    }
}

impl<T> JoinSet<T> {
    /// An empty set.
    pub fn new() -> JoinSet<T> {
        JoinSet {
            members: HashMap::new(),
            next_id: 0,
            ready: Arc::new(Mutex::new(Ready::default())),
            taking: None,
            slot: WaitSlot::default(),
        }
    }

    /// How many fibers and tasks are in the set: running, or finished with a result not yet
    /// taken.
    pub fn len(&self) -> usize {
        self.members.len() + usize::from(self.taking.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn report(&mut self) -> (u64, Report) {
        let id = self.next_id;
        self.next_id += 1;
        (id, Report { id, ready: self.ready.clone() })
    }

    /// Aborts every fiber and task in the set. They stay in it: [`join_next`](Self::join_next)
    /// returns each one's result, a cancelled [`JoinError`] unless it finished first.
    pub fn abort_all(&mut self) {
        self.members.values().for_each(Member::abort);
        if let Some(m) = &self.taking {
            m.abort();
        }
    }

    /// Aborts everything and waits until each has ended, dropping the results (blocking-style).
    #[track_caller]
    pub fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().is_some() {}
    }

    /// Takes the result of the next member to finish, waiting for one (parks a fiber, blocks a
    /// thread); `None` once the set is empty. A member that panicked gives `Err` with the
    /// panic ([`JoinError::into_panic`]); an aborted one, a cancelled `Err`.
    ///
    /// # Panics
    ///
    /// In an async task: use [`join_next_async`](Self::join_next_async) there.
    #[track_caller]
    pub fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        self.join_next_until(None).expect("a wait without deadline ends")
    }

    /// [`join_next`](Self::join_next), waiting at most `timeout`: `Err(Timeout)` if no member
    /// finished by then ([`Elapsed`]).
    #[track_caller]
    pub fn join_next_timeout(&mut self, timeout: Duration) -> Result<Option<Result<T, JoinError>>, Elapsed> {
        self.join_next_until(crate::park::wait::deadline_in(timeout))
    }

    /// [`join_next`](Self::join_next), waiting until `deadline` at the latest.
    #[track_caller]
    pub fn join_next_deadline(&mut self, deadline: Instant) -> Result<Option<Result<T, JoinError>>, Elapsed> {
        self.join_next_until(Some(deadline))
    }

    #[track_caller]
    fn join_next_until(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<Option<Result<T, JoinError>>, Elapsed> {
        let _ = crate::sched::caller::blocking_caller("JoinSet::join_next");
        if let Some(member) = self.taking.take() {
            return Ok(Some(member.join()));
        }
        if self.members.is_empty() {
            return Ok(None);
        }
        // A wait of its own, left on every way out (a cancelled fiber unwinds from it); the
        // slot of `poll_join_next` gives up what a dropped future left there first.
        self.slot.leave(&self.ready, waiters, pass_none);
        let taken =
            Wait::new(&*self.ready, waiters, pass_none)
                .block(deadline, "JoinSet::join_next", |r, _| r.ids.pop_front());
        let Some(id) = taken else { return Err(Elapsed) };
        let member = self.members.remove(&id).expect("a reported id is of a member of the set");
        Ok(Some(member.join()))
    }

    /// The result of the next member to finish, from async code: a future of what
    /// [`join_next`](Self::join_next) gives. Dropping it before it completes takes nothing.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// let total = rt.block_on(async {
    ///     let mut set = spindle::task::JoinSet::new();
    ///     for i in 1..=4u32 {
    ///         set.spawn(async move { i * 10 });
    ///     }
    ///     set.spawn_fiber(|| 5); // a fiber in the same set
    ///     let mut total = 0;
    ///     while let Some(r) = set.join_next_async().await {
    ///         total += r.unwrap();
    ///     }
    ///     total
    /// });
    /// assert_eq!(total, 105);
    /// ```
    pub fn join_next_async(&mut self) -> JoinNext<'_, T> {
        JoinNext { set: self }
    }

    /// Polls for the next member's result ([`join_next_async`](Self::join_next_async)'s poll).
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        loop {
            if let Some(member) = &mut self.taking {
                let result = std::task::ready!(member.poll_result(cx));
                self.taking = None;
                return Poll::Ready(Some(result));
            }
            if self.members.is_empty() {
                return Poll::Ready(None);
            }
            let id = std::task::ready!(self.slot.poll(&self.ready, waiters, cx, |r, _| r.ids.pop_front()));
            self.taking = Some(self.members.remove(&id).expect("a reported id is of a member of the set"));
        }
    }

    /// The result of a member that has finished, if there is one now; never waits.
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Some(member) = &mut self.taking {
                if !member.is_finished() {
                    return None;
                }
                let result = member.poll_result(&mut cx);
                self.taking = None;
                match result {
                    Poll::Ready(r) => return Some(r),
                    Poll::Pending => unreachable!("a finished member's handle is ready"),
                }
            }
            let id = lock(&self.ready).ids.pop_front()?;
            self.taking = Some(self.members.remove(&id).expect("a reported id is of a member of the set"));
        }
    }
}

impl<T: Send + 'static> JoinSet<T> {
    /// Spawns `future` as a task ([`spawn_async`](super::spawn_async)) in the set.
    ///
    /// # Panics
    ///
    /// Outside a spindle runtime.
    #[track_caller]
    pub fn spawn<F>(&mut self, future: F)
    where
        F: Future<Output = T> + Send + 'static,
    {
        let (id, report) = self.report();
        let handle = super::spawn::spawn_async(async move {
            let _report = report;
            future.await
        });
        self.members.insert(id, Member::Task(handle));
    }

    /// Spawns `future` as a task that stays on the current worker
    /// ([`spawn_local`](super::spawn_local): it need not be `Send`) in the set.
    ///
    /// # Panics
    ///
    /// Outside a spindle worker.
    #[track_caller]
    pub fn spawn_local<F>(&mut self, future: F)
    where
        F: Future<Output = T> + 'static,
    {
        let (id, report) = self.report();
        let handle = super::spawn::spawn_local(async move {
            let _report = report;
            future.await
        });
        self.members.insert(id, Member::Task(handle));
    }

    /// Spawns `f` as a fiber ([`spawn`](crate::spawn)) in the set: blocking-style code
    /// beside the tasks.
    ///
    /// # Panics
    ///
    /// Outside a spindle runtime.
    #[track_caller]
    pub fn spawn_fiber<F>(&mut self, f: F)
    where
        F: FnOnce() -> T + Send + 'static,
    {
        let (id, report) = self.report();
        let handle = crate::fiber::spawn(move || {
            let _report = report;
            f()
        });
        self.members.insert(id, Member::Fiber(handle));
    }
}

impl<T> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.abort_all();
        self.slot.leave(&self.ready, waiters, pass_none);
    }
}

impl<T> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}

/// The future of [`JoinSet::join_next_async`].
#[must_use = "futures do nothing unless polled"]
pub struct JoinNext<'a, T> {
    set: &'a mut JoinSet<T>,
}

impl<T> Future for JoinNext<'_, T> {
    type Output = Option<Result<T, JoinError>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().set.poll_join_next(cx)
    }
}

impl<T> fmt::Debug for JoinNext<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinNext").field("set", &self.set).finish()
    }
}
