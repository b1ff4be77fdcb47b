//! Typed calls from outside any spindle worker: the call starts and runs in a *pump* task on
//! the channel's runtime, and its results cross to the caller through a small bounded pipe of
//! typed messages (the encoded path's module `channel::pipe`, with messages instead of frames).
//!
//! The pump owns the call's [`Driver`] (the handler with its deadline and panic guard, all on
//! the pump's worker): for a unary response it delivers the `Response<R>` or the status; for
//! a stream, the head, then each message, then the trailers.
//!
//! # Invariants
//!
//! - **One short lock.** All pipe state is behind one mutex, held for a few instructions (no waker is woken and
//!   no handler is polled under it).
//! - **Backpressure.** The pump polls the handler's stream only while the pipe holds fewer than
//!   [`CAPACITY`] messages and fewer than [`BYTES`] encoded bytes.
//! - **Either side leaving is seen.** Either side going away is seen by the other: the client dropping its future or stream
//!   sets `client_gone` and wakes the pump, which drops the handler (cancelling the call);
//!   the pump dropped before it finished (the runtime shut down) sets `server_gone` and wakes
//!   the client, which ends the call with `UNAVAILABLE`.
//! - **One status per call.** the pump's last delivery (the unary result, a stream's error or
//!   its trailers) sets `done`; or `server_gone` yields `UNAVAILABLE` once.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use prost::Message;
use tonic::metadata::MetadataMap;
use tonic::{Response, Status};

use super::driver::Driver;
use super::entry::Entry;
use super::handler::Head;
use super::prepared::Prepared;
use super::response::{poll_unary, DirectStream};
use crate::channel::call_state::LiveCall;
use crate::channel::pipe::{unavailable, BYTES, CAPACITY};
use crate::limit::TypedLimits;

struct State<R> {
    /// A unary response, until the client takes it.
    unary: Option<Result<Response<R>, Status>>,
    /// A stream's head, until the client takes it.
    head: Option<Result<Head, Status>>,
    items: VecDeque<Result<R, Status>>,
    /// Encoded bytes of the messages in `items`.
    bytes: usize,
    trailers: Option<MetadataMap>,
    /// The pump delivered its last result.
    done: bool,
    server_gone: bool,
    client_gone: bool,
    client_waker: Option<Waker>,
    server_waker: Option<Waker>,
}

impl<R> Default for State<R> {
    fn default() -> Self {
        State {
            unary: None,
            head: None,
            items: VecDeque::new(),
            bytes: 0,
            trailers: None,
            done: false,
            server_gone: false,
            client_gone: false,
            client_waker: None,
            server_waker: None,
        }
    }
}

struct Pipe<R> {
    state: Mutex<State<R>>,
}

