//! The accept loop: a `Send` task per listener that accepts until shutdown and spawns each
//! connection as a `Send` task of its own (module `conn`).
//!
//! Invariants:
//!
//! - **Any worker serves.** The accept and connection tasks are `Send`: whichever worker takes
//!   them polls them (idle workers steal queued tasks). A socket's events are read by the
//!   worker whose reactor it registered with, and, when that worker leaves its reactor unread
//!   (a handler computing, or the kernel preempted it), by an idle worker, which then runs
//!   the woken tasks itself (spindle's "no reactor left unread while a worker idles"). So a
//!   busy worker holds up only the fiber or task it is running, not the accepts or the other
//!   connections.
//! - **Counted.** The loop and each connection hold a guard of the server's drain (`spindle::graceful`) until they end, so that
//!   a graceful shutdown waits for them.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use spindle::graceful::Watch;
use spindle::net::TcpListener;

use crate::server::handler::Respond;
use crate::server::shared::Shared;

/// Accepts on `listener` until shutdown, spawning a task per connection.
pub(crate) async fn accept_loop<H: Respond>(listener: TcpListener, shared: Arc<Shared<H>>) {
    let _active = shared.drain.enter();
    let mut watch = Watch::new(&*shared);
    loop {
        let accepted = poll_fn(|cx| {
            if watch.poll_triggered(cx).is_ready() {
                return Poll::Ready(None);
            }
            listener.poll_accept(cx).map(Some)
        })
        .await;
        match accepted {
            None => break,
            Some(Ok((stream, peer))) => {
                let active = shared.drain.enter_connection();
                let serve = crate::server::conn::serve_connection(stream, Some(peer), shared.clone(), active);
                // Batched: woken by its streams and handlers, it runs after the tasks already
                // queued (module `builder`, `STREAMS`).
                drop(spindle::task::Builder::new().batched(true).spawn(serve));
            }
            Some(Err(e)) => {
                // EMFILE, ENFILE, ENOBUFS...: the listener stays usable; back off a little.
                log::warn!("spindle-http: accept failed: {e}");
                spindle::time::sleep_future(Duration::from_millis(10)).await;
            }
        }
    }
}
