//! Calls from outside any spindle worker: the handler runs in a *pump* task on the channel's
//! runtime, and its response crosses to the caller through a small bounded pipe.
//!
//! The pump task owns a [`Direct`] call (module `direct`: the handler with its deadline and
//! panic guard, all on the pump's worker) and copies the response head, then each frame, into
//! the pipe; the caller's [`ClientFuture`] and [`ClientBody`] take them out.
//!
//! # Invariants
//!
//! - **One short lock.** All pipe state is behind one mutex, held for a few instructions (no waker is woken and
//!   no body is polled under it).
//! - **Backpressure.** The pump polls the handler's body only while the pipe holds fewer than
//!   [`CAPACITY`] frames and fewer than [`BYTES`] bytes, so a slow reader bounds the
//!   handler's output to that plus the one frame being produced.
//! - **Either side leaving is seen.** Either side going away is seen by the other: the client dropping its future or body
//!   sets `client_gone` and wakes the pump, which drops the handler (cancelling the call);
//!   the pump dropped before it finished (runtime shut down) sets `server_gone` and wakes
//!   the client, which ends the call with `UNAVAILABLE` instead of waiting forever.
//! - **One status per call.** A call ends with exactly one status for the client: the frames the pump forwarded end
//!   with the handler's trailers (or the channel's status from `direct`), or `server_gone`
//!   yields `UNAVAILABLE` once.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::Frame;
use tonic::Status;

use super::call_state::LiveCall;
use super::direct::{Direct, DirectBody};
use crate::status::status_trailers;

/// Frames the pipe holds before the pump stops polling the handler's body.
pub const CAPACITY: usize = 16;

/// Bytes of data frames the pipe holds before the pump stops polling the handler's body
/// (tonic's encoder batches messages into frames of up to 32 KiB).
pub const BYTES: usize = 64 * 1024;

#[derive(Default)]
struct State {
    head: Option<http::response::Parts>,
    frames: VecDeque<Frame<Bytes>>,
    /// Data bytes in `frames`.
    bytes: usize,
    /// The pump forwarded the end of the body (or trailers): no more frames come.
    server_done: bool,
    /// The pump was dropped before it finished.
    server_gone: bool,
    client_gone: bool,
    client_waker: Option<Waker>,
    server_waker: Option<Waker>,
}

#[derive(Default)]
pub(crate) struct Pipe {
    state: Mutex<State>,
}

impl Pipe {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn wake(waker: Option<Waker>) {
    if let Some(w) = waker {
        w.wake();
    }
}

fn register(slot: &mut Option<Waker>, cx: &Context<'_>) {
    match slot {
        Some(w) if w.will_wake(cx.waker()) => {}
        _ => *slot = Some(cx.waker().clone()),
    }
}

/// The pump task's future: runs the handler and feeds the pipe.
pub(crate) struct Pump {
    pipe: Arc<Pipe>,
    stage: Stage,
}

enum Stage {
    Head(Direct),
    /// The handler's body (`None`: the response had none).
    Body(Option<DirectBody>),
    Done,
}

impl Pump {
    pub(crate) fn new(pipe: Arc<Pipe>, direct: Direct) -> Pump {
        Pump { pipe, stage: Stage::Head(direct) }
    }
}

impl Future for Pump {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        loop {
            {
                let mut st = this.pipe.lock();
                if st.client_gone {
                    drop(st);
                    this.stage = Stage::Done; // drops the handler: the call is cancelled
                    return Poll::Ready(());
                }
                register(&mut st.server_waker, cx);
                if matches!(this.stage, Stage::Body(_)) && (st.frames.len() >= CAPACITY || st.bytes >= BYTES)
                {
                    return Poll::Pending; // the client wakes us when it takes a frame
                }
            }
            match &mut this.stage {
                Stage::Head(direct) => {
                    let Poll::Ready(response) = direct.poll_head(cx) else { return Poll::Pending };
                    let (parts, body) = response.into_parts();
                    let client = {
                        let mut st = this.pipe.lock();
                        st.head = Some(parts);
                        st.client_waker.take()
                    };
                    wake(client);
                    this.stage = Stage::Body(body);
                }
                Stage::Body(body) => {
                    let polled = match body {
                        Some(body) => body.poll_frame(cx),
                        None => Poll::Ready(None),
                    };
                    let (frame, last) = match polled {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Some(Ok(frame))) => {
                            let last = frame.is_trailers();
                            (Some(frame), last)
                        }
                        Poll::Ready(Some(Err(status))) => (Some(status_trailers(&status)), true),
                        Poll::Ready(None) => (None, true),
                    };
                    let client = {
                        let mut st = this.pipe.lock();
                        if let Some(data) = frame.as_ref().and_then(Frame::data_ref) {
                            st.bytes += data.len();
                        }
                        st.frames.extend(frame);
                        st.server_done |= last;
                        st.client_waker.take()
                    };
                    wake(client);
                    if last {
                        this.stage = Stage::Done;
                        return Poll::Ready(());
                    }
                }
                Stage::Done => return Poll::Ready(()),
            }
        }
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        if matches!(self.stage, Stage::Done) {
            return;
        }
        let client = {
            let mut st = self.pipe.lock();
            st.server_gone = true;
            st.client_waker.take()
        };
        wake(client);
    }
}

