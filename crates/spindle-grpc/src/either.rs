//! One client either place: [`AnyChannel`] is the in-process [`Channel`] or a
//! [`RemoteChannel`], chosen by a URI, behind one tonic transport type, so that the same
//! client code (and the same client type) runs in process and across machines.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use tonic::body::Body;
use tonic::Status;

use crate::channel::{Channel, ResponseBody, ResponseFuture};
use crate::client::{Endpoint, RemoteBody, RemoteChannel, RemoteFuture};

/// The transport of tonic-generated clients, in process or remote:
///
/// ```
/// use spindle_grpc::{AnyChannel, Channel};
/// # let rt = spindle::Runtime::new().unwrap();
/// # rt.block_on(|| {
/// let local = Channel::new(); // with the process's services registered
/// let here = AnyChannel::from_uri("inproc:", &local).unwrap();
/// let there = AnyChannel::from_uri("http://127.0.0.1:50051", &local).unwrap(); // connects lazily
/// assert!(matches!(here, AnyChannel::Local(_)) && matches!(there, AnyChannel::Remote(_)));
/// # });
/// ```
#[derive(Clone, Debug)]
pub enum AnyChannel {
    /// Calls go to the services registered on this process's channel.
    Local(Channel),
    /// Calls go over HTTP/2 to a server.
    Remote(RemoteChannel),
}

impl AnyChannel {
    /// `inproc:` (or `inproc://` followed by anything) picks `local`; `http://host:port` and
    /// `unix:/path` a [`RemoteChannel`] that connects at its first call
    /// ([`Endpoint::connect_lazy`], with the endpoint's defaults), and so does
    /// `https://host:port` with the feature `tls`, trusting the system's root certificates
    /// (other TLS settings are not carried by a URI: build that one as
    /// `AnyChannel::Remote(Endpoint::new(uri)?.tls(config).connect_lazy()?)`). Anything else
    /// (`https://` without the feature included) is an `InvalidInput` error.
    pub fn from_uri(uri: &str, local: &Channel) -> io::Result<AnyChannel> {
        if uri.starts_with("inproc:") {
            return Ok(AnyChannel::Local(local.clone()));
        }
        Endpoint::new(uri)?.connect_lazy().map(AnyChannel::Remote)
    }
}

impl From<Channel> for AnyChannel {
    fn from(channel: Channel) -> AnyChannel {
        AnyChannel::Local(channel)
    }
}

impl From<RemoteChannel> for AnyChannel {
    fn from(channel: RemoteChannel) -> AnyChannel {
        AnyChannel::Remote(channel)
    }
}

impl tower_service::Service<http::Request<Body>> for AnyChannel {
    type Response = http::Response<AnyBody>;
    type Error = Infallible;
    type Future = AnyFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        match self {
            AnyChannel::Local(c) => c.poll_ready(cx),
            AnyChannel::Remote(c) => c.poll_ready(cx),
        }
    }

    fn call(&mut self, request: http::Request<Body>) -> AnyFuture {
        AnyFuture(match self {
            AnyChannel::Local(c) => Either::Local(c.call(request)),
            AnyChannel::Remote(c) => Either::Remote(c.call(request)),
        })
    }
}

enum Either<L, R> {
    Local(L),
    Remote(R),
}

/// The response future of an [`AnyChannel`] call.
#[must_use = "futures do nothing unless polled"]
pub struct AnyFuture(Either<ResponseFuture, RemoteFuture>);

impl Future for AnyFuture {
    type Output = Result<http::Response<AnyBody>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            Either::Local(f) => Pin::new(f).poll(cx).map_ok(|r| r.map(|b| AnyBody(Either::Local(b)))),
            Either::Remote(f) => Pin::new(f).poll(cx).map_ok(|r| r.map(|b| AnyBody(Either::Remote(b)))),
        }
    }
}

impl std::fmt::Debug for AnyFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::AnyFuture")
    }
}

/// The response body of an [`AnyChannel`] call.
pub struct AnyBody(Either<ResponseBody, RemoteBody>);

impl http_body::Body for AnyBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        match &mut self.0 {
            Either::Local(b) => Pin::new(b).poll_frame(cx),
            Either::Remote(b) => Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Either::Local(b) => b.is_end_stream(),
            Either::Remote(b) => b.is_end_stream(),
        }
    }
}

impl std::fmt::Debug for AnyBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::AnyBody")
    }
}
