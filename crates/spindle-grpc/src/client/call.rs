//! One remote call's life: the stream permit it holds, the request body that fails once the
//! call is dropped (so hyper resets the stream), the local deadline, and the response future
//! and body tonic sees. The channel that starts calls is in module `remote_channel`; the
//! connection's invariants (never hang, a call waits for one connection, stream permits) are
//! module `shared`'s.
//!
//! # Invariants
//!
//! - **A dropped call is cancelled.** Dropping the response future or body before the end
//!   fails the request body hyper is still sending ([`OutBody`]), so the stream is reset
//!   (never left half-open), and drops hyper's response, which resets it from this side.
//! - **Deadlines are local too.** A call with a `grpc-timeout` (tonic's `Request::set_timeout`,
//!   or the endpoint's default) ends with `DEADLINE_EXCEEDED` when it passes, whatever the
//!   server does: a spindle timer when the call is polled on a worker, otherwise a timer task
//!   on the channel's runtime ([`Deadline`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use http_body::Frame;
use tonic::body::Body;
use tonic::Status;

use super::shared::Shared;
use super::trace::ClientTrace;
use crate::call_metrics::code_of;
use crate::lock::lock;

/// The trailer (or, in a status-only answer, the header) that carries a call's status.
pub(super) static GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");
use crate::status::status_trailers;
use crate::wire::{never_processed, status_of, WireBody};

/// A permit of [`Shared::in_flight`] (module `shared`, "stream permits").
pub(crate) struct Permit(pub(crate) Arc<Shared>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// Set when the caller drops a call before its end; the request body then fails. Also holds
/// the request body's own failure (tonic's encoding errors), which the call reports in place
/// of the stream reset it causes.
#[derive(Default)]
pub(crate) struct CancelFlag {
    pub(crate) cancelled: AtomicBool,
    pub(crate) waker: Mutex<Option<Waker>>,
    pub(crate) failure: Mutex<Option<Status>>,
}

pub(crate) struct CancelOnDrop(pub(crate) Option<Arc<CancelFlag>>);

impl CancelOnDrop {
    /// The request body's own failure, if it failed.
    fn failure(&self) -> Option<Status> {
        self.0.as_ref().and_then(|flag| lock(&flag.failure).clone())
    }

    /// The call ended normally: the request body is left to finish.
    fn defuse(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = self.0.take() {
            flag.cancelled.store(true, Ordering::Release);
            let waker = lock(&flag.waker).take();
            if let Some(w) = waker {
                w.wake();
            }
        }
    }
}

/// The request body as hyper sends it: tonic's, failing once the call was dropped.
pub(crate) struct OutBody {
    pub(crate) inner: Body,
    pub(crate) cancel: Arc<CancelFlag>,
}

impl http_body::Body for OutBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let cancelled = || Poll::Ready(Some(Err(Status::cancelled("the call was dropped"))));
        if self.cancel.cancelled.load(Ordering::Acquire) {
            return cancelled();
        }
        let poll = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Err(status))) = &poll {
            // tonic's client reports its encoding errors (its encoding limit among them) as an
            // error of the request body: the call ends with it, as the spec's code.
            *lock(&self.cancel.failure) = Some(crate::limit::respec(status.clone()));
        }
        if poll.is_pending() {
            *lock(&self.cancel.waker) = Some(cx.waker().clone());
            if self.cancel.cancelled.load(Ordering::Acquire) {
                return cancelled();
            }
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Marks the response of a call that failed before the server processed it (no connection
/// came, hyper gave the request up unsent, the stream was refused): module `retry_call`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NotProcessed;

/// A call's deadline timer (module docs, "Deadlines are local too").
pub(crate) enum Deadline {
    Local(spindle::time::Sleep),
    Remote { alarm: Arc<CancelFlag>, task: Option<spindle::task::JoinHandle<()>> },
}

impl Deadline {
    pub(crate) fn new(at: Instant, handle: Option<&spindle::Handle>) -> Deadline {
        if spindle::Handle::on_worker() {
            return Deadline::Local(spindle::time::sleep_until_future(at));
        }
        let alarm = Arc::new(CancelFlag::default());
        let fire = alarm.clone();
        let task = handle.and_then(|h| {
            h.try_spawn_async(async move {
                spindle::time::sleep_until_future(at).await;
                fire.cancelled.store(true, Ordering::Release);
                if let Some(w) = lock(&fire.waker).take() {
                    w.wake();
                }
            })
            .ok()
        });
        if task.is_none() {
            alarm.cancelled.store(true, Ordering::Release);
        }
        Deadline::Remote { alarm, task }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            Deadline::Local(sleep) => Pin::new(sleep).poll(cx),
            Deadline::Remote { alarm, .. } => {
                if alarm.cancelled.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                *lock(&alarm.waker) = Some(cx.waker().clone());
                if alarm.cancelled.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let Deadline::Remote { task: Some(task), .. } = self {
            task.abort();
        }
    }
}

pub(crate) fn deadline_exceeded() -> Status {
    Status::deadline_exceeded("deadline exceeded (enforced by the spindle-grpc client)")
}

type SendFuture = Pin<Box<dyn Future<Output = hyper::Result<http::Response<hyper::body::Incoming>>> + Send>>;

pub(crate) enum Stage {
    /// Waiting for a connection (boxed: rare, and the request is large), since `since`
    /// connections were published (`Shared::poll_sender`).
    Waiting {
        request: Option<Box<http::Request<Body>>>,
        since: u64,
    },
    Sending(SendFuture),
    Ready(Option<Box<http::Response<RemoteBody>>>),
}

/// What a call holds until its response body ends.
pub(crate) struct CallParts {
    pub(crate) _permit: Permit,
    pub(crate) deadline: Option<Deadline>,
    pub(crate) cancel: CancelOnDrop,
    /// The call's span and figures (module `trace`; nothing without the `tracing` and
    /// `metrics` features).
    pub(crate) trace: ClientTrace,
}

/// The response future of a call on a [`RemoteChannel`](crate::RemoteChannel).
#[must_use = "futures do nothing unless polled"]
pub struct RemoteFuture {
    pub(crate) stage: Stage,
    /// `None` for a call decided at once.
    pub(crate) shared: Option<Arc<Shared>>,
    pub(crate) call: Option<CallParts>,
}

impl RemoteFuture {
    pub(crate) fn ready(status: Status) -> RemoteFuture {
        RemoteFuture { stage: Stage::Ready(Some(Box::new(status.into_http()))), shared: None, call: None }
    }

    fn fail(&mut self, status: Status) -> Poll<Result<http::Response<RemoteBody>, std::convert::Infallible>> {
        self.stage = Stage::Ready(None);
        if let Some(call) = self.call.as_mut() {
            call.trace.end_with(|| status.code());
        }
        // The permit and timers go now; dropping the hyper future resets the stream.
        self.call = None;
        Poll::Ready(Ok(status.into_http()))
    }

    /// [`fail`](Self::fail) for a call the server never processed: the response carries
    /// [`NotProcessed`], which lets a retrying channel send it again transparently.
    fn fail_unprocessed(
        &mut self,
        status: Status,
    ) -> Poll<Result<http::Response<RemoteBody>, std::convert::Infallible>> {
        let mut poll = self.fail(status);
        if let Poll::Ready(Ok(response)) = &mut poll {
            response.extensions_mut().insert(NotProcessed);
        }
        poll
    }
}

impl Future for RemoteFuture {
    type Output = Result<http::Response<RemoteBody>, std::convert::Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Stage::Ready(response) = &mut this.stage {
            let response = response.take().expect("spindle-grpc RemoteFuture polled after completion");
            return Poll::Ready(Ok(*response));
        }
        if let Some(deadline) = this.call.as_mut().and_then(|c| c.deadline.as_mut()) {
            if deadline.poll(cx).is_ready() {
                return this.fail(deadline_exceeded());
            }
        }
        if let Stage::Waiting { request, since } = &mut this.stage {
            let shared = this.shared.as_ref().expect("a waiting call has its channel");
            match shared.poll_sender(cx, *since) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(status)) => return this.fail_unprocessed(status),
                Poll::Ready(Ok(mut sender)) => {
                    let request = request.take().expect("a waiting call has its request");
                    this.stage = Stage::Sending(Box::pin(sender.send_request(*request)));
                }
            }
        }
        let Stage::Sending(send) = &mut this.stage else { unreachable!("the stages above return") };
        match send.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => {
                let local = this.call.as_ref().and_then(|c| c.cancel.failure());
                match local {
                    Some(status) => this.fail(status),
                    None if never_processed(&e) => this.fail_unprocessed(status_of(&e)),
                    None => this.fail(status_of(&e)),
                }
            }
            Poll::Ready(Ok(response)) => {
                this.stage = Stage::Ready(None);
                let mut call = this.call.take();
                if let Some(call) = call.as_mut() {
                    // A status-only answer: the call ends with the response.
                    let status = response.headers().get(&GRPC_STATUS);
                    if status.is_some() {
                        call.trace.end_with(|| code_of(status));
                    }
                }
                Poll::Ready(Ok(response.map(|body| {
                    let end = http_body::Body::is_end_stream(&body);
                    let mut body = RemoteBody { body: Some(WireBody::new(body)), call };
                    if end {
                        body.finish();
                    }
                    body
                })))
            }
        }
    }
}