/// The client's hold on the pipe: dropped before the call ended, it tells the pump.
struct ClientEnd {
    pipe: Arc<Pipe>,
    _end: LiveCall,
}

impl Drop for ClientEnd {
    fn drop(&mut self) {
        let server = {
            let mut st = self.pipe.lock();
            st.client_gone = true;
            st.server_waker.take()
        };
        wake(server);
    }
}

/// The client's response future for a pumped call.
pub(crate) struct ClientFuture {
    end: Option<ClientEnd>,
}

impl ClientFuture {
    pub(crate) fn new(pipe: Arc<Pipe>, live: LiveCall) -> ClientFuture {
        ClientFuture { end: Some(ClientEnd { pipe, _end: live }) }
    }
}

pub(crate) fn unavailable() -> Status {
    Status::unavailable("the spindle runtime running the handler shut down")
}

impl Future for ClientFuture {
    /// The response's head and body (`None`: the pump is gone, the status is in the head).
    type Output = http::Response<Option<ClientBody>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let end = self.end.as_ref().expect("spindle-grpc ResponseFuture polled after completion");
        let mut st = end.pipe.lock();
        if let Some(parts) = st.head.take() {
            drop(st);
            let end = self.end.take();
            let body = Some(ClientBody { end, done: false });
            return Poll::Ready(http::Response::from_parts(parts, body));
        }
        if st.server_gone {
            return Poll::Ready(unavailable().into_http());
        }
        register(&mut st.client_waker, cx);
        Poll::Pending
    }
}

/// The client's response body for a pumped call.
pub(crate) struct ClientBody {
    end: Option<ClientEnd>,
    done: bool,
}

impl ClientBody {
    pub(crate) fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let Some(end) = self.end.as_ref() else { return Poll::Ready(None) };
        let mut st = end.pipe.lock();
        if let Some(frame) = st.frames.pop_front() {
            let was_full = st.frames.len() + 1 >= CAPACITY || st.bytes >= BYTES;
            if let Some(data) = frame.data_ref() {
                st.bytes -= data.len();
            }
            // The pump may be waiting for room ("backpressure").
            let server = if was_full { st.server_waker.take() } else { None };
            let last = frame.is_trailers();
            drop(st);
            wake(server);
            if last {
                self.done = true;
            }
            return Poll::Ready(Some(Ok(frame)));
        }
        if st.server_done {
            self.done = true;
            return Poll::Ready(None);
        }
        if st.server_gone {
            self.done = true;
            return Poll::Ready(Some(Ok(status_trailers(&unavailable()))));
        }
        register(&mut st.client_waker, cx);
        Poll::Pending
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.done
    }
}
