//! The client's connection pool: per host (scheme, host, port), idle HTTP/1.1 connections
//! and at most one shared HTTP/2 connection, with a limit on open connections and an idle
//! timeout.
//!
//! Invariants:
//!
//! - **Open count**: `Host::open` counts connections being opened or alive; a slot is taken
//!   (under the pool lock) before connecting and released by [`OpenGuard`]'s drop, which the
//!   connection's driver task owns (or the failed connect drops). It never exceeds
//!   `max_connections_per_host`; a checkout that finds no idle connection and no free slot
//!   waits (its waker is queued) until a slot is released or a connection comes back.
//! - **Idle handover**: a connection is lent while at least one exchange uses it (its
//!   request in flight or its response body not finished) and idle otherwise. [`IdleFlag`]
//!   counts the lenders and decides, under its own lock, between a checkout taking the
//!   connection and the driver expiring it after `idle_timeout` of being idle: exactly one
//!   wins. An expired connection's driver ends, dropping hyper's connection (the socket
//!   closes) and the slot. An HTTP/1.1 connection has at most one lender and waits in its
//!   host's idle list between exchanges; the shared HTTP/2 one has one per open stream, each
//!   a [`Lease`] that gives its share back when dropped (the response body ended or was
//!   dropped, or the exchange failed).
//! - **HTTP/2**: one connection per host is shared by every request (streams multiplex);
//!   while it is being opened, other checkouts for the host wait for it instead of opening
//!   their own. An expired or closed one is forgotten by the next checkout, which opens
//!   another.
//! - **Forgotten when empty**: a host has an entry exactly while `open > 0`. The checkout
//!   that takes its first slot makes it ([`Pool::poll_checkout`]: a checkout leaves with a
//!   slot, a live connection, or queued behind a slot taken); the [`OpenGuard`] drop that
//!   releases its last slot removes it. Then every idle or HTTP/2 sender it holds belongs to a
//!   connection whose driver has ended, and its waiters were just woken (they make a new
//!   entry). Nothing else makes one: a give-back ([`Pool::put`]) or an HTTP/2 registration
//!   ([`Pool::set_h2`]) that finds no entry is about a connection that has ended, and is
//!   dropped. So the pool keeps records only of hosts it has connections to, not of every
//!   host ever visited (a crawler's memory stays bounded), and a host in use keeps its entry:
//!   a keep-alive request hashes its key once to check out and once to give back, as before.

use std::future::Future;
use std::hash::RandomState;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use hashbrown::hash_map::EntryRef;

use crate::client::key::Key;
use crate::transport::body::Body;

/// A connection lent to one request.
pub(crate) enum Conn {
    H1 { sender: hyper::client::conn::http1::SendRequest<Body>, idle: Arc<IdleFlag> },
    H2 { sender: hyper::client::conn::http2::SendRequest<Body>, lease: Lease },
}

#[derive(Default)]
struct Host {
    idle: Vec<(hyper::client::conn::http1::SendRequest<Body>, Arc<IdleFlag>)>,
    h2: Option<(hyper::client::conn::http2::SendRequest<Body>, Arc<IdleFlag>)>,
    opening_h2: bool,
    open: usize,
    waiters: Vec<Waker>,
}

impl Host {
    fn wake_all(&mut self) {
        self.waiters.drain(..).for_each(Waker::wake);
    }
}

/// Hosts by key. hashbrown for `entry_ref`: a checkout finds or makes its host without cloning
/// the key (a `String` allocation a request otherwise), and the last slot's release removes it
/// with the same one lookup; std's hasher, as `std::collections::HashMap` has.
type Hosts = hashbrown::HashMap<Key, Host, RandomState>;

#[derive(Default)]
pub(crate) struct Pool {
    hosts: Mutex<Hosts>,
}

/// The entry of `key`'s host, made on first use (the key is cloned only then).
fn host_of<'a>(hosts: &'a mut Hosts, key: &Key) -> &'a mut Host {
    hosts.entry_ref(key).or_default()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a checkout found.
pub(crate) enum Checkout {
    /// A pooled connection to use.
    Reuse(Conn),
    /// No connection to reuse, and a slot to open one in.
    Open(OpenGuard),
}

impl Pool {
    /// A connection for `key`: a live idle one, the shared HTTP/2 one, or a slot to open a
    /// new one; waits while the host is at its limit.
    pub(crate) fn poll_checkout(
        self: &Arc<Self>,
        cx: &mut Context<'_>,
        key: &Key,
        max_open: usize,
        h2: bool,
    ) -> Poll<Checkout> {
        let mut hosts = lock(&self.hosts);
        let host = host_of(&mut hosts, key);
        if let Some((sender, idle)) = &host.h2 {
            if !sender.is_closed() && idle.take() {
                let lease = Lease(idle.clone());
                return Poll::Ready(Checkout::Reuse(Conn::H2 { sender: sender.clone(), lease }));
            }
            host.h2 = None;
        }
        while let Some((sender, idle)) = host.idle.pop() {
            if !sender.is_closed() && idle.take() {
                return Poll::Ready(Checkout::Reuse(Conn::H1 { sender, idle }));
            }
        }
        let wait_for_h2 = h2 && host.opening_h2;
        if !wait_for_h2 && host.open < max_open {
            host.open += 1;
            host.opening_h2 |= h2;
            return Poll::Ready(Checkout::Open(OpenGuard { pool: self.clone(), key: key.clone(), h2 }));
        }
        host.waiters.push(cx.waker().clone());
        Poll::Pending
    }

