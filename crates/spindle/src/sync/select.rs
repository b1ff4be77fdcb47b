//! Waiting on several operations at once: [`select!`](crate::select) (blocking, for fibers
//! and threads) and [`select_async!`](crate::select_async) (in async code).
//!
//! Each branch is a future: a channel's `recv_async`/`send_async`, a oneshot receiver, a
//! fiber or task join handle, `Mutex::lock_async`, a timer (`time::sleep_future`), or any
//! other future. The branches are polled in one round per wake-up, each round starting at a
//! random branch (or, after `biased;`, at the first), and the first that completes wins; the
//! others are dropped unpolled further.

// Invariants:
// - **Fair.** Every round starts at a uniformly random branch, so a branch that is always
//   ready cannot starve another that is ready as often. A `biased;` select gives that up on
//   purpose: its rounds start at the first branch, so the earliest ready branch wins.
// - **One winner, nothing lost.** A branch's future takes its value (a channel message, a
//   lock, a join result) only in the poll that completes it, and the round stops at the first
//   completion: a losing branch never took anything. Dropping a losing future dequeues its
//   waiter and, if it had been woken, passes the wake-up on (module `wait`), so a message
//   that woke a losing branch is received by someone else. A losing `send_async` branch sends
//   nothing (its value is dropped with it).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// The output of branch `i` of a select: `There` taken `i` times, then `Here`.
#[doc(hidden)]
#[derive(Debug)]
pub enum Out<A, B> {
    Here(A),
    There(B),
}

/// The type after the last branch: no value, so the last `There` is unreachable.
#[doc(hidden)]
#[derive(Debug)]
pub enum Never {}

thread_local! {
    static RNG: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::Instant::now()) | 1
}

/// A random index below `n` (xorshift64, per thread).
fn random_below(n: usize) -> usize {
    RNG.with(|r| {
        let mut x = r.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        (x % n as u64) as usize
    })
}

/// One round: polls branch `(start + k) % n` for `k` in `0..n`, stopping at the first ready;
/// `start` is random, or 0 for a biased select.
fn round<O>(
    n: usize,
    biased: bool,
    cx: &mut Context<'_>,
    poll: &mut impl FnMut(usize, &mut Context<'_>) -> Poll<O>,
) -> Poll<O> {
    let start = if biased { 0 } else { random_below(n) };
    for k in 0..n {
        if let Poll::Ready(out) = poll((start + k) % n, cx) {
            return Poll::Ready(out);
        }
    }
    Poll::Pending
}

/// The future behind both macros: rounds until a branch completes.
#[doc(hidden)]
pub struct Select<P> {
    n: usize,
    biased: bool,
    poll: P,
}

impl<P> Select<P> {
    /// `_witness` fixes the output type's last `There` to [`Never`].
    pub fn new<O>(n: usize, biased: bool, poll: P, _witness: fn(Never) -> O) -> Self
    where
        P: FnMut(usize, &mut Context<'_>) -> Poll<O>,
    {
        Select { n, biased, poll }
    }
}

impl<O, P: FnMut(usize, &mut Context<'_>) -> Poll<O> + Unpin> Future for Select<P> {
    type Output = O;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<O> {
        let this = self.get_mut();
        round(this.n, this.biased, cx, &mut this.poll)
    }
}

impl<P> std::fmt::Debug for Select<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Select").field("branches", &self.n).field("biased", &self.biased).finish()
    }
}

