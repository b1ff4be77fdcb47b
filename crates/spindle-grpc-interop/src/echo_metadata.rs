//! A server middleware in the manner of the interop suite's custom_metadata case: it echoes the
//! request header [`ECHO_INITIAL`] as a response header and the request header
//! [`ECHO_TRAILING`] as a trailer (tonic has no API for custom trailers on a successful unary
//! response, so the interop servers do this below the generated code).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use http_body::{Body, Frame};
use tonic::server::NamedService;

pub const ECHO_INITIAL: &str = "x-grpc-test-echo-initial";
pub const ECHO_TRAILING: &str = "x-grpc-test-echo-trailing-bin";

/// Wraps a generated server: see the module doc.
#[derive(Debug, Clone)]
pub struct EchoMetadata<S>(pub S);

impl<S: NamedService> NamedService for EchoMetadata<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> tower_service::Service<http::Request<tonic::body::Body>> for EchoMetadata<S>
where
    S: tower_service::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Send,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let initial = request.headers().get(ECHO_INITIAL).cloned();
        let trailing = request.headers().get(ECHO_TRAILING).cloned();
        let future = self.0.call(request);
        Box::pin(async move {
            let response = future.await?;
            let (mut parts, body) = response.into_parts();
            if let Some(v) = initial {
                parts.headers.insert(HeaderName::from_static(ECHO_INITIAL), v);
            }
            let body = match trailing {
                Some(v) => tonic::body::Body::new(AddTrailer { inner: body, trailer: Some(v) }),
                None => body,
            };
            Ok(http::Response::from_parts(parts, body))
        })
    }
}

/// Adds a trailer to the trailers frame (or sends one at the end if the body has none).
struct AddTrailer {
    inner: tonic::body::Body,
    trailer: Option<HeaderValue>,
}

impl Body for AddTrailer {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_trailers() {
                Ok(mut trailers) => {
                    if let Some(v) = this.trailer.take() {
                        trailers.insert(HeaderName::from_static(ECHO_TRAILING), v);
                    }
                    Poll::Ready(Some(Ok(Frame::trailers(trailers))))
                }
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            Poll::Ready(None) => match this.trailer.take() {
                Some(v) => {
                    let mut trailers = http::HeaderMap::new();
                    trailers.insert(HeaderName::from_static(ECHO_TRAILING), v);
                    Poll::Ready(Some(Ok(Frame::trailers(trailers))))
                }
                None => Poll::Ready(None),
            },
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.trailer.is_none() && self.inner.is_end_stream()
    }
}
