//! [`join!`](crate::join) and [`try_join!`](crate::try_join) (futures, awaited), and
//! [`join_fibers!`](crate::join_fibers) and [`try_join_fibers!`](crate::try_join_fibers)
//! (closures run on fibers, joined blocking-style), with what their expansions call.
//!
//! Invariants: a `MaybeDone`'s future is pinned where the macro's caller put it and dropped in
//! place, once done (its output is not pinned, and moves out); the fiber forms run every
//! closure on a fiber of a [`JoinSet`](crate::task::JoinSet), whose drop aborts the fibers still
//! running when the join leaves early (a panic, an error, the caller's cancellation).

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use super::join_set::JoinSet;
use crate::lock::lock;

/// A future of a `join!`, or its output once it has completed.
#[doc(hidden)]
#[derive(Debug)]
pub enum MaybeDone<F: Future> {
    Pending(F),
    Done(F::Output),
    Taken,
}

impl<F: Future> MaybeDone<F> {
    pub fn new(future: impl IntoFuture<IntoFuture = F>) -> MaybeDone<F> {
        MaybeDone::Pending(future.into_future())
    }

    /// Polls the future unless it is done; true once it is.
    pub fn poll_done(self: Pin<&mut Self>, cx: &mut Context<'_>) -> bool {
        // SAFETY: the future in `Pending` is structurally pinned: it is polled only through a
        // `Pin`, and leaves its place only by being dropped there (the assignment below drops
        // the old value in place). The other variants hold nothing pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let output = match this {
            MaybeDone::Pending(future) => {
                // SAFETY: see above; `future` stays where it is until dropped in place.
                match unsafe { Pin::new_unchecked(future) }.poll(cx) {
                    Poll::Ready(output) => output,
                    Poll::Pending => return false,
                }
            }
            MaybeDone::Done(_) => return true,
            MaybeDone::Taken => panic!("a join! future polled after its output was taken"),
        };
        *this = MaybeDone::Done(output);
        true
    }

    /// The output of a done future.
    pub fn take(self: Pin<&mut Self>) -> F::Output {
        // SAFETY: only `Done` is moved out of, and it holds nothing pinned (the output is not
        // pinned); a `Pending` future is never moved (the expect panics first).
        let this = unsafe { self.get_unchecked_mut() };
        match std::mem::replace(this, MaybeDone::Taken) {
            MaybeDone::Done(output) => output,
            _ => unreachable!("join! takes outputs only once every future is done"),
        }
    }
}

impl<T, E, F: Future<Output = Result<T, E>>> MaybeDone<F> {
    /// The error of a done future that failed, taken; `None` otherwise.
    pub fn take_err(self: Pin<&mut Self>) -> Option<E> {
        // SAFETY: as in `take`: only `Done` is moved out of.
        let this = unsafe { self.get_unchecked_mut() };
        if !matches!(this, MaybeDone::Done(Err(_))) {
            return None;
        }
        match std::mem::replace(this, MaybeDone::Taken) {
            MaybeDone::Done(Err(e)) => Some(e),
            _ => unreachable!("matched just above"),
        }
    }

    /// The value of a done future that succeeded.
    pub fn take_ok(self: Pin<&mut Self>) -> T {
        match self.take() {
            Ok(v) => v,
            Err(_) => unreachable!("try_join! returns at the first error"),
        }
    }
}

/// Waits for every future and returns their outputs as a tuple, in the order written
/// (tokio's `join!`). The futures run concurrently in the calling task (or fiber's
/// `block_on`), polled in turn; none is spawned. Only in async code: it awaits.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let (a, b) = rt.block_on(async {
///     let (tx, rx) = spindle::sync::channel::<u32>(1);
///     spindle::join!(
///         async move { tx.send_async(6).await.unwrap(); "sent" },
///         async { rx.recv_async().await.unwrap() * 7 },
///     )
/// });
/// assert_eq!((a, b), ("sent", 42));
/// ```
///
/// From blocking-style code, join closures on fibers with [`join_fibers!`](crate::join_fibers),
/// or futures with `task::block_on(async { join!(...) })`.
#[macro_export]
macro_rules! join {
    ($($future:expr),+ $(,)?) => {
        $crate::__join!(@munch join [] $($future,)+)
    };
}

