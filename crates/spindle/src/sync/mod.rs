//! Synchronisation for fibers and tasks: channels (mpmc, bounded, unbounded or rendezvous;
//! oneshot, broadcast, watch), `select!`, Mutex, RwLock, Condvar, Semaphore, Notify, Barrier,
//! WaitGroup and [`CancellationToken`]. The receivers are also `futures_core::Stream`s.
//!
//! Every primitive works from fibers and from plain threads alike: a fiber that waits parks
//! (its worker runs other fibers meanwhile), a thread that waits blocks. A closed channel or a
//! dropped peer is reported as an error, never as a hang.

mod barrier;
pub mod broadcast;
mod cancel;
pub mod channel;
mod channel_rendezvous;
mod channel_wait;
mod condvar;
pub mod mutex;
mod notify;
pub mod oneshot;
mod rwlock;
pub mod select;
mod semaphore;
pub mod waitgroup;
pub mod watch;

pub use barrier::{Barrier, BarrierWaitResult};
pub use cancel::{CancellationToken, DropGuard, WaitForCancellation};
pub use channel::{
    channel, unbounded, Receiver, RecvError, RecvTimeoutError, SendError, SendTimeoutError, Sender,
    TryRecvError, TrySendError,
};
pub use channel_wait::{RecvFuture, SendFuture};
pub use condvar::{Condvar, WaitTimeoutResult};
pub use mutex::{LockFuture, Mutex, MutexGuard};
pub use notify::Notify;
pub use oneshot::oneshot;
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};
pub use waitgroup::WaitGroup;