/// Blocking select: rounds in the caller (a fiber parks between rounds, a thread blocks).
#[doc(hidden)]
pub fn block<O>(
    n: usize,
    biased: bool,
    poll: impl FnMut(usize, &mut Context<'_>) -> Poll<O> + Unpin,
    witness: fn(Never) -> O,
) -> O {
    // In an async task this panics at once, pointing to `select_async!`.
    let _ = crate::sched::api::blocking_caller("select!");
    crate::park::block_on::block_on(Select::new(n, biased, poll, witness))
}

/// One round with a waker that does nothing: the `default` branch's select.
#[doc(hidden)]
pub fn try_once<O>(
    n: usize,
    biased: bool,
    mut poll: impl FnMut(usize, &mut Context<'_>) -> Poll<O>,
    _witness: fn(Never) -> O,
) -> Option<O> {
    let mut cx = Context::from_waker(Waker::noop());
    match round(n, biased, &mut cx, &mut poll) {
        Poll::Ready(out) => Some(out),
        Poll::Pending => None,
    }
}

/// Waits for the first of several operations and runs its arm, blocking the caller: in a
/// fiber it parks the fiber (its worker runs others meanwhile), on a thread it blocks. In async
/// code use [`select_async!`](crate::select_async).
///
/// Each branch is `pattern = future => expression`, separated by commas; patterns must be
/// irrefutable (match the output inside the arm). A branch may have a precondition,
/// `pattern = future, if condition => expression`: when it is false the branch is not polled
/// (Go's nil channel; a select with every branch disabled and no `default` panics rather than
/// wait forever). An optional last branch `default => expression` makes the select
/// non-blocking: it runs when no branch is ready at once, as Go's `default`. Each round starts
/// at a random branch (fair), and a losing branch takes nothing: see the
/// [module docs](crate::sync::select). A select that opens with `biased;` (tokio's keyword)
/// polls its branches in the order written instead, so the first ready branch wins: for
/// priorities (a shutdown signal before work), at the price of fairness. Timer branches
/// (`time::sleep_future`) need a spindle worker (a fiber or task), as every spindle timer
/// future does.
///
/// ```
/// use std::time::Duration;
/// use spindle::sync::channel;
///
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let (tx1, rx1) = channel::<u32>(1);
///     let (_tx2, rx2) = channel::<&str>(1);
///     tx1.send(7).unwrap();
///     let got = spindle::select! {
///         v = rx1.recv_async() => format!("rx1: {:?}", v),
///         s = rx2.recv_async() => format!("rx2: {:?}", s),
///         _ = spindle::time::sleep_future(Duration::from_secs(5)) => "timeout".to_string(),
///     };
///     assert_eq!(got, "rx1: Ok(7)");
///
///     let polled = spindle::select! {
///         s = rx2.recv_async() => Some(s),
///         default => None,
///     };
///     assert_eq!(polled, None);
///
///     // Both ready: `biased;` takes the first branch written, every time.
///     let (stop_tx, stop_rx) = channel::<()>(1);
///     stop_tx.send(()).unwrap();
///     tx1.send(8).unwrap();
///     let first = spindle::select! {
///         biased;
///         _ = stop_rx.recv_async() => "stop",
///         _ = rx1.recv_async() => "work",
///     };
///     assert_eq!(first, "stop");
/// });
/// ```
#[macro_export]
macro_rules! select {
    (biased; $($branches:tt)+) => {
        $crate::__select!(@munch (block true) [] [] $($branches)+)
    };
    ($($branches:tt)+) => {
        $crate::__select!(@munch (block false) [] [] $($branches)+)
    };
}

/// [`select!`] for async code: `.await`s the first of several futures and runs its arm,
/// without blocking the worker. Same branch syntax (`biased;` included), fairness and no-loss
/// guarantees.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let (tx, rx) = spindle::sync::channel::<u32>(1);
/// let h = rt.spawn_async(async move {
///     spindle::select_async! {
///         v = rx.recv_async() => v.unwrap(),
///         _ = spindle::time::sleep_future(std::time::Duration::from_secs(5)) => 0,
///     }
/// });
/// tx.send(3).unwrap();
/// assert_eq!(h.join().unwrap(), 3);
/// ```
#[macro_export]
macro_rules! select_async {
    (biased; $($branches:tt)+) => {
        $crate::__select!(@munch (await true) [] [] $($branches)+)
    };
    ($($branches:tt)+) => {
        $crate::__select!(@munch (await false) [] [] $($branches)+)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select {
    // The last branch is `default`: poll once, no waiting.
    (@munch ($mode:ident $biased:tt) [$($done:tt)*] [$($next:ident)*] default => $default:expr $(,)?) => {
        $crate::__select!(@emit (default $biased $default) [$($done)*] [$($next)*])
    };
    // One more branch, with a precondition; `__f` and `__e` are new identifiers per expansion
    // (hygiene), naming its future and whether it is enabled.
    (@munch $mode:tt [$($done:tt)*] [$($next:ident)*] $pat:pat = $fut:expr, if $cond:expr => $body:expr $(, $($rest:tt)*)?) => {
        $crate::__select!(@munch $mode [$($done)* (__f, __e, $pat, $fut, $cond, $body, [$($next)*])] [$($next)* There] $($($rest)*)?)
    };
    (@munch $mode:tt [$($done:tt)*] [$($next:ident)*] $pat:pat = $fut:expr => $body:expr $(, $($rest:tt)*)?) => {
        $crate::__select!(@munch $mode [$($done)* (__f, __e, $pat, $fut, true, $body, [$($next)*])] [$($next)* There] $($($rest)*)?)
    };
    (@munch $mode:tt [$($done:tt)*] [$($next:ident)*]) => {
        $crate::__select!(@emit $mode [$($done)*] [$($next)*])
    };
    (@emit $mode:tt [$(($f:ident, $e:ident, $pat:pat, $fut:expr, $cond:expr, $body:expr, [$($wrap:ident)*]))+] [$($last:ident)*]) => {{
        $( let $e: bool = $cond; )+
        $( let mut $f = ::core::pin::pin!($fut); )+
        let __n = [$($crate::__select!(@unit $f)),+].len();
        let __enabled = [$($e),+].iter().filter(|e| **e).count();
        $crate::__select!(@check $mode __enabled);
        let __poll = |__i: usize, __cx: &mut ::core::task::Context<'_>| {
            let mut __k = 0usize;
            $(
                if __i == __k {
                    if !$e {
                        return ::core::task::Poll::Pending;
                    }
                    return match ::core::future::Future::poll($f.as_mut(), __cx) {
                        ::core::task::Poll::Ready(__v) => ::core::task::Poll::Ready(
                            $crate::__select!(@wrap [$($wrap)*] $crate::sync::select::Out::Here(__v))
                        ),
                        ::core::task::Poll::Pending => ::core::task::Poll::Pending,
                    };
                }
                __k += 1;
            )+
            let _ = __k;
            unreachable!("select branch index out of range")
        };
        let __witness = |__never: $crate::sync::select::Never| $crate::__select!(@wrap [$($last)*] __never);
        $crate::__select!(@run $mode __n __poll __witness [$(($pat, $body, [$($wrap)*]))+] [$($last)*])
    }};
    (@run (block $biased:tt) $n:ident $poll:ident $w:ident $arms:tt $last:tt) => {{
        let __out = $crate::sync::select::block($n, $biased, $poll, $w);
        $crate::__select!(@match __out $arms $last)
    }};
    (@run (await $biased:tt) $n:ident $poll:ident $w:ident $arms:tt $last:tt) => {{
        let __out = $crate::sync::select::Select::new($n, $biased, $poll, $w).await;
        $crate::__select!(@match __out $arms $last)
    }};
    (@run (default $biased:tt $default:expr) $n:ident $poll:ident $w:ident $arms:tt $last:tt) => {{
        match $crate::sync::select::try_once($n, $biased, $poll, $w) {
            ::core::option::Option::Some(__out) => $crate::__select!(@match __out $arms $last),
            ::core::option::Option::None => $default,
        }
    }};
    (@match $out:ident [$(($pat:pat, $body:expr, [$($wrap:ident)*]))+] [$($last:ident)*]) => {
        match $out {
            $( $crate::__select!(@wrap_pat [$($wrap)*] $crate::sync::select::Out::Here($pat)) => $body, )+
            $crate::__select!(@wrap_pat [$($last)*] __never) => match __never {},
        }
    };
    (@wrap [] $e:expr) => { $e };
    (@wrap [$t:ident $($rest:ident)*] $e:expr) => {
        $crate::sync::select::Out::There($crate::__select!(@wrap [$($rest)*] $e))
    };
    (@wrap_pat [] $p:pat) => { $p };
    (@wrap_pat [$t:ident $($rest:ident)*] $p:pat) => {
        $crate::sync::select::Out::There($crate::__select!(@wrap_pat [$($rest)*] $p))
    };
    (@unit $f:ident) => { () };
    (@check (default $biased:tt $default:expr) $enabled:ident) => {};
    (@check $mode:tt $enabled:ident) => {
        ::core::assert!($enabled > 0, "spindle::select!: every branch is disabled by its `if` precondition and there is no `default` branch; it would wait forever");
    };
}
