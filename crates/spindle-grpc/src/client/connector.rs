//! The connection manager of a [`RemoteChannel`](crate::RemoteChannel): one fiber per channel that connects
//! (TCP or Unix, then TLS for `https://`, then the HTTP/2 handshake), publishes the connection, runs hyper's
//! dispatcher as a task until the connection ends, and reconnects. An `https://` attempt
//! first takes its rustls configuration, which loads the system's roots on the blocking pool
//! if the endpoint trusts them and the process has not loaded them yet (module `tls::roots`).
//!
//! # Invariants
//!
//! - **The manager never keeps the channel alive.** It holds a `Weak` to the channel's state
//!   and upgrades it only to publish a state; once every channel and call is gone it stops
//!   (the connection ends when its last `SendRequest`, held in the state, is dropped).
//! - **States.** `Connecting` while an attempt runs; `Ready` while the connection lives;
//!   `Down` after a failed attempt until the retry (after the backoff, which doubles up to
//!   the endpoint's maximum and restarts after a success, each wait randomised by ±20%:
//!   gRPC's connection backoff, so that the clients of a server that went away do not all
//!   retry at the same moments); `Idle` after a connection ended,
//!   until a call wants one (reconnecting only on demand, as gRPC's channels do).
//! - **Down on exit.** Whenever the manager stops while the channel lives (the runtime shut
//!   down), it leaves the state `Down`, so that no call waits for it (module `shared`).
//! - **An HTTP/2 server, or a failed attempt.** An attempt succeeds only once the server's
//!   first frame has arrived whole and is a SETTINGS frame (RFC 9113, 3.4). A peer that sends
//!   nothing (until the connect timeout), hangs up or resets first, or sends anything else
//!   fails the attempt (`Down`, retried after the backoff): the connection is never published,
//!   so neither `connect` nor a call takes a dead connection for a live one. The attempt
//!   fails when the connection does (module `first_frame`: a write's error and the end of
//!   hyper's connection count as much as a read's), not at the connect timeout.

use std::future::Future as _;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::task::Poll;
use std::time::Duration;

use tonic::body::Body;

use super::endpoint::{Endpoint, Target};
use super::first_frame::{wait_for_settings, watched, Watch, Watched};
use super::shared::Shared;
use super::state::{ConnState, Sender};

/// Sets the state `Down` when the manager stops (module docs).
struct DownOnExit(Weak<Shared>);

impl Drop for DownOnExit {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            shared.set_state(ConnState::Down {
                error: "the connection manager stopped (runtime shut down?)".into(),
            });
        }
    }
}

/// How much a backoff wait varies either way (gRPC's connection backoff spec: 0.2).
const JITTER: f64 = 0.2;

