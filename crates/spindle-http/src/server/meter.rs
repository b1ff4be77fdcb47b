//! What an HTTP/2 connection holds for a peer that does not read: response bytes waiting for
//! its flow-control window, counted per connection, and the bodies stalled on that window.
//!
//! hyper pulls a response body's next frame only once h2 has window (capacity) for the
//! stream, then hands h2 the whole frame, which h2 keeps until the window lets it out. A
//! body of one large buffer would thus sit whole in h2 after its first pull, out of sight.
//! [`Metered`] wraps a response body that may be large and:
//!
//! - **hands out at most [`CHUNK`] bytes a pull** (a large buffer is sliced, no copy), so
//!   that what h2 holds beyond the window is at most one chunk a stream, and the rest stays
//!   in the body, pulled as the window opens (a streaming body's producer is not polled
//!   meanwhile: its writes wait);
//! - **counts what it holds** in the connection's `unsent` counter (the exact bytes its
//!   body still has, when the body knows them: a buffer does, a stream does not, and holds
//!   only what its producer queued); past
//!   [`Builder::http2_max_unsent`](crate::Builder::http2_max_unsent) the connection refuses
//!   new streams (module `service`);
//! - **says when it waits for the peer**: after handing out a frame, until hyper pulls
//!   again, the body counts in `stalled`; the connection's driver closes a connection that
//!   has a stalled body and wrote nothing for
//!   [`Builder::http2_send_timeout`](crate::Builder::http2_send_timeout) (module `conn`).
//!
//! Invariant: **counted while alive.** A `Metered` adds to the counters only what it
//! subtracts again by the time it is dropped (its `held` and `stalled` fields mirror its
//! share), so a connection's counters return to zero when its bodies are gone, whatever
//! ended them (the end of the body, a reset stream, the connection's end). The counters are
//! held weakly: a body that outlives its connection counts nowhere.
//!
//! Bodies of at most one chunk whose size is known are not wrapped: what h2 may hold for them
//! is bounded by the connection's stream limit, and the common small answer pays nothing.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};

use crate::server::counters::WeakCounters;
use crate::transport::body::{Body, BoxError};

/// The most bytes a metered body hands out a pull: one HTTP/2 frame of the default size.
pub(crate) const CHUNK: usize = 16 * 1024;

/// Wraps `body` for an HTTP/2 stream of the connection whose counters are `counters`, unless
/// it is small and of known size (module doc).
pub(crate) fn meter(body: Body, counters: &WeakCounters) -> Body {
    if body.size_hint().exact().is_some_and(|n| n <= CHUNK as u64) {
        return body;
    }
    let mut metered =
        Metered { inner: body, rest: Bytes::new(), counters: counters.clone(), held: 0, stalled: false };
    metered.recount();
    Body::wrap(metered)
}

/// A response body that counts what it holds and hands out at most [`CHUNK`] bytes a pull
/// (module doc).
struct Metered {
    inner: Body,
    /// What is left of a data frame larger than a chunk.
    rest: Bytes,
    counters: WeakCounters,
    /// Bytes added to the connection's `unsent` by this body.
    held: u64,
    /// Whether this body counts in the connection's `stalled`.
    stalled: bool,
}

impl Metered {
    /// Brings the connection's `unsent` in line with what this body now holds.
    fn recount(&mut self) {
        let now = self.inner.size_hint().exact().unwrap_or(0) + self.rest.len() as u64;
        if now == self.held {
            return;
        }
        if let Some(counters) = self.counters.upgrade() {
            if now > self.held {
                counters.unsent.fetch_add(now - self.held, Ordering::Relaxed);
            } else {
                counters.unsent.fetch_sub(self.held - now, Ordering::Relaxed);
            }
        }
        self.held = now;
    }