/// Waits for every future, each giving a `Result` with the same error type, and returns
/// `Ok` with their values as a tuple, or the first `Err` as soon as one fails, dropping (so
/// cancelling) the others (tokio's `try_join!`). Only in async code: it awaits.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let got: Result<(u8, u8), String> = rt.block_on(async {
///     spindle::try_join!(async { Ok(1) }, async { Err("no".to_string()) })
/// });
/// assert_eq!(got, Err("no".to_string()));
/// ```
#[macro_export]
macro_rules! try_join {
    ($($future:expr),+ $(,)?) => {
        $crate::__join!(@munch try_join [] $($future,)+)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __join {
    // One more future; `__f` is a new identifier per expansion step (hygiene).
    (@munch $mode:ident [$($done:tt)*] $future:expr, $($rest:tt)*) => {
        $crate::__join!(@munch $mode [$($done)* (__f, $future)] $($rest)*)
    };
    (@munch join [$(($f:ident, $future:expr))+]) => {{
        $( let mut $f = ::core::pin::pin!($crate::task::join_macros::MaybeDone::new($future)); )+
        ::core::future::poll_fn(|__cx| {
            let mut __all = true;
            $( __all &= $f.as_mut().poll_done(__cx); )+
            if !__all {
                return ::core::task::Poll::Pending;
            }
            ::core::task::Poll::Ready(($( $f.as_mut().take(), )+))
        })
        .await
    }};
    (@munch try_join [$(($f:ident, $future:expr))+]) => {{
        $( let mut $f = ::core::pin::pin!($crate::task::join_macros::MaybeDone::new($future)); )+
        ::core::future::poll_fn(|__cx| {
            let mut __all = true;
            $(
                if $f.as_mut().poll_done(__cx) {
                    if let ::core::option::Option::Some(__e) = $f.as_mut().take_err() {
                        return ::core::task::Poll::Ready(::core::result::Result::Err(__e));
                    }
                } else {
                    __all = false;
                }
            )+
            if !__all {
                return ::core::task::Poll::Pending;
            }
            ::core::task::Poll::Ready(::core::result::Result::Ok(($( $f.as_mut().take_ok(), )+)))
        })
        .await
    }};
}

/// Runs each closure on a fiber of its own and waits for all of them (blocking-style: parks
/// a fiber), returning their values as a tuple in the order written: the fiber twin of
/// [`join!`](crate::join). If one panics, the others are aborted and the panic resumes here.
/// The closures are `Send + 'static`, as any fiber's (no scoped fibers).
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let (sum, text) = rt.block_on(|| {
///     spindle::join_fibers!(
///         || (1..=10u32).sum::<u32>(),
///         || { spindle::yield_now(); "done".to_string() },
///     )
/// });
/// assert_eq!((sum, text.as_str()), (55, "done"));
/// ```
#[macro_export]
macro_rules! join_fibers {
    ($($f:expr),+ $(,)?) => {
        $crate::task::join_macros::JoinFibers::join_fibers(($($f,)+))
    };
}

/// Runs each closure (returning a `Result` with one error type) on a fiber of its own and
/// waits for all (blocking-style), returning `Ok` with their values as a tuple, or the first
/// `Err` as soon as one fails, the others aborted: the fiber twin of
/// [`try_join!`](crate::try_join).
///
/// ```
/// use std::time::Duration;
///
/// let rt = spindle::Runtime::new().unwrap();
/// let got: Result<((), u8), &str> = rt.block_on(|| {
///     spindle::try_join_fibers!(
///         || { spindle::time::sleep(Duration::from_secs(3600)); Ok(()) }, // aborted
///         || Err("failed at once"),
///     )
/// });
/// assert_eq!(got, Err("failed at once"));
/// ```
#[macro_export]
macro_rules! try_join_fibers {
    ($($f:expr),+ $(,)?) => {
        $crate::task::join_macros::TryJoinFibers::try_join_fibers(($($f,)+))
    };
}

/// A tuple of closures that [`join_fibers!`](crate::join_fibers) runs.
#[doc(hidden)]
pub trait JoinFibers {
    type Output;
    fn join_fibers(self) -> Self::Output;
}

/// A tuple of closures that [`try_join_fibers!`](crate::try_join_fibers) runs.
#[doc(hidden)]
pub trait TryJoinFibers {
    type Output;
    fn try_join_fibers(self) -> Self::Output;
}

/// Where a fiber of a `join_fibers!` leaves its value.
fn out<T>() -> Arc<Mutex<Option<T>>> {
    Arc::new(Mutex::new(None))
}

fn taken<T>(out: &Mutex<Option<T>>) -> T {
    lock(out).take().expect("every fiber of the join returned")
}

#[track_caller]
fn resume(err: crate::error::JoinError) -> ! {
    std::panic::resume_unwind(err.into_panic())
}

macro_rules! impl_join_fibers {
    ($(($idx:tt, $F:ident, $T:ident)),+) => {
        impl<$($F, $T),+> JoinFibers for ($($F,)+)
        where
            $($F: FnOnce() -> $T + Send + 'static, $T: Send + 'static,)+
        {
            type Output = ($($T,)+);

            #[track_caller]
            fn join_fibers(self) -> Self::Output {
                let outs = ($(out::<$T>(),)+);
                let mut set = JoinSet::new();
                $({
                    let (f, out) = (self.$idx, outs.$idx.clone());
                    set.spawn_fiber(move || *lock(&out) = Some(f()));
                })+
                while let Some(done) = set.join_next() {
                    if let Err(e) = done {
                        resume(e); // the set's drop aborts the others
                    }
                }
                ($(taken(&outs.$idx),)+)
            }
        }

        impl<Err, $($F, $T),+> TryJoinFibers for ($($F,)+)
        where
            Err: Send + 'static,
            $($F: FnOnce() -> Result<$T, Err> + Send + 'static, $T: Send + 'static,)+
        {
            type Output = Result<($($T,)+), Err>;

            #[track_caller]
            fn try_join_fibers(self) -> Self::Output {
                let outs = ($(out::<$T>(),)+);
                let mut set = JoinSet::new();
                $({
                    let (f, out) = (self.$idx, outs.$idx.clone());
                    set.spawn_fiber(move || f().map(|v| *lock(&out) = Some(v)));
                })+
                while let Some(done) = set.join_next() {
                    match done {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return Err(e), // the set's drop aborts the others
                        Err(e) => resume(e),
                    }
                }
                Ok(($(taken(&outs.$idx),)+))
            }
        }
    };
}

impl_join_fibers!((0, F0, T0));
impl_join_fibers!((0, F0, T0), (1, F1, T1));
impl_join_fibers!((0, F0, T0), (1, F1, T1), (2, F2, T2));
impl_join_fibers!((0, F0, T0), (1, F1, T1), (2, F2, T2), (3, F3, T3));
impl_join_fibers!((0, F0, T0), (1, F1, T1), (2, F2, T2), (3, F3, T3), (4, F4, T4));
impl_join_fibers!((0, F0, T0), (1, F1, T1), (2, F2, T2), (3, F3, T3), (4, F4, T4), (5, F5, T5));
impl_join_fibers!((0, F0, T0), (1, F1, T1), (2, F2, T2), (3, F3, T3), (4, F4, T4), (5, F5, T5), (6, F6, T6));
impl_join_fibers!(
    (0, F0, T0),
    (1, F1, T1),
    (2, F2, T2),
    (3, F3, T3),
    (4, F4, T4),
    (5, F5, T5),
    (6, F6, T6),
    (7, F7, T7)
);
