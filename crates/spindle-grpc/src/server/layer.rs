//! Server-wide tower layers ([`Server::layer`](crate::Server::layer), as tonic's
//! `Server::builder().layer()`): the channel seen as one tower service ([`Routes`]), wrapped
//! by the layers in turn.
//!
//! A layer sees each call's request after the server has admitted it as gRPC (module `admit`)
//! and before the channel routes it to a service; what it returns is sent as the response. Its
//! errors become a gRPC status (`Status::from_error`), as tonic does. The channel's own rules
//! (deadlines, message size limits, a handler's panic as `INTERNAL`) still apply inside.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::Status;
use tower::util::BoxCloneSyncService;
use tower::ServiceExt;

use crate::channel::Channel;

/// The services of a server as one tower service: what a layer given to
/// [`Server::layer`](crate::Server::layer) wraps (tonic's `Routes` plays this part).
pub type Routes = BoxCloneSyncService<http::Request<Body>, http::Response<Body>, Infallible>;

/// `inner` (the channel's routes, or the layers given before) wrapped in `layer`, its body made
/// a tonic body and its errors statuses ([`Normalize`]).
pub(super) fn layered<L, B>(layer: L, inner: Routes) -> Routes
where
    L: tower_layer::Layer<Routes>,
    L::Service: tower_service::Service<http::Request<Body>, Response = http::Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as tower_service::Service<http::Request<Body>>>::Future: Send + 'static,
    <L::Service as tower_service::Service<http::Request<Body>>>::Error:
        Into<tonic::codegen::StdError> + Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError>,
{
    BoxCloneSyncService::new(Normalize { service: layer.layer(inner), not_ready: None })
}

/// A layered service as [`Routes`]: its body made a tonic body, its error a status (a
/// readiness error too: it fails the next call rather than the connection).
#[derive(Clone)]
struct Normalize<S> {
    service: S,
    not_ready: Option<Status>,
}

impl<S, B> tower_service::Service<http::Request<Body>> for Normalize<S>
where
    S: tower_service::Service<http::Request<Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
    S::Error: Into<tonic::codegen::StdError> + Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        match self.service.poll_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Ready(Err(e)) => {
                self.not_ready = Some(Status::from_error(e.into()));
                Poll::Ready(Ok(()))
            }
        }
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if let Some(status) = self.not_ready.take() {
            return Box::pin(std::future::ready(Ok(status.into_http())));
        }
        let future = self.service.call(request);
        Box::pin(async move {
            match future.await {
                Ok(response) => Ok(response.map(Body::new)),
                Err(e) => Ok(Status::from_error(e.into()).into_http()),
            }
        })
    }
}

/// The channel as [`Routes`].
pub(super) fn channel_routes(channel: Channel) -> Routes {
    BoxCloneSyncService::new(channel.map_response(|response| response.map(Body::new)))
}
