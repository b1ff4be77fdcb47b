//! The shared state of a [`RemoteChannel`](crate::RemoteChannel) and its clones ([`Shared`]):
//! the connection's state as the manager fiber publishes it (module `connector`) and calls
//! read it, the calls' wait for a connection, and the stream permits.
//!
//! # Invariants
//!
//! - **Never hang.** A call waiting for a connection is woken by every state change; the
//!   manager leaves the state `Down` whenever it stops (its guard), so no call waits on a
//!   manager that is gone. A waiter that finds no connection asks the idle manager for one at
//!   each look, the one after registering its waker included (a connection made and lost
//!   between the two would otherwise leave both waiting for the other). Every call's wait is
//!   bounded by its deadline too.
//! - **A call waits for one connection.** A waiter remembers how many connections had been
//!   published when it began to wait (when the call started, or `connect` was called: before
//!   the manager may run; [`Shared::poll_sender`]). If the next one is lost before it could be
//!   used (a server that hangs up right after its SETTINGS), the waiter fails with
//!   `UNAVAILABLE` (`connect`: an error) instead of asking for another. With the wishes
//!   granted by each attempt (`Connecting` clears them), a lost connection is replaced only
//!   for a waiter, one new connection per waiter at most (a failed attempt is retried after
//!   the backoff, module `connector`).
//! - **Stream permits.** A call holds one permit of [`Shared::in_flight`] from `poll_ready`
//!   (or `call`) until its response body ends or is dropped; `poll_ready` is pending while
//!   the calls in flight reach the server's `SETTINGS_MAX_CONCURRENT_STREAMS` (or the
//!   endpoint's limit), and every permit's release wakes the waiters.
//!
//! A dropped call and a call's deadline are module `call`'s.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tonic::Status;

use super::endpoint::Endpoint;
use super::state::{ConnState, Sender};
use crate::lock::lock;

/// The shared state of a channel and its clones.
pub(crate) struct Shared {
    pub(crate) endpoint: Endpoint,
    pub(super) state: Mutex<ConnState>,
    /// Connections published so far (`Ready` states set; changed under `state`'s lock).
    pub(super) published: AtomicU64,
    /// Woken at every change of `state`.
    state_waiters: Mutex<Vec<Waker>>,
    /// The manager fiber was started (module `connector`, `start`).
    pub(super) started: AtomicBool,
    pub(super) in_flight: AtomicUsize,
    /// Waiting in `poll_ready` for a permit.
    pub(super) permit_waiters: Mutex<Vec<Waker>>,
    /// A call wants a connection while the state is `Idle`; the manager's waker.
    wanted: AtomicBool,
    manager: Mutex<Option<Waker>>,
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`, as the manager last saw it.
    pub(crate) server_streams: Arc<AtomicUsize>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The manager, idle, notices that the channel is gone.
        if let Some(w) = lock(&self.manager).take() {
            w.wake();
        }
    }
}

impl Shared {
    pub(super) fn new(endpoint: Endpoint) -> Shared {
        Shared {
            endpoint,
            state: Mutex::new(ConnState::Idle),
            published: AtomicU64::new(0),
            state_waiters: Mutex::default(),
            started: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            permit_waiters: Mutex::default(),
            wanted: AtomicBool::new(false),
            manager: Mutex::default(),
            server_streams: Arc::new(AtomicUsize::new(usize::MAX)),
        }
    }

    /// For the idle manager: ready once a call wants a connection.
    pub(crate) fn poll_wanted(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.wanted.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        *lock(&self.manager) = Some(cx.waker().clone());
        if self.wanted.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// Asks an idle manager for a connection.
    pub(super) fn want(&self) {
        self.wanted.store(true, Ordering::Release);
        if let Some(w) = lock(&self.manager).take() {
            w.wake();
        }
    }

    pub(crate) fn set_state(&self, state: ConnState) {
        {
            let mut slot = lock(&self.state);
            match state {
                ConnState::Ready(_) => {
                    self.published.fetch_add(1, Ordering::Relaxed);
                }
                // This attempt serves every call waiting now: their wishes are granted (a wish
                // left over would open a connection later that no call waits for).
                ConnState::Connecting => self.wanted.store(false, Ordering::Release),
                ConnState::Idle | ConnState::Down { .. } => {}
            }
            *slot = state;
        }
        let waiters = std::mem::take(&mut *lock(&self.state_waiters));
        for w in waiters {
            w.wake();
        }
        // A new connection may allow more streams.
        self.wake_permit_waiters();
    }

    /// Ready when the state is connected (`Ok`) or down (`Err`), as [`Shared::poll_sender`].
    pub(super) fn poll_connected(&self, cx: &mut Context<'_>, since: u64) -> Poll<io::Result<()>> {
        match self.poll_sender(cx, since) {
            Poll::Ready(Ok(_)) => Poll::Ready(Ok(())),
            Poll::Ready(Err(status)) => {
                Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionRefused, status.message())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// The connection to send a call on, or the status of a channel that is down; pending
    /// (waker registered) while connecting. `since` is the caller's: the connections published
    /// when it began to wait; once one more was published, a lost connection fails the call
    /// instead of asking for another (module docs, "A call waits for one connection").
    pub(crate) fn poll_sender(&self, cx: &mut Context<'_>, since: u64) -> Poll<Result<Sender, Status>> {
        if let Some(outcome) = self.look(since) {
            return Poll::Ready(outcome);
        }
        lock(&self.state_waiters).push(cx.waker().clone());
        // Look again, the same way: the state may have changed before the waker was in (a
        // connection published and lost meanwhile, the manager idle again).
        match self.look(since) {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending,
        }
    }

    /// What a caller waiting since `since` gets now (`None`: it waits, and an idle manager
    /// was asked for a connection).
    fn look(&self, since: u64) -> Option<Result<Sender, Status>> {
        let state = lock(&self.state);
        match &*state {
            ConnState::Ready(sender) if !sender.is_closed() => return Some(Ok(sender.clone())),
            ConnState::Down { error } => {
                return Some(Err(Status::unavailable(format!("spindle-grpc: not connected: {error}"))))
            }
            _ if since != self.published.load(Ordering::Relaxed) => {
                return Some(Err(Status::unavailable(format!(
                    "spindle-grpc: the connection to {:?} closed before it could be used",
                    self.endpoint.target
                ))))
            }
            ConnState::Idle | ConnState::Ready(_) => self.want(),
            ConnState::Connecting => {}
        }
        None
    }

    /// The live connection's sender, if connected; else the connections published so far (a
    /// waiter's `since`, [`Shared::poll_sender`]).
    pub(super) fn ready_sender(&self) -> Result<Sender, u64> {
        match &*lock(&self.state) {
            ConnState::Ready(sender) if !sender.is_closed() => Ok(sender.clone()),
            _ => Err(self.published.load(Ordering::Relaxed)),
        }
    }

    /// The most calls in flight now: the server's stream limit and the endpoint's.
    fn stream_limit(&self) -> usize {
        self.server_streams.load(Ordering::Relaxed).min(self.endpoint.concurrency_limit)
    }

    /// Takes a stream permit if one is free.
    pub(super) fn try_reserve(&self) -> bool {
        let limit = self.stream_limit();
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < limit).then_some(n + 1))
            .is_ok()
    }

    pub(crate) fn release(&self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.wake_permit_waiters();
    }

    fn wake_permit_waiters(&self) {
        let waiters = std::mem::take(&mut *lock(&self.permit_waiters));
        for w in waiters {
            w.wake();
        }
    }
}