impl<R> Pipe<R> {
    fn lock(&self) -> MutexGuard<'_, State<R>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the state under the lock, then wakes the client ("one short lock").
    fn deliver(&self, change: impl FnOnce(&mut State<R>)) {
        let client = {
            let mut st = self.lock();
            change(&mut st);
            st.client_waker.take()
        };
        wake(client);
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

/// Spawns the pump of a call with a unary response.
pub(crate) fn unary<X: Send + 'static, R: Message + 'static>(
    handle: &spindle::Handle,
    prepared: Prepared<X>,
    entry: Entry,
    live: LiveCall,
) -> Result<UnaryClient<R>, Status> {
    let pipe = spawn(handle, Stage::Start { prepared, entry, streaming: false })?;
    Ok(UnaryClient { end: ClientEnd { pipe, _live: live } })
}

/// Spawns the pump of a call with a streaming response.
pub(crate) fn streaming<X: Send + 'static, R: Message + 'static>(
    handle: &spindle::Handle,
    prepared: Prepared<X>,
    entry: Entry,
    live: LiveCall,
) -> Result<HeadClient<R>, Status> {
    let pipe = spawn(handle, Stage::Start { prepared, entry, streaming: true })?;
    Ok(HeadClient { end: Some(ClientEnd { pipe, _live: live }) })
}

fn spawn<X: Send + 'static, R: Message + 'static>(
    handle: &spindle::Handle,
    stage: Stage<X, R>,
) -> Result<Arc<Pipe<R>>, Status> {
    let pipe = Arc::new(Pipe { state: Mutex::new(State::default()) });
    let pump = Pump { pipe: pipe.clone(), stage, finished: false };
    match handle.try_spawn_async(pump) {
        Ok(_detached) => Ok(pipe),
        Err(closed) => Err(Status::unavailable(format!("spindle-grpc: {closed}"))),
    }
}

enum Stage<X, R> {
    Start { prepared: Prepared<X>, entry: Entry, streaming: bool },
    Unary(Driver, TypedLimits),
    Head(Driver, TypedLimits),
    Body(DirectStream<R>),
    Done,
}

/// The pump task's future: starts the call on its worker, runs it, feeds the pipe.
struct Pump<X, R> {
    pipe: Arc<Pipe<R>>,
    stage: Stage<X, R>,
    /// The last delivery was made (or the client is gone).
    finished: bool,
}

// Nothing in a pump is pinned: the handler is boxed.
impl<X, R> Unpin for Pump<X, R> {}

impl<X: Send + 'static, R: Message + 'static> Future for Pump<X, R> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        loop {
            {
                let mut st = this.pipe.lock();
                if st.client_gone {
                    drop(st);
                    this.finished = true;
                    this.stage = Stage::Done; // drops the handler: the call is cancelled
                    return Poll::Ready(());
                }
                register(&mut st.server_waker, cx);
                if matches!(this.stage, Stage::Body(_)) && (st.items.len() >= CAPACITY || st.bytes >= BYTES) {
                    return Poll::Pending; // the client wakes us when it takes a message
                }
            }
            match std::mem::replace(&mut this.stage, Stage::Done) {
                Stage::Start { prepared, entry, streaming } => {
                    let limits = prepared.limits;
                    match prepared.dispatch(&entry, None) {
                        Ok(driver) if streaming => this.stage = Stage::Head(driver, limits),
                        Ok(driver) => this.stage = Stage::Unary(driver, limits),
                        Err(status) if streaming => return this.finish(|st| st.head = Some(Err(status))),
                        Err(status) => return this.finish(|st| st.unary = Some(Err(status))),
                    }
                }
                Stage::Unary(mut driver, limits) => match poll_unary::<R>(&mut driver, &limits, cx) {
                    Poll::Ready(result) => return this.finish(|st| st.unary = Some(result)),
                    Poll::Pending => {
                        this.stage = Stage::Unary(driver, limits);
                        return Poll::Pending;
                    }
                },
                Stage::Head(mut driver, limits) => match driver.poll_head(cx, &mut None::<R>) {
                    Poll::Ready(Ok(head)) => {
                        this.pipe.deliver(|st| st.head = Some(Ok(head)));
                        this.stage = Stage::Body(DirectStream::new(driver, limits));
                    }
                    Poll::Ready(Err(status)) => return this.finish(|st| st.head = Some(Err(status))),
                    Poll::Pending => {
                        this.stage = Stage::Head(driver, limits);
                        return Poll::Pending;
                    }
                },
                Stage::Body(mut body) => match body.poll_next(cx) {
                    Poll::Ready(Some(item)) => {
                        let len = item.as_ref().map_or(0, Message::encoded_len);
                        this.pipe.deliver(|st| {
                            st.bytes += len;
                            st.items.push_back(item);
                        });
                        this.stage = Stage::Body(body);
                    }
                    Poll::Ready(None) => {
                        let trailers = body.take_trailers();
                        return this.finish(|st| st.trailers = trailers);
                    }
                    Poll::Pending => {
                        this.stage = Stage::Body(body);
                        return Poll::Pending;
                    }
                },
                Stage::Done => return Poll::Ready(()),
            }
        }
    }
}

