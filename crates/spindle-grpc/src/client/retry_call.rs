//! A call a [`BalancedChannel`](crate::BalancedChannel) may send more than once: its request
//! messages kept for a replay, each attempt on a server picked anew, and the decision after
//! each answer (module `retry` has the policies).
//!
//! # Invariants
//!
//! - **Bounded buffer.** The request body is kept as it is sent, up to the channel's retry
//!   buffer (bytes of messages); past it the buffer is freed and the call is *committed*: no
//!   further attempt. A call whose body is still being written replays what was kept, then
//!   goes on reading the caller's body.
//! - **One reader.** Only the current attempt's body reads the caller's body; the body of an
//!   attempt given up (its stream reset, hyper still holding it) fails if polled, so it never
//!   takes a message from the next attempt.
//! - **Committed once the server answered.** An attempt whose response has headers that are
//!   not the whole answer (no `grpc-status` in them) is the call's: the response goes to the
//!   caller whatever its trailers say later, as the retry design commits on the first
//!   response headers. Once the call has its answer, the kept messages are freed and no more
//!   are kept.
//! - **Transparent retries are few.** An attempt the server never processed (no connection,
//!   unsent, stream refused) is sent again without counting as an attempt, at most
//!   [`TRANSPARENT_RETRIES`] times a call, with or without a policy.
//! - **The deadline is the call's.** Every attempt carries the time left of the caller's
//!   `grpc-timeout`; a retry that would start past it ends the call with `DEADLINE_EXCEEDED`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Frame;
use tonic::body::Body;
use tonic::{Code, Status};

use super::call::{deadline_exceeded, NotProcessed, RemoteBody, RemoteFuture, GRPC_STATUS};
use super::outlier::Outlier;
use super::retry::{RetryPolicy, ServiceConfig};
use crate::lock::lock;
use crate::timeout::{encode_timeout, parse_timeout_header, GRPC_TIMEOUT};

/// Where a call's attempts go: a server picked anew for each (the balancer).
pub(crate) trait Attempts: Send + Sync {
    /// Starts one attempt of a call; with the outlier record of the server it went to, when
    /// the channel ejects outliers.
    fn attempt(&self, request: http::Request<Body>) -> (RemoteFuture, Option<Arc<Outlier>>);
}

/// The most transparent retries of one call (module docs).
pub const TRANSPARENT_RETRIES: u32 = 3;

/// The default retry buffer of a channel, per call (grpc-go's per-call default).
pub const DEFAULT_RETRY_BUFFER: usize = 256 * 1024;

/// The caller's request body and what was kept of it (module docs).
struct Tee {
    original: Body,
    kept: Vec<Bytes>,
    kept_bytes: usize,
    limit: usize,
    /// Past the buffer: nothing kept, no replay possible.
    committed: bool,
    /// The caller's body has ended.
    ended: bool,
    /// The attempt whose body may read the caller's.
    current: u32,
}

/// One attempt's request body.
struct Replay {
    tee: Arc<Mutex<Tee>>,
    attempt: u32,
    /// Frames of `kept` replayed so far.
    next: usize,
}

impl http_body::Body for Replay {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let mut tee = lock(&this.tee);
        if tee.current != this.attempt {
            return Poll::Ready(Some(Err(Status::cancelled("an attempt given up for a retry"))));
        }
        if this.next < tee.kept.len() {
            this.next += 1;
            return Poll::Ready(Some(Ok(Frame::data(tee.kept[this.next - 1].clone()))));
        }
        if tee.ended {
            return Poll::Ready(None);
        }
        let poll = Pin::new(&mut tee.original).poll_frame(cx);
        match &poll {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if !tee.committed {
                        let data = data.clone();
                        tee.kept_bytes += data.len();
                        if tee.kept_bytes > tee.limit {
                            tee.committed = true;
                            tee.kept = Vec::new();
                        } else {
                            tee.kept.push(data);
                            this.next = tee.kept.len();
                        }
                    }
                }
                // Trailers in a request body: gRPC clients send none; not replayable.
                if frame.is_trailers() {
                    tee.committed = true;
                }
            }
            Poll::Ready(None) => tee.ended = true,
            Poll::Ready(Some(Err(_))) => tee.committed = true,
            Poll::Pending => {}
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        let tee = lock(&self.tee);
        tee.current == self.attempt && tee.ended && self.next >= tee.kept.len()
    }
}

