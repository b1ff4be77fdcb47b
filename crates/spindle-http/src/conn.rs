//! One fiber per connection: it drives hyper's `serve_connection` future with
//! `spindle::task::block_on`, so a blocking handler called from the service parks this fiber.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::io::Read;
use std::net::{Shutdown, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use spindle::net::{TcpListener, TcpStream};

use crate::handler::Respond;
use crate::server::Shared;
use crate::service::{Origin, Service};
use crate::socket;

/// Keeps this fiber's waker in the server's shutdown list while it waits, so that
/// `Server::shutdown` can wake it.
struct ShutdownWatch<'a, H> {
    shared: &'a Shared<H>,
    key: Option<u64>,
    waker: Option<Waker>,
}

impl<'a, H> ShutdownWatch<'a, H> {
    fn new(shared: &'a Shared<H>) -> Self {
        ShutdownWatch { shared, key: None, waker: None }
    }

    /// Whether shutdown has begun; otherwise makes sure `cx`'s waker is registered.
    fn poll(&mut self, cx: &mut Context<'_>) -> bool {
        if self.shared.shutdown.is_triggered() {
            return true;
        }
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
            self.key = Some(self.shared.shutdown.register(self.key, cx.waker().clone()));
            // Triggered between the check and the registration: the trigger may have missed us.
            return self.shared.shutdown.is_triggered();
        }
        false
    }
}

impl<H> Drop for ShutdownWatch<'_, H> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.shared.shutdown.deregister(key);
        }
    }
}

/// An accept loop: runs until shutdown, spawning a fiber per connection, on this worker, or
/// with `spread: Some(n)` on each of the n workers in turn. Connection fibers never move.
pub(crate) fn accept_loop<H: Respond>(listener: TcpListener, shared: Arc<Shared<H>>, spread: Option<usize>) {
    let _active = shared.active.enter();
    let mut next_worker = 0usize;
    let mut watch = ShutdownWatch::new(&shared);
    loop {
        let accepted = spindle::task::block_on(poll_fn(|cx| {
            if watch.poll(cx) {
                return Poll::Ready(None);
            }
            listener.poll_accept(cx).map(Some)
        }));
        match accepted {
            None => break,
            Some(Ok((stream, peer))) => {
                let shared2 = shared.clone();
                let active = shared.active.enter();
                let builder = spindle::fiber::Builder::new()
                    .name(Origin::connection_name(Some(peer)))
                    .stack_size(shared.config.stack_size);
                let serve = move || {
                    let _active = active;
                    serve_connection(stream, Some(peer), &shared2);
                };
                let spawned = match spread {
                    Some(n) => {
                        next_worker = (next_worker + 1) % n;
                        builder.worker(next_worker).spawn(serve)
                    }
                    None => builder.spawn_local(serve),
                };
                if let Err(e) = spawned {
                    log::warn!("spindle-http: could not spawn a connection fiber: {e}");
                }
            }
            Some(Err(e)) => {
                // EMFILE, ENFILE, ENOBUFS...: the listener stays usable; back off a little.
                log::warn!("spindle-http: accept failed: {e}");
                spindle::time::sleep(Duration::from_millis(10));
            }
        }
    }
    drop(watch);
    drop(listener);
}

fn serve_connection<H: Respond>(stream: TcpStream, peer: Option<SocketAddr>, shared: &Arc<Shared<H>>) {
    let config = &shared.config;
    if config.nodelay {
        let _ = stream.set_nodelay(true);
    }
    let progress = Rc::new(Cell::new(0u64));
    let busy = Rc::new(Cell::new(0u32));
    let requests = Rc::new(Cell::new(0u64));
    let (io, handle) = socket::new(stream, config.pipeline_flush, progress.clone());
    let origin = Origin { peer, stack_size: config.stack_size };
    let service = Service { shared: shared.clone(), busy: busy.clone(), requests: requests.clone(), origin };
    let mut conn = shared.http.serve_connection(io, service);
    // The idle timer fires every `idle_timeout`; the connection closes when a whole period
    // passed with no progress and no handler running (so after 1 to 2 periods of idleness).
    let mut idle = config.idle_timeout.map(|d| (d, spindle::time::sleep_future(d), 0u64));
    let mut watch = ShutdownWatch::new(shared);
    let mut draining = false;
    // hyper's result once its connection future has finished; the coalesced bytes it left
    // are drained before the driver returns it.
    let mut finished: Option<Result<(), hyper::Error>> = None;
    let result = spindle::task::block_on(poll_fn(|cx| {
        while finished.is_none() {
            if !draining && watch.poll(cx) {
                // Graceful: an idle connection closes now, a busy one after its response.
                // hyper closes idle keep-alive connections itself, but waits for the first
                // request on a connection that has not had one yet: close those here.
                draining = true;
                if requests.get() == 0 {
                    return Poll::Ready(None);
                }
                Pin::new(&mut conn).graceful_shutdown();
            }
            if let Poll::Ready(r) = Pin::new(&mut conn).poll(cx) {
                finished = Some(r);
                break;
            }
            // An inline blocking handler parks this fiber inside `conn.poll`; a shutdown
            // wake-up that arrived meanwhile was absorbed by that park. Look again.
            if draining || !shared.shutdown.is_triggered() {
                break;
            }
        }
        // hyper has done all it can in this poll: write what it left in the coalescing
        // buffer (one system call for a batch of pipelined responses).
        match handle.poll_drain(cx) {
            Poll::Ready(Ok(())) => {
                if let Some(r) = finished.take() {
                    return Poll::Ready(Some(r));
                }
            }
            // The peer is gone: nothing more can be written.
            Poll::Ready(Err(_)) => return Poll::Ready(finished.take()),
            Poll::Pending => {}
        }
        if let Some((timeout, sleep, seen)) = &mut idle {
            while Pin::new(&mut *sleep).poll(cx).is_ready() {
                if busy.get() == 0 && progress.get() == *seen {
                    return Poll::Ready(None); // idle: drop the connection
                }
                *seen = progress.get();
                sleep.reset(Instant::now() + *timeout);
            }
        }
        Poll::Pending
    }));
    drop(watch);
    if let Some(Err(e)) = result {
        if error_status(&e).is_some() {
            // hyper wrote its 400/431 response (drained above); close gently.
            drop(conn);
            if let Some(stream) = handle.into_stream() {
                lingering_close(stream);
            }
        } else {
            log::debug!("spindle-http: connection error: {e}");
        }
    }
}

/// The status of hyper's automatic response to a parse error (as hyper's `on_error`).
fn error_status(e: &hyper::Error) -> Option<&'static str> {
    if !e.is_parse() || e.is_parse_version_h2() || e.is_parse_status() {
        None
    } else if e.is_parse_too_large() {
        if e.to_string().contains("URI") {
            Some("414 URI Too Long")
        } else {
            Some("431 Request Header Fields Too Large")
        }
    } else {
        Some("400 Bad Request")
    }
}

/// Half-closes and reads what the client still sends (bounded), so that closing a socket
/// with unread data (an oversized header, say) does not reset the connection before the
/// client has read the error response.
fn lingering_close(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut buf = [0u8; 4096];
    let mut total = 0usize;
    while total < 1 << 20 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
}
