//! Synchronisation for fibers: channels, oneshot, a mutex and a wait group.
//!
//! Every primitive works from fibers and from plain threads alike: a fiber that waits parks
//! (its worker runs other fibers meanwhile), a thread that waits blocks. A closed channel or a
//! dropped peer is reported as an error, never as a hang.

pub mod channel;
pub mod mutex;
pub mod oneshot;
pub(crate) mod waiter;
pub mod waitgroup;
pub(crate) mod waker_set;

pub use channel::{channel, unbounded, Receiver, RecvError, SendError, Sender, TryRecvError, TrySendError};
pub use mutex::{Mutex, MutexGuard};
pub use oneshot::oneshot;
pub use waitgroup::WaitGroup;

/// Locks a std mutex, ignoring poisoning: the primitives here keep their state consistent at
/// every unlock, and user code never runs under these locks.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
