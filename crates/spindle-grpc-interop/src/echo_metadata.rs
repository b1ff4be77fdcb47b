//! A server middleware in the manner of the interop suite's custom_metadata case: it echoes the
//! request header [`ECHO_INITIAL`] as a response header and the request header
//! [`ECHO_TRAILING`] as a trailer (tonic has no API for custom trailers on a successful unary
//! response, so the interop servers do this below the generated code).

use std::any::Any;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use http_body::{Body, Frame};
use spindle_grpc::typed::{BoxHandler, Call, Dispatch, Entry, Handler, Head, Method, TypedService};
use tonic::metadata::{Ascii, Binary, MetadataMap, MetadataValue};
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

impl<S: TypedService> TypedService for EchoMetadata<S> {
    fn typed_entry(&self) -> Entry {
        self.0.typed_entry().map(|inner| EchoDispatch { inner })
    }
}

/// The echo on the typed path: reads the request's metadata, wraps the handler.
struct EchoDispatch {
    inner: Arc<dyn Dispatch>,
}

impl Dispatch for EchoDispatch {
    fn methods(&self) -> &'static [Method] {
        self.inner.methods()
    }

    fn call(&self, method: usize, call: Call<'_>) -> Result<BoxHandler, tonic::Status> {
        let initial = call.metadata().get(ECHO_INITIAL).cloned();
        let trailing = call.metadata().get_bin(ECHO_TRAILING).cloned();
        match self.inner.call(method, call) {
            Ok(inner) => Ok(Box::pin(EchoHandler { inner, initial, trailing })),
            Err(mut status) => {
                echo(status.metadata_mut(), initial, trailing);
                Err(status)
            }
        }
    }
}

fn echo(
    metadata: &mut MetadataMap,
    initial: Option<MetadataValue<Ascii>>,
    trailing: Option<MetadataValue<Binary>>,
) {
    if let Some(v) = initial {
        metadata.insert(ECHO_INITIAL, v);
    }
    if let Some(v) = trailing {
        metadata.insert_bin(ECHO_TRAILING, v);
    }
}

struct EchoHandler {
    inner: BoxHandler,
    initial: Option<MetadataValue<Ascii>>,
    trailing: Option<MetadataValue<Binary>>,
}

impl Handler for EchoHandler {
    fn poll_head(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        message: &mut dyn Any,
    ) -> Poll<Result<Head, tonic::Status>> {
        let this = self.get_mut();
        let head = ready!(this.inner.as_mut().poll_head(cx, message));
        Poll::Ready(match head {
            Ok(mut head) => {
                echo(&mut head.metadata, this.initial.take(), None);
                Ok(head)
            }
            Err(mut status) => {
                // An error before any message: its status carries the headers too.
                echo(status.metadata_mut(), this.initial.take(), None);
                Err(status)
            }
        })
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        message: &mut dyn Any,
    ) -> Poll<Option<Result<(), tonic::Status>>> {
        self.get_mut().inner.as_mut().poll_next(cx, message)
    }

    fn trailers(self: Pin<&mut Self>, trailers: &mut MetadataMap) {
        let this = self.get_mut();
        this.inner.as_mut().trailers(trailers);
        echo(trailers, None, this.trailing.take());
    }
}
