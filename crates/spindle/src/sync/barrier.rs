//! A barrier: `n` fibers (or threads, or tasks) wait until all have arrived, as
//! `std::sync::Barrier`, and it is reusable.
//!
//! Invariants (under the lock): `arrived < n` between generations; the `n`th arrival is the
//! leader: it resets `arrived`, advances `generation` and wakes every waiter. A waiter
//! returns once the generation differs from the one it arrived in, so a wake-up meant for a
//! past generation never releases a waiter of the next.

use std::fmt;
use std::future::Future;
use std::sync::Mutex;

use crate::lock::lock;
use crate::park::wait::{pass_none, Wait};
use crate::park::{self, WaitList};

/// Waits until `n` parties have called [`wait`](Barrier::wait).
///
/// ```
/// use std::sync::Arc;
/// use spindle::sync::Barrier;
///
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let gate = Arc::new(Barrier::new(3));
///     let handles: Vec<_> = (0..3)
///         .map(|_| {
///             let gate = gate.clone();
///             spindle::spawn(move || gate.wait().is_leader())
///         })
///         .collect();
///     let leaders = handles.into_iter().map(|h| h.join().unwrap()).filter(|l| *l).count();
///     assert_eq!(leaders, 1);
/// });
/// ```
pub struct Barrier {
    n: usize,
    state: Mutex<State>,
}

struct State {
    arrived: usize,
    generation: u64,
    waiters: WaitList,
}

/// What [`Barrier::wait`] returns: whether this caller was the last to arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// True for exactly one party per generation (the last to arrive).
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl Barrier {
    /// A barrier for `n` parties (`n == 0` behaves as 1).
    pub fn new(n: usize) -> Barrier {
        Barrier {
            n: n.max(1),
            state: Mutex::new(State { arrived: 0, generation: 0, waiters: WaitList::new() }),
        }
    }

    /// Arrives: the generation this caller waits out, or `None` if it was the leader (having
    /// released everyone).
    fn arrive(&self) -> Option<u64> {
        let mut state = lock(&self.state);
        state.arrived += 1;
        if state.arrived < self.n {
            return Some(state.generation);
        }
        state.arrived = 0;
        state.generation += 1;
        let all = state.waiters.take_all();
        drop(state);
        all.into_iter().for_each(park::wake);
        None
    }

    /// Waits until all `n` parties have arrived (parks the fiber, or blocks the thread).
    #[track_caller]
    pub fn wait(&self) -> BarrierWaitResult {
        crate::sched::api::check_entry("barrier");
        let Some(generation) = self.arrive() else { return BarrierWaitResult(true) };
        Wait::new(&self.state, |s| &mut s.waiters, pass_none)
            .block(None, "barrier", |s, _| (s.generation != generation).then_some(()));
        BarrierWaitResult(false)
    }

    /// Waits from async code. The caller arrives when the future is first polled.
    pub fn wait_async(&self) -> impl Future<Output = BarrierWaitResult> + Send + '_ {
        let mut arrived: Option<Option<u64>> = None;
        let mut wait = Wait::new(&self.state, |s: &mut State| &mut s.waiters, pass_none);
        std::future::poll_fn(move |cx| {
            let Some(generation) = *arrived.get_or_insert_with(|| self.arrive()) else {
                return std::task::Poll::Ready(BarrierWaitResult(true));
            };
            wait.poll(cx, |s, _| (s.generation != generation).then_some(BarrierWaitResult(false)))
        })
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier").field("n", &self.n).finish()
    }
}
