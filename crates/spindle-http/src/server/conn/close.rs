//! How a connection ends: the driver's own HTTP/2 GOAWAY, and the gentle close (module
//! `conn`'s invariants "no reset under the last answer" and "every HTTP/2 end is a GOAWAY,
//! then a gentle close").

use std::future::{poll_fn, Future};
use std::net::Shutdown;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use spindle::net::TcpStream;

use spindle::graceful::ConnectionGuard;

use crate::server::counters::Counters;
use crate::transport::socket;

/// Why the driver closed a connection, as an HTTP/2 GOAWAY says it (RFC 9113 §6.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GoAway {
    /// Idle, or shutdown before a first request.
    Idle,
    /// Responses waited for the peer's window with nothing written for the send timeout.
    SendTimeout,
    /// The client kept opening streams past the refusals for running handlers (module
    /// `service`).
    Calm,
}

impl GoAway {
    /// The frame: a last stream id of 2^31-1 (any stream may have been processed: the
    /// safe claim, as the driver does not see stream ids), the error code and a short text.
    pub(super) fn frame(self) -> Vec<u8> {
        let (code, text): (u32, &[u8]) = match self {
            GoAway::Idle => (0x0, b"idle"),                     // NO_ERROR
            GoAway::SendTimeout => (0x0, b"send timeout"),      // NO_ERROR
            GoAway::Calm => (0xb, b"too many refused streams"), // ENHANCE_YOUR_CALM
        };
        let len = 8 + text.len();
        let mut frame = Vec::with_capacity(9 + len);
        frame.extend_from_slice(&(len as u32).to_be_bytes()[1..]); // 24-bit length
        frame.extend_from_slice(&[0x7, 0x0]); // type GOAWAY, no flags
        frame.extend_from_slice(&0u32.to_be_bytes()); // stream 0
        frame.extend_from_slice(&0x7fff_ffffu32.to_be_bytes()); // last stream id
        frame.extend_from_slice(&code.to_be_bytes());
        frame.extend_from_slice(text);
        frame
    }
}

/// Closes a connection hyper served gently, in a task of its own that keeps it counted
/// until the close ends: writes out the final frame queued on the socket, if `flush`, then
/// closes as [`lingering_close`] does, all within the lingering close's time.
pub(super) fn spawn_closing(handle: socket::IoHandle<Counters>, flush: bool, active: ConnectionGuard) {
    drop(spindle::task::spawn_async(async move {
        let _active = active;
        let mut deadline = spindle::time::sleep_future(LINGER_TIME);
        if flush {
            let written = poll_fn(|cx| {
                if Pin::new(&mut deadline).poll(cx).is_ready() {
                    return Poll::Ready(false);
                }
                handle.poll_write_out(cx).map(|r| r.is_ok())
            })
            .await;
            if !written {
                return;
            }
        }
        if let Some(stream) = handle.into_stream() {
            lingering_close(stream, deadline).await
        }
    }));
}

/// Closes gently ([`lingering_close`]) in a task of its own, which keeps the connection
/// counted until the close ends.
pub(super) fn spawn_lingering_close(stream: TcpStream, active: ConnectionGuard) {
    drop(spindle::task::spawn_async(async move {
        let _active = active;
        lingering_close(stream, spindle::time::sleep_future(LINGER_TIME)).await
    }));
}

/// How long a gentle close reads what the client still sends, at most.
const LINGER_TIME: Duration = Duration::from_secs(2);

/// Half-closes and reads what the client still sends (at most 1 MiB, until `deadline`), so
/// that closing a socket with unread data (the rest of an oversized request, a request
/// pipelined behind a closing one, HTTP/2 frames sent before the client read a GOAWAY) does
/// not reset the connection before the client has read the last response (RFC 9112 §9.6,
/// RFC 9113 §6.8).
pub(super) async fn lingering_close(mut stream: TcpStream, mut deadline: spindle::time::Sleep) {
    let _ = stream.shutdown(Shutdown::Write);
    // On the heap: an array here would be part of every connection task's state.
    let mut buf = vec![0u8; 4096];
    let mut total = 0usize;
    poll_fn(|cx| loop {
        if total >= 1 << 20 || Pin::new(&mut deadline).poll(cx).is_ready() {
            return Poll::Ready(());
        }
        match futures_io::AsyncRead::poll_read(Pin::new(&mut stream), cx, &mut buf) {
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(()),
            Poll::Ready(Ok(n)) => total += n,
            Poll::Pending => return Poll::Pending,
        }
    })
    .await
}
