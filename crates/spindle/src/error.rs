//! The errors of joining a fiber, a task or a blocking job: [`JoinError`], and [`Cancelled`],
//! the unwinding payload of a cancelled fiber.

use std::any::Any;
use std::fmt;

/// Why a fiber, task or blocking job was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelReason {
    /// Its runtime shut down (dropped, or `Runtime::shutdown_timeout` ran out) before it
    /// finished.
    Shutdown,
    /// Its handle cancelled it: `JoinHandle::cancel` / `abort`, or a timeout that gave up on
    /// it (`time::timeout_fiber`).
    Handle,
}

/// The payload a cancelled fiber unwinds with (running its destructors), and what
/// [`JoinError::into_panic`] gives for a cancellation. Code that catches panics inside a fiber
/// should let it through (`std::panic::resume_unwind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled {
    reason: CancelReason,
}

impl Cancelled {
    pub(crate) const SHUTDOWN: Cancelled = Cancelled { reason: CancelReason::Shutdown };
    pub(crate) const HANDLE: Cancelled = Cancelled { reason: CancelReason::Handle };

    /// Why it was cancelled.
    pub fn reason(&self) -> CancelReason {
        self.reason
    }
}

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            CancelReason::Shutdown => f.write_str("cancelled: its runtime shut down"),
            CancelReason::Handle => f.write_str("cancelled through its handle (cancel, abort or a timeout)"),
        }
    }
}

impl std::error::Error for Cancelled {}

/// Why a join handle has no result: the fiber, task or job panicked, or was cancelled.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let err = rt.spawn(|| panic!("boom")).join().unwrap_err();
/// assert!(err.is_panic());
/// assert_eq!(err.to_string(), "panicked: boom");
/// let payload = err.into_panic();
/// assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
/// ```
pub struct JoinError {
    repr: Repr,
}

enum Repr {
    Cancelled(Cancelled),
    Panic(Box<dyn Any + Send>),
}

impl JoinError {
    /// Sorts a caught unwinding payload: a [`Cancelled`] one is a cancellation.
    pub(crate) fn from_payload(payload: Box<dyn Any + Send>) -> JoinError {
        match payload.downcast::<Cancelled>() {
            Ok(c) => JoinError { repr: Repr::Cancelled(*c) },
            Err(payload) => JoinError { repr: Repr::Panic(payload) },
        }
    }

    /// Whether it was cancelled (see [`cancel_reason`](Self::cancel_reason) for why).
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled(_))
    }

    /// Whether it panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// Why it was cancelled, if it was.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        match &self.repr {
            Repr::Cancelled(c) => Some(c.reason),
            Repr::Panic(_) => None,
        }
    }

    /// The panic's payload, to inspect or re-raise with `std::panic::resume_unwind`; for a
    /// cancellation, a [`Cancelled`] value (so re-raising it cancels the caller alike).
    pub fn into_panic(self) -> Box<dyn Any + Send> {
        match self.repr {
            Repr::Cancelled(c) => Box::new(c),
            Repr::Panic(p) => p,
        }
    }

    /// The panic's payload, or the error back if it was a cancellation.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send>, JoinError> {
        match self.repr {
            Repr::Panic(p) => Ok(p),
            repr => Err(JoinError { repr }),
        }
    }
}

/// The message of a panic payload, when it is a string.
fn panic_message(payload: &(dyn Any + Send)) -> Option<&str> {
    payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled(c) => fmt::Display::fmt(c, f),
            Repr::Panic(p) => match panic_message(&**p) {
                Some(msg) => write!(f, "panicked: {msg}"),
                None => f.write_str("panicked (with a non-string payload)"),
            },
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled(c) => f.debug_tuple("JoinError::Cancelled").field(&c.reason).finish(),
            Repr::Panic(p) => f.debug_tuple("JoinError::Panic").field(&panic_message(&**p)).finish(),
        }
    }
}

impl std::error::Error for JoinError {}

impl From<JoinError> for std::io::Error {
    fn from(e: JoinError) -> std::io::Error {
        std::io::Error::other(e.to_string())
    }
}