/// What the call does now.
enum Step {
    /// An attempt, and the outlier record of its server.
    Attempt(RemoteFuture, Option<Arc<Outlier>>),
    Backoff(spindle::time::Sleep),
}

/// A call under a retry policy, or only transparent retries (module docs).
pub(crate) struct RetryCall {
    balanced: Arc<dyn Attempts>,
    config: Option<Arc<ServiceConfig>>,
    policy: Option<RetryPolicy>,
    parts: http::request::Parts,
    tee: Arc<Mutex<Tee>>,
    deadline: Option<Instant>,
    /// Attempts counted against the policy (the first included).
    attempts: u32,
    transparent: u32,
    step: Step,
}

/// The response future of a [`BalancedChannel`](crate::BalancedChannel) call.
#[must_use = "futures do nothing unless polled"]
pub struct BalancedFuture(Box<RetryCall>);

impl std::fmt::Debug for BalancedFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::BalancedFuture")
    }
}

impl RetryCall {
    /// Starts the call: its first attempt goes through `first` (the server `poll_ready`
    /// reserved, or a pick), the next ones to servers picked anew.
    pub(crate) fn start(
        balanced: Arc<dyn Attempts>,
        config: Option<Arc<ServiceConfig>>,
        buffer: usize,
        request: http::Request<Body>,
        first: impl FnOnce(http::Request<Body>) -> (RemoteFuture, Option<Arc<Outlier>>),
    ) -> BalancedFuture {
        let (parts, body) = request.into_parts();
        let policy = config.as_ref().and_then(|c| c.policy_for(parts.uri.path()).cloned());
        let deadline = parse_timeout_header(&parts.headers).map(spindle::time::deadline_after);
        let tee = Arc::new(Mutex::new(Tee {
            original: body,
            kept: Vec::new(),
            kept_bytes: 0,
            limit: buffer,
            committed: false,
            ended: false,
            current: 0,
        }));
        let (first, outlier) = first(Self::attempt_request(&parts, &tee, None));
        BalancedFuture(Box::new(RetryCall {
            balanced,
            config,
            policy,
            parts,
            tee,
            deadline,
            attempts: 1,
            transparent: 0,
            step: Step::Attempt(first, outlier),
        }))
    }

    /// Starts an attempt on a server picked now.
    fn attempt(
        balanced: &dyn Attempts,
        parts: &http::request::Parts,
        tee: &Arc<Mutex<Tee>>,
        time_left: Option<Duration>,
    ) -> Step {
        let (future, outlier) = balanced.attempt(Self::attempt_request(parts, tee, time_left));
        Step::Attempt(future, outlier)
    }

    /// An attempt's request, its body replaying the kept messages.
    fn attempt_request(
        parts: &http::request::Parts,
        tee: &Arc<Mutex<Tee>>,
        time_left: Option<Duration>,
    ) -> http::Request<Body> {
        let attempt = {
            let mut tee = lock(tee);
            tee.current += 1;
            tee.current
        };
        let mut request = http::Request::new(Body::new(Replay { tee: tee.clone(), attempt, next: 0 }));
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = parts.uri.clone();
        *request.version_mut() = parts.version;
        *request.headers_mut() = parts.headers.clone();
        if let Some(left) = time_left {
            request.headers_mut().insert(GRPC_TIMEOUT.clone(), encode_timeout(left));
        }
        request
    }