/// `backoff` moved by up to `JITTER` of itself either way, by `unit` (uniform in `[0, 1)`):
/// clients that lost the same server spread their retries instead of reconnecting in step.
/// A wait past `Duration::MAX` (a user's "no limit") stays `Duration::MAX`.
fn jittered(backoff: Duration, unit: f64) -> Duration {
    let factor = 1.0 - JITTER + 2.0 * JITTER * unit.clamp(0.0, 1.0);
    Duration::try_from_secs_f64(backoff.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

/// Starts the manager fiber of `shared`'s channel, once.
pub(crate) fn start(shared: &Arc<Shared>) -> io::Result<()> {
    if shared.started.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    shared.set_state(ConnState::Connecting);
    let weak = Arc::downgrade(shared);
    let handle = shared.endpoint.handle.as_ref().expect("checked by Endpoint::build");
    match handle.try_spawn(move || manage(weak)) {
        Ok(_detached) => Ok(()),
        Err(closed) => {
            let e = io::Error::other(format!("spindle-grpc: {closed}"));
            shared.set_state(ConnState::Down { error: e.to_string() });
            Err(e)
        }
    }
}

/// The manager fiber's body.
fn manage(weak: Weak<Shared>) {
    let _down = DownOnExit(weak.clone());
    let Some((endpoint, server_streams)) =
        weak.upgrade().map(|s| (s.endpoint.clone(), s.server_streams.clone()))
    else {
        return;
    };
    let mut backoff = endpoint.backoff_initial;
    loop {
        match connect_once(&endpoint) {
            Ok((sender, conn)) => {
                server_streams.store(conn.max_send_streams(), Ordering::Relaxed);
                let Some(shared) = weak.upgrade() else { return };
                shared.set_state(ConnState::Ready(sender));
                drop(shared);
                backoff = endpoint.backoff_initial;
                let mut conn = conn;
                let streams = server_streams.clone();
                // hyper's dispatcher runs as a task (cheaper to wake per call than a fiber);
                // the manager fiber waits for its end.
                let run = std::future::poll_fn(move |cx| {
                    conn.watch().register(cx.waker());
                    let poll = std::pin::Pin::new(&mut conn).poll(cx);
                    streams.store(conn.max_send_streams(), Ordering::Relaxed);
                    poll
                });
                match spindle::task::Builder::new().batched(true).spawn(run).join() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => log::info!("spindle-grpc: connection to {:?} ended: {e}", endpoint.target),
                    Err(_) => {
                        log::warn!("spindle-grpc: the connection task to {:?} panicked", endpoint.target)
                    }
                }
                server_streams.store(usize::MAX, Ordering::Relaxed);
                let Some(shared) = weak.upgrade() else { return };
                shared.set_state(ConnState::Idle);
                drop(shared);
                // Reconnect when a call wants a connection.
                let wanted = spindle::task::block_on(std::future::poll_fn(|cx| match weak.upgrade() {
                    None => Poll::Ready(false),
                    Some(shared) => shared.poll_wanted(cx).map(|()| true),
                }));
                if !wanted {
                    return;
                }
            }
            Err(e) => {
                log::debug!("spindle-grpc: connecting to {:?} failed: {e}", endpoint.target);
                let Some(shared) = weak.upgrade() else { return };
                shared.set_state(ConnState::Down {
                    error: format!("connecting to {:?}: {e}", endpoint.target),
                });
                drop(shared);
                spindle::time::sleep(jittered(backoff, fastrand::f64()));
                backoff = backoff.saturating_mul(2).min(endpoint.backoff_max);
            }
        }
        let Some(shared) = weak.upgrade() else { return };
        shared.set_state(ConnState::Connecting);
    }
}

type Connection<I> =
    hyper::client::conn::http2::Connection<Watched<I>, Body, spindle::hyper_exec::TaskExecutor>;

/// A TLS connection's socket.
#[cfg(feature = "tls")]
type TlsSocket = crate::tls::TlsIo<crate::tls::ClientStream>;

/// A connection's driver, whatever its socket. Every socket (TCP or Unix, and below rustls)
/// gathers the frames hyper writes during a burst of the worker's work and sends them together
/// (`spindle::net::CoalescedStream`).
enum Driver {
    Plain(Connection<spindle::net::CoalescedStream>, std::sync::Arc<Watch>),
    /// Boxed: rustls's connection state is large, and the other variants are not.
    #[cfg(feature = "tls")]
    Tls(Box<Connection<TlsSocket>>, std::sync::Arc<Watch>),
}

impl Driver {
    fn watch(&self) -> &Watch {
        match self {
            Driver::Plain(_, w) => w,
            #[cfg(feature = "tls")]
            Driver::Tls(_, w) => w,
        }
    }

    fn max_send_streams(&self) -> usize {
        match self {
            Driver::Plain(c, _) => c.current_max_send_streams(),
            #[cfg(feature = "tls")]
            Driver::Tls(c, _) => c.current_max_send_streams(),
        }
    }
}

impl std::future::Future for Driver {
    type Output = hyper::Result<()>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<hyper::Result<()>> {
        match self.get_mut() {
            Driver::Plain(c, _) => std::pin::Pin::new(c).poll(cx),
            #[cfg(feature = "tls")]
            Driver::Tls(c, _) => std::pin::Pin::new(&mut **c).poll(cx),
        }
    }
}

/// One attempt: the socket, then the HTTP/2 handshake, within the connect timeout.
fn connect_once(endpoint: &Endpoint) -> io::Result<(Sender, Driver)> {
    let deadline = spindle::time::deadline_after(endpoint.connect_timeout);
    // The TLS configuration first: no socket is held open while the system's roots load.
    #[cfg(feature = "tls")]
    let tls = match &endpoint.tls {
        Some(tls) => Some((tls, tls.rustls(deadline)?)),
        None => None,
    };
    match &endpoint.target {
        Target::Tcp(addr) => {
            let mut last = None;
            for addr in resolve(addr, deadline)? {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                match spindle::net::TcpStream::connect_timeout(&addr, left.max(Duration::from_millis(1))) {
                    Ok(stream) => {
                        if endpoint.nodelay {
                            stream.set_nodelay(true)?;
                        }
                        #[cfg(feature = "tls")]
                        if let Some((tls, rustls)) = &tls {
                            return connect_tls(endpoint, tls, rustls.clone(), stream, deadline);
                        }
                        let watch = std::sync::Arc::new(Watch::default());
                        let stream = spindle::net::CoalescedStream::from(stream);
                        let (sender, conn) = handshake(endpoint, watched(stream, &watch), deadline)?;
                        let driver = Driver::Plain(conn, watch);
                        wait_for_settings(driver.watch(), deadline)?;
                        return Ok((sender, driver));
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "the host resolved to no address")
            }))
        }
        Target::Unix(path) => {
            let stream = spindle::net::CoalescedStream::from(spindle::net::UnixStream::connect(path)?);
            let watch = std::sync::Arc::new(Watch::default());
            let (sender, conn) = handshake(endpoint, watched(stream, &watch), deadline)?;
            let driver = Driver::Plain(conn, watch);
            wait_for_settings(driver.watch(), deadline)?;
            Ok((sender, driver))
        }
    }
}

