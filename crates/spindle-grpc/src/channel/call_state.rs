//! The state one in-process call shares between its sides: [`CallState`] (the client's
//! departure and the request side's failure, shared with the request body the handler reads),
//! [`End`] (held by whoever drives the handler) and [`LiveCall`] (the channel's count).
//! Used by the encoded path (modules `direct`, `pipe`, `request`) and the typed path alike.
//!
//! # Invariants
//!
//! - **Cancelled means the client left.** [`CallState::cancelled`] is set only when the client
//!   side is dropped before the call ended (an [`End`] dropped before [`End::set_ended`]); then
//!   the request body, if the handler still holds it (say in a task it spawned), fails with
//!   `CANCELLED` instead of ending like a finished upload.
//! - **The request side failing ends the call.** A request message above the channel's limit
//!   (module `limit`), a second request message or none on a method that takes exactly one
//!   (module `limit`, "one request message"), or the client's request body failing (tonic's
//!   client reports its encoding errors, its `max_encoding_message_size` among them, that
//!   way), is recorded once here by the request body (module `request`), which from then on
//!   gives the handler nothing: its poll is `Pending` (the handler never sees the oversized
//!   message, a truncated stream or a clean end). Whoever drives the call (polls the handler:
//!   the client's future and body, or a pump) checks for the failure after every poll of the
//!   handler and before every poll of its body, and ends the call with it (module `direct`,
//!   "one status per call"). The driver's waker is registered here whenever the handler is
//!   pending ([`End::pending`]), so a request body read elsewhere (a task the handler spawned)
//!   wakes the driver when it fails; that reader is woken too, and its next poll fails with
//!   the same status.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};

use tonic::Status;

/// Shared by the client's side of a call and the request body the handler reads.
#[derive(Debug, Default)]
pub(crate) struct CallState {
    cancelled: AtomicBool,
    /// The waker of the request body's reader, while it waits for the client's next message.
    reader: Mutex<Option<Waker>>,
    /// Set (under the `failure` lock) once `failure` holds a status ("the request side failing ends the call").
    failed: AtomicBool,
    failure: Mutex<Failure>,
}

/// The request side's failure and the waker of the call's driver ("the request side failing ends the call").
#[derive(Debug, Default)]
struct Failure {
    status: Option<Status>,
    driver: Option<Waker>,
}

impl CallState {
    /// Whether the client side was dropped before the call ended ("cancelled means the client left").
    #[inline]
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Registers the waker of the request's reader, woken when the call is cancelled.
    pub(crate) fn set_reader(&self, waker: &Waker) {
        *self.reader.lock().unwrap_or_else(|e| e.into_inner()) = Some(waker.clone());
    }

    fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        let waker = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn lock_failure(&self) -> std::sync::MutexGuard<'_, Failure> {
        self.failure.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the request side's failure (the first one counts) and wakes the driver.
    pub(crate) fn fail(&self, status: Status) {
        let driver = {
            let mut failure = self.lock_failure();
            if failure.status.is_none() {
                failure.status = Some(status);
                self.failed.store(true, Ordering::Release);
            }
            failure.driver.take()
        };
        if let Some(w) = driver {
            w.wake();
        }
    }

    /// The request side's failure, if any: one atomic load while there is none.
    #[inline]
    fn failure(&self) -> Option<Status> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.lock_failure().status.clone()
    }
}

/// Counts a call in [`crate::Channel::live_calls`] while it lives.
#[derive(Debug)]
pub(crate) struct LiveCall(Arc<AtomicUsize>);

impl LiveCall {
    pub(crate) fn new(count: &Arc<AtomicUsize>) -> LiveCall {
        count.fetch_add(1, Ordering::Relaxed);
        LiveCall(count.clone())
    }
}

impl Drop for LiveCall {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Held with the handler (in the client's future, then body; or in the pump task) by whoever
/// drives the call. Dropped before [`End::set_ended`], it cancels the call ("cancelled means the client left").
#[derive(Debug)]
pub(crate) struct End {
    /// `None` for a typed call without a request stream: nothing reads the request, so there
    /// is nothing to cancel or to fail (module `typed`).
    state: Option<Arc<CallState>>,
    ended: bool,
    /// The driver's waker as last registered in `state` (so that an unchanged waker is not
    /// registered again: no lock while the driver stays the same).
    driver: Option<Waker>,
    _live: Option<LiveCall>,
}

impl End {
    pub(crate) fn new(state: Arc<CallState>, live: Option<LiveCall>) -> End {
        End::with_state(Some(state), live)
    }

    pub(crate) fn with_state(state: Option<Arc<CallState>>, live: Option<LiveCall>) -> End {
        End { state, ended: false, driver: None, _live: live }
    }

    pub(crate) fn set_ended(&mut self) {
        self.ended = true;
    }

    /// The request side's failure, if any ("the request side failing ends the call").
    #[inline]
    pub(crate) fn failure(&self) -> Option<Status> {
        self.state.as_ref()?.failure()
    }

    /// Before the driver returns `Pending`: registers its waker for a failure of the request
    /// side, and returns the failure if one came meanwhile ("the request side failing ends the call").
    pub(crate) fn pending(&mut self, cx: &Context<'_>) -> Option<Status> {
        let state = self.state.as_ref()?;
        if let Some(status) = state.failure() {
            return Some(status);
        }
        if self.driver.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            // Still registered: only CallState::fail takes it, and it sets `failed` first.
            return None;
        }
        let waker = cx.waker().clone();
        let mut failure = state.lock_failure();
        failure.driver = Some(waker.clone());
        self.driver = Some(waker);
        failure.status.clone()
    }
}

impl Drop for End {
    fn drop(&mut self) {
        if let (false, Some(state)) = (self.ended, &self.state) {
            state.cancel();
        }
    }
}
