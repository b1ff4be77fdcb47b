//! What tonic's client sees of an in-process call: [`ResponseFuture`] and [`ResponseBody`],
//! each one of three kinds: decided without a handler (an unknown service, a request the
//! network server refused), driven right in the caller's call (module `direct`), or read from
//! a pump task's pipe (module `pipe`, for a caller outside any worker).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use tonic::Status;

use super::direct::{Direct, DirectBody};
use super::pipe;

/// The response future of a call on a [`Channel`](crate::Channel): see the crate docs.
#[must_use = "futures do nothing unless polled"]
pub struct ResponseFuture {
    pub(crate) kind: FutureKind,
}

pub(crate) enum FutureKind {
    /// Decided without a handler (unknown service, no runtime). Boxed: the common variants
    /// stay small, and futures are moved around by value.
    Ready(Option<Box<http::Response<ResponseBody>>>),
    /// The handler runs right here, on the caller's worker.
    Direct(Direct),
    /// The handler runs in a pump task on the channel's runtime (the caller is no worker).
    Remote(pipe::ClientFuture),
}

impl ResponseFuture {
    /// A call decided without a handler: `response` is ready at the first poll.
    pub(crate) fn ready(response: http::Response<ResponseBody>) -> ResponseFuture {
        ResponseFuture { kind: FutureKind::Ready(Some(Box::new(response))) }
    }
}

impl Future for ResponseFuture {
    type Output = Result<http::Response<ResponseBody>, std::convert::Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.kind {
            FutureKind::Ready(response) => Poll::Ready(Ok(*response
                .take()
                .expect("spindle-grpc ResponseFuture polled after completion"))),
            FutureKind::Direct(direct) => direct.poll_head(cx).map(|head| Ok(head.map(ResponseBody::direct))),
            FutureKind::Remote(remote) => {
                Pin::new(remote).poll(cx).map(|head| Ok(head.map(ResponseBody::pumped)))
            }
        }
    }
}

impl std::fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::ResponseFuture")
    }
}

/// The response body of a call on a [`crate::Channel`]: gRPC frames and then trailers, as
/// tonic's client expects them.
#[derive(Default)]
pub struct ResponseBody {
    kind: BodyKind,
}

#[derive(Default)]
enum BodyKind {
    /// Trailers-only response, or finished.
    #[default]
    Empty,
    Direct(DirectBody),
    Remote(pipe::ClientBody),
}

impl ResponseBody {
    fn direct(body: Option<DirectBody>) -> ResponseBody {
        ResponseBody { kind: body.map_or(BodyKind::Empty, BodyKind::Direct) }
    }

    fn pumped(body: Option<pipe::ClientBody>) -> ResponseBody {
        ResponseBody { kind: body.map_or(BodyKind::Empty, BodyKind::Remote) }
    }
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        match &mut self.kind {
            BodyKind::Empty => Poll::Ready(None),
            BodyKind::Direct(direct) => direct.poll_frame(cx),
            BodyKind::Remote(remote) => remote.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            BodyKind::Empty => true,
            BodyKind::Direct(direct) => direct.is_end_stream(),
            BodyKind::Remote(remote) => remote.is_end_stream(),
        }
    }
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::ResponseBody")
    }
}