/// The addresses of `host:port`, by spindle's resolver (`spindle::net::dns`: the system's
/// lookup on the blocking pool, cached), within the connect timeout. The manager fiber runs
/// on a worker, where `getaddrinfo` itself would stall every fiber and task of that worker
/// for as long as the DNS server takes.
fn resolve(addr: &str, deadline: std::time::Instant) -> io::Result<Vec<std::net::SocketAddr>> {
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    match spindle::task::block_on(spindle::time::timeout(left, spindle::net::lookup_host_async(addr))) {
        Ok(resolved) => resolved,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("resolving {addr}: no answer within {left:?}"),
        )),
    }
}

/// The TLS handshake over a connected socket, then HTTP/2's, within the connect timeout.
#[cfg(feature = "tls")]
fn connect_tls(
    endpoint: &Endpoint,
    tls: &crate::tls::ClientTlsConfig,
    rustls: std::sync::Arc<rustls::ClientConfig>,
    stream: spindle::net::TcpStream,
    deadline: std::time::Instant,
) -> io::Result<(Sender, Driver)> {
    let host = endpoint.origin.host().trim_start_matches('[').trim_end_matches(']');
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    let io = crate::tls::connect(tls, rustls, host, stream, left)?;
    let watch = std::sync::Arc::new(Watch::default());
    let (sender, conn) = handshake(endpoint, watched(io, &watch), deadline)?;
    let driver = Driver::Tls(Box::new(conn), watch);
    wait_for_settings(driver.watch(), deadline)?;
    Ok((sender, driver))
}

fn handshake<I>(
    endpoint: &Endpoint,
    io: Watched<I>,
    deadline: std::time::Instant,
) -> io::Result<(Sender, Connection<I>)>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut builder =
        hyper::client::conn::http2::Builder::new(spindle::hyper_exec::TaskExecutor::new().batched(true));
    // Capped: hyper adds these to an `Instant` itself, which panics for `Duration::MAX`
    // ("no limit"); capped, they are 35,000 years.
    builder
        .timer(spindle::hyper_rt::Timer)
        .initial_stream_window_size(endpoint.initial_stream_window)
        .initial_connection_window_size(endpoint.initial_connection_window)
        .keep_alive_interval(endpoint.keepalive_interval.map(|t| t.min(spindle::time::NEVER)))
        .keep_alive_timeout(endpoint.keepalive_timeout.min(spindle::time::NEVER))
        .keep_alive_while_idle(true);
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    match spindle::task::block_on(spindle::time::timeout(left, builder.handshake::<Watched<I>, Body>(io))) {
        Ok(Ok(pair)) => Ok(pair),
        Ok(Err(e)) => Err(io::Error::other(format!("HTTP/2 handshake: {e}"))),
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "HTTP/2 handshake timed out")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_waits_vary_by_a_fifth_either_way() {
        let base = Duration::from_millis(1000);
        assert_eq!(jittered(base, 0.0), Duration::from_millis(800));
        assert_eq!(jittered(base, 0.5), base);
        assert_eq!(jittered(base, 1.0), Duration::from_millis(1200));
        let waits: Vec<Duration> = (0..1000).map(|_| jittered(base, fastrand::f64())).collect();
        assert!(waits.iter().all(|w| (Duration::from_millis(800)..=Duration::from_millis(1200)).contains(w)));
        // Spread, not one value: at least a wait in each outer fifth of the range.
        assert!(waits.iter().any(|w| *w < Duration::from_millis(880)));
        assert!(waits.iter().any(|w| *w > Duration::from_millis(1120)));
        // The largest backoff an endpoint accepts does not overflow.
        assert_eq!(jittered(Duration::MAX, 1.0), Duration::MAX);
        assert!(jittered(Duration::MAX, 0.0) < Duration::MAX);
    }
}
