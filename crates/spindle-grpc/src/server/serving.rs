//! A running server ([`Serving`]): its address, its counters ([`ServerStats`], kept in
//! [`Shared`] by the accept task, the connection tasks and their calls) and its graceful
//! shutdown ([`Serving::shutdown`], through the shutdown drain (`spindle::graceful::Drain`) every connection watches).
//! It keeps module `server`'s invariants "counted while alive" ([`ConnGuard`], and the
//! call guards of module `conn`) and "shutdown drains, then cuts" (the accept task and every
//! connection watch [`Shared::signal`]; [`Serving::shutdown`] waits for their ends).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spindle::graceful::Drain;

/// A listening address.
#[derive(Debug, Clone)]
pub(super) enum Local {
    Tcp(std::net::SocketAddr),
    Unix(Option<std::path::PathBuf>),
}

/// The state a server's accept task, connection tasks and [`Serving`] share.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) signal: Arc<Drain>,
    pub(super) connections: AtomicUsize,
    pub(super) connections_total: AtomicU64,
    pub(super) calls: AtomicUsize,
    pub(super) calls_total: AtomicU64,
    /// Connections dropped at the drain deadline.
    pub(super) cut: AtomicUsize,
}

/// Counts a connection task in [`ServerStats::connections`] while alive.
pub(super) struct ConnGuard(Arc<Shared>);

impl ConnGuard {
    pub(super) fn new(shared: &Arc<Shared>) -> ConnGuard {
        shared.connections.fetch_add(1, Ordering::Relaxed);
        shared.connections_total.fetch_add(1, Ordering::Relaxed);
        ConnGuard(shared.clone())
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Release);
    }
}

/// A snapshot of a server's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerStats {
    /// Connections being served now.
    pub connections: usize,
    /// Connections accepted in all.
    pub connections_total: u64,
    /// Calls in progress now (their response not yet finished or dropped).
    pub calls: usize,
    /// Calls started in all.
    pub calls_total: u64,
}

/// What a graceful shutdown achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Connections still open at the drain deadline, dropped with their calls.
    pub dropped_connections: usize,
}

/// A running server: its address, counters and shutdown. Dropping it does not stop the
/// server (call [`Serving::shutdown`]).
#[derive(Debug)]
pub struct Serving {
    pub(super) shared: Arc<Shared>,
    pub(super) local: Local,
    pub(super) accept: Option<spindle::task::JoinHandle<()>>,
}

impl Serving {
    /// The TCP address served (`None` for a Unix socket).
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        match &self.local {
            Local::Tcp(addr) => Some(*addr),
            Local::Unix(_) => None,
        }
    }

    /// The Unix socket path served (`None` for TCP or an unnamed socket).
    pub fn unix_path(&self) -> Option<&std::path::Path> {
        match &self.local {
            Local::Unix(path) => path.as_deref(),
            Local::Tcp(_) => None,
        }
    }

    /// The server's counters now.
    pub fn stats(&self) -> ServerStats {
        let s = &self.shared;
        ServerStats {
            connections: s.connections.load(Ordering::Relaxed),
            connections_total: s.connections_total.load(Ordering::Relaxed),
            calls: s.calls.load(Ordering::Relaxed),
            calls_total: s.calls_total.load(Ordering::Relaxed),
        }
    }

    /// Starts a graceful shutdown without waiting: the server stops accepting, every
    /// connection sends GOAWAY, and calls still running after `grace` are dropped.
    pub fn begin_shutdown(&self, grace: Duration) {
        self.shared.signal.trigger_with_deadline(spindle::time::deadline_after(grace));
    }

    /// Shuts down gracefully (see [`Serving::begin_shutdown`]) and waits until every
    /// connection has ended or been dropped at the deadline (parks a fiber, blocks a thread;
    /// from a task, use [`Serving::begin_shutdown`] and poll [`Serving::stats`]).
    pub fn shutdown(mut self, grace: Duration) -> ShutdownReport {
        self.begin_shutdown(grace);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        let deadline = self.shared.signal.deadline().unwrap_or_else(Instant::now);
        // Connections end on their own by the deadline (each watches it); wait for that, with
        // a margin for the tasks to run.
        loop {
            let open = self.shared.connections.load(Ordering::Acquire);
            if open == 0 {
                break;
            }
            if Instant::now() > deadline + Duration::from_secs(5) {
                log::warn!("spindle-grpc: {open} connections still open 5 s after the drain deadline");
                break;
            }
            pause(Duration::from_millis(2));
        }
        let dropped = self.shared.cut.load(Ordering::Acquire);
        ShutdownReport { dropped_connections: dropped }
    }
}

/// Sleeps a fiber, or a thread outside the runtime.
fn pause(d: Duration) {
    if spindle::Handle::on_worker() {
        spindle::time::sleep(d);
    } else {
        std::thread::sleep(d);
    }
}
