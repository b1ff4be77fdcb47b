//! The server's side of a typed call: [`Call`], what the generated dispatch receives, and the
//! adapters that turn a service's trait method into a [`Handler`].
//!
//! The generated code is one `match` per service: method index to adapter, the adapter given
//! a closure that calls the trait method (`|request| async move { T::unary_call(&inner,
//! request).await }`). The adapter moves the request out of the call's slot into a
//! `tonic::Request<M>` (checking its size first, as tonic's decoder would), calls the closure
//! and boxes the future together with what comes after it (the response stream), in one
//! allocation.
//!
//! # Invariants
//!
//! - **The request is taken once.** An adapter takes the message out of its slot; a wrapper
//!   ([`crate::typed::Intercepted`]) sees only the metadata and extensions.
//! - **Checked before the handler exists.** A single request message above a limit ends the
//!   call with `RESOURCE_EXHAUSTED` before the trait method is called, as tonic's server
//!   refuses it before calling the handler; a streamed request is checked message by message
//!   as the handler reads it (module `upload`).
//! - **A handler is polled to its head, then (streams) for messages**; after an error or the
//!   end of its stream it is `Done` and answers nothing more.

use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use prost::Message;
use tonic::codegen::tokio_stream::Stream;
use tonic::metadata::MetadataMap;
use tonic::service::Interceptor;
use tonic::{Extensions, Request, Response, Status};

use super::handler::{mismatch, put, BoxHandler, Handler, Head};
use super::upload::{self, RequestStream};
use crate::channel::call_state::CallState;
use crate::limit::TypedLimits;

/// A typed call as the server's side sees it before its handler exists: the request's
/// metadata and extensions (which wrappers may read and change) and, in a slot, its message.
/// The generated dispatch hands it to the adapter of the method's kind.
pub struct Call<'a> {
    metadata: MetadataMap,
    extensions: Extensions,
    /// `&mut Option<M>`, or `&mut Option<RequestStream<M>>` for a streamed request.
    message: &'a mut dyn Any,
    limits: TypedLimits,
    /// The call's shared state, for a streamed request (cancellation, failure).
    upload: Option<Arc<CallState>>,
}

impl std::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call").field("metadata", &self.metadata).finish_non_exhaustive()
    }
}

impl<'a> Call<'a> {
    pub(crate) fn new(
        metadata: MetadataMap,
        extensions: Extensions,
        message: &'a mut dyn Any,
        limits: TypedLimits,
        upload: Option<Arc<CallState>>,
    ) -> Call<'a> {
        Call { metadata, extensions, message, limits, upload }
    }

    /// The request's metadata.
    pub fn metadata(&self) -> &MetadataMap {
        &self.metadata
    }

    /// The request's metadata, to change.
    pub fn metadata_mut(&mut self) -> &mut MetadataMap {
        &mut self.metadata
    }

    /// The request's extensions.
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// The request's extensions, to change.
    pub fn extensions_mut(&mut self) -> &mut Extensions {
        &mut self.extensions
    }

    /// Runs a tonic interceptor on the request's metadata and extensions, as tonic's
    /// `InterceptedService` does on the encoded path: its `Err` ends the call.
    pub fn intercept(&mut self, interceptor: &mut impl Interceptor) -> Result<(), Status> {
        let request =
            Request::from_parts(std::mem::take(&mut self.metadata), std::mem::take(&mut self.extensions), ());
        let (metadata, extensions, ()) = interceptor.call(request)?.into_parts();
        self.metadata = metadata;
        self.extensions = extensions;
        Ok(())
    }

    /// The request of a single message, checked against the limits.
    fn into_single<M: Message + 'static>(self) -> Result<Request<M>, Status> {
        let Call { metadata, extensions, message, limits, .. } = self;
        let message: M = take(message)?;
        limits.request(message.encoded_len())?;
        Ok(Request::from_parts(metadata, extensions, message))
    }

    /// The request of a streamed method: the client's messages as tonic's `Streaming<M>`.
    fn into_streamed<M: Message + 'static>(self) -> Result<Request<tonic::Streaming<M>>, Status> {
        let Call { metadata, extensions, message, limits, upload } = self;
        let stream: RequestStream<M> = take(message)?;
        let state = upload.ok_or_else(mismatch)?;
        Ok(Request::from_parts(metadata, extensions, upload::streaming(stream, state, limits)))
    }

    /// Starts a unary method: `handler` calls the service's trait method.
    pub fn unary<M, R, F, Fut>(self, handler: F) -> Result<BoxHandler, Status>
    where
        M: Message + 'static,
        R: Send + 'static,
        F: FnOnce(Request<M>) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>> + Send + 'static,
    {
        let request = self.into_single()?;
        Ok(Box::pin(UnaryHandler { future: handler(request), _response: PhantomData }))
    }

    /// Starts a server-streaming method.
    pub fn server_streaming<M, R, S, F, Fut>(self, handler: F) -> Result<BoxHandler, Status>
    where
        M: Message + 'static,
        R: Send + 'static,
        S: Stream<Item = Result<R, Status>> + Send + 'static,
        F: FnOnce(Request<M>) -> Fut,
        Fut: Future<Output = Result<Response<S>, Status>> + Send + 'static,
    {
        let request = self.into_single()?;
        Ok(Box::pin(StreamHandler::new(handler(request))))
    }

    /// Starts a client-streaming method: the handler reads the client's messages through
    /// tonic's `Streaming<M>`.
    pub fn client_streaming<M, R, F, Fut>(self, handler: F) -> Result<BoxHandler, Status>
    where
        M: Message + 'static,
        R: Send + 'static,
        F: FnOnce(Request<tonic::Streaming<M>>) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>> + Send + 'static,
    {
        let request = self.into_streamed()?;
        Ok(Box::pin(UnaryHandler { future: handler(request), _response: PhantomData }))
    }

    /// Starts a bidirectional streaming method.
    pub fn streaming<M, R, S, F, Fut>(self, handler: F) -> Result<BoxHandler, Status>
    where
        M: Message + 'static,
        R: Send + 'static,
        S: Stream<Item = Result<R, Status>> + Send + 'static,
        F: FnOnce(Request<tonic::Streaming<M>>) -> Fut,
        Fut: Future<Output = Result<Response<S>, Status>> + Send + 'static,
    {
        let request = self.into_streamed()?;
        Ok(Box::pin(StreamHandler::new(handler(request))))
    }

    /// A method the service does not have (the route lets no such call through; tonic's
    /// server answers the same).
    pub fn unimplemented(self) -> Result<BoxHandler, Status> {
        Err(Status::unimplemented(""))
    }
}