    fn poll_call(&mut self, cx: &mut Context<'_>) -> Poll<http::Response<RemoteBody>> {
        loop {
            let (response, code) = match &mut self.step {
                Step::Backoff(sleep) => {
                    if Pin::new(sleep).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    match self.time_left() {
                        Err(status) => return Poll::Ready(self.settled(status.into_http())),
                        Ok(left) => {
                            self.step = Self::attempt(&*self.balanced, &self.parts, &self.tee, left);
                            continue;
                        }
                    }
                }
                Step::Attempt(future, outlier) => match Pin::new(future).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(response)) => {
                        let code = trailers_only_code(&response);
                        if let Some(outlier) = outlier {
                            outlier.record(code, Instant::now());
                        }
                        (response, code)
                    }
                    Poll::Ready(Err(never)) => match never {},
                },
            };
            let replayable = !lock(&self.tee).committed;
            let Some(code) = code else {
                // The server answered with headers: committed (module docs).
                self.throttle_success();
                return Poll::Ready(self.settled(response));
            };
            if code == Code::Ok || !replayable {
                self.throttle_success();
                return Poll::Ready(self.settled(response));
            }
            if response.extensions().get::<NotProcessed>().is_some() && self.transparent < TRANSPARENT_RETRIES
            {
                self.transparent += 1;
                match self.time_left() {
                    Err(_) => return Poll::Ready(self.settled(response)),
                    Ok(left) => {
                        self.step = Self::attempt(&*self.balanced, &self.parts, &self.tee, left);
                        continue;
                    }
                }
            }
            let Some(policy) = self.policy.as_ref().filter(|p| p.retries(code)) else {
                self.throttle_success();
                return Poll::Ready(self.settled(response));
            };
            let throttled =
                self.config.as_ref().and_then(|c| c.throttle.as_ref()).is_some_and(|t| !t.failed());
            if throttled || self.attempts >= policy.max_attempts() {
                return Poll::Ready(self.settled(response));
            }
            // The server's pushback: a wait it asks for, or no retry at all.
            let wait = match response.headers().get("grpc-retry-pushback-ms") {
                None => policy.backoff(self.attempts),
                Some(ms) => match ms.to_str().ok().and_then(|ms| ms.parse::<u64>().ok()) {
                    Some(ms) => Duration::from_millis(ms),
                    None => return Poll::Ready(self.settled(response)),
                },
            };
            if self.deadline.is_some_and(|d| spindle::time::deadline_after(wait) >= d) {
                return Poll::Ready(self.settled(response));
            }
            self.attempts += 1;
            self.step = Step::Backoff(spindle::time::sleep_future(wait));
        }
    }

    /// The call has its answer and no further attempt: the kept messages are freed and no
    /// more are kept (the running attempt goes on reading the caller's body).
    fn settled(&self, response: http::Response<RemoteBody>) -> http::Response<RemoteBody> {
        let mut tee = lock(&self.tee);
        tee.committed = true;
        tee.kept = Vec::new();
        response
    }

    /// The time left before the call's deadline (`Ok(None)`: no deadline), or the status
    /// that ends a call past it.
    fn time_left(&self) -> Result<Option<Duration>, Status> {
        match self.deadline {
            None => Ok(None),
            Some(deadline) => {
                let left = deadline.saturating_duration_since(spindle::time::deadline_after(Duration::ZERO));
                if left.is_zero() {
                    Err(deadline_exceeded())
                } else {
                    Ok(Some(left))
                }
            }
        }
    }

    fn throttle_success(&self) {
        if let Some(throttle) = self.config.as_ref().and_then(|c| c.throttle.as_ref()) {
            throttle.succeeded();
        }
    }
}

/// The code of a response that is the whole answer (a `grpc-status` in its headers).
fn trailers_only_code(response: &http::Response<RemoteBody>) -> Option<Code> {
    let status = response.headers().get(&GRPC_STATUS)?;
    let code: i32 = status.to_str().ok()?.parse().ok()?;
    Some(Code::from_i32(code))
}

impl Future for BalancedFuture {
    type Output = Result<http::Response<RemoteBody>, std::convert::Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.poll_call(cx).map(Ok)
    }
}