impl<X, R> Pump<X, R> {
    /// The last delivery ("one status per call").
    fn finish(&mut self, change: impl FnOnce(&mut State<R>)) -> Poll<()> {
        self.stage = Stage::Done;
        self.finished = true;
        self.pipe.deliver(|st| {
            change(st);
            st.done = true;
        });
        Poll::Ready(())
    }
}

impl<X, R> Drop for Pump<X, R> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // Dropped before it finished: the runtime shut down, or the pump's poll panicked
        // ("either side leaving is seen").
        self.pipe.deliver(|st| st.server_gone = true);
    }
}

/// The client's hold on the pipe: dropped, it tells the pump ("either side leaving is seen").
struct ClientEnd<R> {
    pipe: Arc<Pipe<R>>,
    _live: LiveCall,
}

impl<R> Drop for ClientEnd<R> {
    fn drop(&mut self) {
        let server = {
            let mut st = self.pipe.lock();
            st.client_gone = true;
            st.server_waker.take()
        };
        wake(server);
    }
}

/// The client's future of a pumped call with a unary response.
pub(crate) struct UnaryClient<R> {
    end: ClientEnd<R>,
}

impl<R> Future for UnaryClient<R> {
    type Output = Result<Response<R>, Status>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.end.pipe.lock();
        if let Some(result) = st.unary.take() {
            return Poll::Ready(result);
        }
        if st.server_gone || st.done {
            return Poll::Ready(Err(unavailable()));
        }
        register(&mut st.client_waker, cx);
        Poll::Pending
    }
}

/// The client's future of a pumped call's streaming head.
pub(crate) struct HeadClient<R> {
    end: Option<ClientEnd<R>>,
}

impl<R: Message + 'static> Future for HeadClient<R> {
    /// The head, with the client's response stream (module `stream` makes it a `Streaming`).
    type Output = Result<Response<StreamClient<R>>, Status>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let end = self.end.as_ref().expect("spindle-grpc typed call polled after completion");
        let mut st = end.pipe.lock();
        match st.head.take() {
            Some(Ok(head)) => {
                drop(st);
                let end = self.end.take().expect("checked above");
                let stream = StreamClient { end, finished: false };
                Poll::Ready(Ok(Response::from_parts(head.metadata, stream, head.extensions)))
            }
            Some(Err(status)) => Poll::Ready(Err(status)),
            None if st.server_gone || st.done => Poll::Ready(Err(unavailable())),
            None => {
                register(&mut st.client_waker, cx);
                Poll::Pending
            }
        }
    }
}

/// The client's response stream of a pumped call.
pub(crate) struct StreamClient<R> {
    end: ClientEnd<R>,
    finished: bool,
}

impl<R: Message + 'static> StreamClient<R> {
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<R, Status>>> {
        if self.finished {
            return Poll::Ready(None);
        }
        let mut st = self.end.pipe.lock();
        if let Some(item) = st.items.pop_front() {
            let was_full = st.items.len() + 1 >= CAPACITY || st.bytes >= BYTES;
            st.bytes -= item.as_ref().map_or(0, Message::encoded_len);
            // The pump may be waiting for room ("backpressure").
            let server = if was_full { st.server_waker.take() } else { None };
            drop(st);
            wake(server);
            return Poll::Ready(Some(item));
        }
        if st.done {
            self.finished = true;
            return Poll::Ready(None);
        }
        if st.server_gone {
            self.finished = true;
            return Poll::Ready(Some(Err(unavailable())));
        }
        register(&mut st.client_waker, cx);
        Poll::Pending
    }

    pub(crate) fn take_trailers(&mut self) -> Option<MetadataMap> {
        self.end.pipe.lock().trailers.take()
    }
}