/// Takes the message out of its slot, an `&mut Option<T>`.
fn take<T: 'static>(slot: &mut dyn Any) -> Result<T, Status> {
    slot.downcast_mut::<Option<T>>().and_then(Option::take).ok_or_else(mismatch)
}

pin_project! {
    /// A unary response: the service's future.
    struct UnaryHandler<F, R> {
        #[pin]
        future: F,
        _response: PhantomData<fn() -> R>,
    }
}

impl<F, R> Handler for UnaryHandler<F, R>
where
    F: Future<Output = Result<Response<R>, Status>> + Send,
    R: Send + 'static,
{
    fn poll_head(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        message: &mut dyn Any,
    ) -> Poll<Result<Head, Status>> {
        let response = ready!(self.project().future.poll(cx))?;
        let (metadata, response, extensions) = response.into_parts();
        put(message, response)?;
        Poll::Ready(Ok(Head { metadata, extensions }))
    }
}

pin_project! {
    #[project = StageProj]
    enum Stage<F, S> {
        Head { #[pin] future: F },
        Body { #[pin] stream: S },
        Done,
    }
}

pin_project! {
    /// A streaming response: the service's future, then the stream it answered, in place.
    struct StreamHandler<F, S, R> {
        #[pin]
        stage: Stage<F, S>,
        _response: PhantomData<fn() -> R>,
    }
}

impl<F, S, R> StreamHandler<F, S, R> {
    fn new(future: F) -> Self {
        StreamHandler { stage: Stage::Head { future }, _response: PhantomData }
    }
}

impl<F, S, R> Handler for StreamHandler<F, S, R>
where
    F: Future<Output = Result<Response<S>, Status>> + Send,
    S: Stream<Item = Result<R, Status>> + Send,
    R: Send + 'static,
{
    fn poll_head(self: Pin<&mut Self>, cx: &mut Context<'_>, _: &mut dyn Any) -> Poll<Result<Head, Status>> {
        let mut this = self.project();
        let StageProj::Head { future } = this.stage.as_mut().project() else {
            return Poll::Ready(Err(Status::internal("spindle-grpc: typed handler polled after its head")));
        };
        match ready!(future.poll(cx)) {
            Ok(response) => {
                let (metadata, stream, extensions) = response.into_parts();
                this.stage.set(Stage::Body { stream });
                Poll::Ready(Ok(Head { metadata, extensions }))
            }
            Err(status) => {
                this.stage.set(Stage::Done);
                Poll::Ready(Err(status))
            }
        }
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        message: &mut dyn Any,
    ) -> Poll<Option<Result<(), Status>>> {
        let mut this = self.project();
        let StageProj::Body { stream } = this.stage.as_mut().project() else { return Poll::Ready(None) };
        let item = match ready!(stream.poll_next(cx)) {
            Some(Ok(response)) => put(message, response),
            Some(Err(status)) => Err(status),
            None => {
                this.stage.set(Stage::Done);
                return Poll::Ready(None);
            }
        };
        if item.is_err() {
            this.stage.set(Stage::Done);
        }
        Poll::Ready(Some(item))
    }
}