impl std::fmt::Debug for RemoteFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::RemoteFuture")
    }
}

/// The response body of a call on a [`RemoteChannel`](crate::RemoteChannel): the server's message frames and
/// trailers, or a trailers frame with the status this side decided (deadline, lost
/// connection).
#[derive(Default)]
pub struct RemoteBody {
    pub(crate) body: Option<WireBody>,
    pub(crate) call: Option<CallParts>,
}

impl RemoteBody {
    /// The call ended: release the permit; the request body may finish on its own.
    fn finish(&mut self) {
        if let Some(call) = self.call.take() {
            call.cancel.defuse();
        }
    }

    fn fail(&mut self, status: &Status) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.body = None;
        if let Some(call) = self.call.as_mut() {
            call.trace.end_with(|| status.code());
        }
        self.call = None;
        Poll::Ready(Some(Ok(status_trailers(status))))
    }
}

impl http_body::Body for RemoteBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let Some(body) = this.body.as_mut() else { return Poll::Ready(None) };
        match Pin::new(body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    if let Some(call) = this.call.as_mut() {
                        call.trace.end_with(|| code_of(trailers.get(&GRPC_STATUS)));
                    }
                    this.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(status))) => {
                let local = this.call.as_ref().and_then(|c| c.cancel.failure());
                this.fail(&local.unwrap_or(status))
            }
            Poll::Ready(None) => {
                this.body = None;
                if let Some(call) = this.call.as_mut() {
                    // Ended without a status (tonic reports the missing trailers as INTERNAL).
                    call.trace.end_with(|| tonic::Code::Internal);
                }
                this.finish();
                Poll::Ready(None)
            }
            Poll::Pending => {
                if let Some(deadline) = this.call.as_mut().and_then(|c| c.deadline.as_mut()) {
                    if deadline.poll(cx).is_ready() {
                        return this.fail(&deadline_exceeded());
                    }
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_none()
    }
}

impl std::fmt::Debug for RemoteBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::RemoteBody")
    }
}