    fn set_stalled(&mut self, stalled: bool) {
        if stalled == self.stalled {
            return;
        }
        if let Some(counters) = self.counters.upgrade() {
            if stalled {
                counters.stalled.fetch_add(1, Ordering::Relaxed);
            } else {
                counters.stalled.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.stalled = stalled;
    }

    /// The next chunk of `rest`.
    fn next_chunk(&mut self) -> Bytes {
        if self.rest.len() <= CHUNK {
            std::mem::take(&mut self.rest)
        } else {
            self.rest.split_to(CHUNK)
        }
    }
}

impl http_body::Body for Metered {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        // hyper pulls again: the peer's window let the last chunk out (or this is the first).
        this.set_stalled(false);
        let polled = if !this.rest.is_empty() {
            Poll::Ready(Some(Ok(Frame::data(this.next_chunk()))))
        } else {
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if data.len() > CHUNK => {
                        this.rest = data;
                        Poll::Ready(Some(Ok(Frame::data(this.next_chunk()))))
                    }
                    Ok(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                    Err(frame) => Poll::Ready(Some(Ok(frame))),
                },
                other => other,
            }
        };
        this.recount();
        if matches!(polled, Poll::Ready(Some(Ok(_)))) && !this.is_end_stream() {
            this.set_stalled(true);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.inner.size_hint();
        let rest = self.rest.len() as u64;
        hint.set_lower(hint.lower() + rest);
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        self.rest = Bytes::new();
        self.inner = Body::empty();
        self.recount();
        self.set_stalled(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::counters::Counters;
    use crate::transport::socket::{self, IoHandle};
    use crate::transport::stream::Transport;
    use http_body_util::BodyExt;

    fn counters() -> (IoHandle<Counters>, WeakCounters) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let stream = spindle::net::TcpStream::from_std(accepted).unwrap();
        let (_io, handle) = socket::new::<Counters>(Transport::Plain(stream), false, Vec::new());
        let weak = handle.attached_ref().downgrade();
        (handle, weak)
    }

    #[test]
    fn a_large_buffer_is_handed_out_a_chunk_at_a_time_and_counted_until_gone() {
        let (handle, weak) = counters();
        let body = meter(Body::from(vec![7u8; 3 * CHUNK + 5]), &weak);
        assert_eq!(handle.attached().unsent.load(Ordering::Relaxed), (3 * CHUNK + 5) as u64);
        let mut body = std::pin::pin!(body);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut sizes = Vec::new();
        while let Poll::Ready(Some(frame)) = body.as_mut().poll_frame(&mut cx) {
            sizes.push(frame.unwrap().into_data().unwrap().len());
            let left = (3 * CHUNK + 5 - sizes.iter().sum::<usize>()) as u64;
            assert_eq!(handle.attached().unsent.load(Ordering::Relaxed), left);
            // Waiting for the next pull (the peer's window) unless that was the last chunk.
            assert_eq!(handle.attached().stalled.load(Ordering::Relaxed), u32::from(left > 0));
        }
        assert_eq!(sizes, [CHUNK, CHUNK, CHUNK, 5]);
        assert_eq!(handle.attached().stalled.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_body_dropped_unfinished_gives_back_what_it_counted() {
        let (handle, weak) = counters();
        let mut body = meter(Body::from(vec![1u8; 4 * CHUNK]), &weak);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(Pin::new(&mut body).poll_frame(&mut cx).is_ready());
        assert_eq!(handle.attached().unsent.load(Ordering::Relaxed), (3 * CHUNK) as u64);
        assert_eq!(handle.attached().stalled.load(Ordering::Relaxed), 1);
        drop(body);
        assert_eq!(handle.attached().unsent.load(Ordering::Relaxed), 0);
        assert_eq!(handle.attached().stalled.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn small_bodies_are_not_wrapped_and_streams_are_sliced_too() {
        let (handle, weak) = counters();
        let small = meter(Body::from(vec![0u8; CHUNK]), &weak);
        assert_eq!(format!("{small:?}"), format!("Body({CHUNK})"), "a small known body is left as it is");
        assert_eq!(handle.attached().unsent.load(Ordering::Relaxed), 0);
        // A stream of unknown size whose producer hands one large frame: sliced, and the rest
        // counted while it is held here.
        let mut stream = meter(Body::wrap(OneFrame(Some(Bytes::from(vec![2u8; 2 * CHUNK])))), &weak);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let Poll::Ready(Some(Ok(first))) = Pin::new(&mut stream).poll_frame(&mut cx) else { panic!() };
        assert_eq!(first.into_data().unwrap().len(), CHUNK);
        assert_eq!(handle.attached().unsent.load(Ordering::Relaxed), CHUNK as u64);
        let collected = spindle::task::block_on(stream.collect());
        assert_eq!(collected.unwrap().to_bytes().len(), CHUNK);
        assert_eq!(handle.attached().unsent.load(Ordering::Relaxed), 0);
    }

    /// A body of unknown size that yields one data frame.
    struct OneFrame(Option<Bytes>);

    impl http_body::Body for OneFrame {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.take().map(|b| Ok(Frame::data(b))))
        }
    }
}