    /// How many hosts have an entry.
    pub(crate) fn hosts(&self) -> usize {
        lock(&self.hosts).len()
    }

    /// How many connections are open or being opened, over all hosts.
    pub(crate) fn open_connections(&self) -> usize {
        lock(&self.hosts).values().map(|host| host.open).sum()
    }

    /// Records a new HTTP/2 connection as the host's shared one; not if the host has no entry
    /// left, which means the connection's driver has ended ("forgotten when empty").
    pub(crate) fn set_h2(&self, key: &Key, conn: &Conn) {
        if let Conn::H2 { sender, lease } = conn {
            let mut hosts = lock(&self.hosts);
            let Some(host) = hosts.get_mut(key) else { return };
            host.h2 = Some((sender.clone(), lease.0.clone()));
            host.opening_h2 = false;
            host.wake_all();
        }
    }

    /// Gives back an HTTP/1.1 connection whose exchange finished (response body read to its
    /// end); dropped instead when the host already keeps `max_idle` idle ones, or has no entry
    /// left (then the connection's driver has ended: "forgotten when empty").
    pub(crate) fn put(
        &self,
        key: &Key,
        sender: hyper::client::conn::http1::SendRequest<Body>,
        idle: Arc<IdleFlag>,
        max_idle: usize,
    ) {
        let mut hosts = lock(&self.hosts);
        let Some(host) = hosts.get_mut(key) else { return };
        if host.idle.len() < max_idle && !sender.is_closed() {
            idle.release();
            host.idle.push((sender, idle));
        }
        host.wake_all();
    }
}

/// One exchange's share of the shared HTTP/2 connection, given back when dropped.
pub(crate) struct Lease(pub(crate) Arc<IdleFlag>);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// One open-connection slot of a host; dropping it frees the slot and wakes the waiters, and
/// the last slot's drop removes the host's entry ("forgotten when empty").
pub(crate) struct OpenGuard {
    pool: Arc<Pool>,
    key: Key,
    h2: bool,
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        let mut hosts = lock(&self.pool.hosts);
        // Always occupied: this slot counts in the entry's `open`, which keeps it.
        let EntryRef::Occupied(mut entry) = hosts.entry_ref(&self.key) else { return };
        let host = entry.get_mut();
        debug_assert!(host.open > 0, "an open slot released twice");
        host.open -= 1;
        if self.h2 {
            host.opening_h2 = false;
        }
        host.wake_all();
        if host.open > 0 {
            return;
        }
        // No connection of the host is left: its idle and HTTP/2 senders are dead ones, its
        // waiters woken. They are dropped after the lock is released.
        let gone = entry.remove();
        drop(hosts);
        drop(gone);
    }
}

/// Who holds a connection: lent to some exchanges, idle since an instant, or expired by its
/// driver (see the module doc, "idle handover").
pub(crate) struct IdleFlag {
    state: Mutex<IdleState>,
}

struct IdleState {
    /// Exchanges using the connection (HTTP/1.1: 0 or 1).
    lent: usize,
    /// Set when `lent` drops to 0, cleared when it rises.
    idle_since: Option<Instant>,
    expired: bool,
    driver: Option<Waker>,
}

impl IdleFlag {
    /// The flag of a new connection, lent to the exchange that opened it.
    pub(crate) fn lent_once() -> IdleFlag {
        IdleFlag { state: Mutex::new(IdleState { lent: 1, idle_since: None, expired: false, driver: None }) }
    }

    /// A checkout takes (a share of) the connection; false if its driver expired it first.
    fn take(&self) -> bool {
        let mut s = lock(&self.state);
        if s.expired {
            return false;
        }
        s.lent += 1;
        s.idle_since = None;
        true
    }

    /// An exchange gives its share back; with the last one the connection goes idle now and
    /// its driver starts the idle timer.
    fn release(&self) {
        let mut s = lock(&self.state);
        debug_assert!(s.lent > 0, "a pooled connection released more often than taken");
        s.lent = s.lent.saturating_sub(1);
        if s.lent > 0 {
            return;
        }
        s.idle_since = Some(Instant::now());
        if let Some(w) = s.driver.take() {
            w.wake();
        }
    }

    /// For the driver task: whether the connection has been idle for `timeout` (it is then
    /// expired, and no checkout will take it); otherwise arms `sleep` for the moment it would
    /// be.
    pub(crate) fn poll_expired(
        &self,
        cx: &mut Context<'_>,
        timeout: Duration,
        sleep: &mut Option<spindle::time::Sleep>,
    ) -> bool {
        let mut s = lock(&self.state);
        s.driver = Some(cx.waker().clone());
        let Some(since) = s.idle_since else {
            *sleep = None;
            return false;
        };
        let deadline = spindle::time::deadline_from(since, timeout);
        if Instant::now() >= deadline {
            s.expired = true;
            return true;
        }
        let timer = sleep.get_or_insert_with(|| spindle::time::sleep_until_future(deadline));
        if timer.deadline() != deadline {
            timer.reset(deadline);
        }
        drop(s);
        let _ = std::pin::Pin::new(timer).poll(cx); // wakes this driver at the deadline
        false
    }
}
