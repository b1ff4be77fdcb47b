//! [`block_on`]: runs a future to completion from blocking-style code.
//!
//! In a fiber it parks the fiber between polls (its worker runs other fibers meanwhile) and
//! the future's waker unparks it; on a plain thread it parks the thread (module `park`).
//! Spindle's sockets and timers register with the worker that polls them, so async libraries
//! (anything written against `futures-io`) run on a fiber unchanged.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Polls `future` to completion, parking the calling fiber (or thread) while it is pending.
///
/// # Panics
///
/// In an async task on a spindle worker (`.await` the future there).
#[track_caller]
pub fn block_on<F: Future>(mut future: F) -> F::Output {
    // Pinned where it was passed: a large argument lives in a slot its caller wrote it to
    // (a future returned by a call is built there), and `pin!` would copy it once more
    // (the HTTP client's request future is ~1.5 KB: a `memcpy` and as many cache lines
    // of the fiber's stack written for nothing, every request).
    // SAFETY: `future` is owned by this frame, never moved after this line (the binding
    // is shadowed, so nothing can name it), and dropped in place when the frame ends.
    let mut future = unsafe { Pin::new_unchecked(&mut future) };
    let waker = super::current_waker();
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        super::park_on("block_on (future pending)");
    }
}
