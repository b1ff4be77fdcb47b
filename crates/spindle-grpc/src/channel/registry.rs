//! The services registered on a [`Channel`](crate::Channel): each one's encoded entry (its
//! tower service, type-erased: [`ErasedService`]), its typed entry if it has one (module
//! `typed`), and its method table, found by name at each call ([`Services`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::Status;

use super::direct::HandlerFuture;
use crate::typed::entry::{Entry, Kind, Method};

/// A registered service, type-erased.
pub(super) trait ErasedService: Send + Sync {
    fn call(&self, request: http::Request<Body>) -> HandlerFuture;
}

/// A tower service registered on a channel, as an [`ErasedService`].
pub(super) struct Registered<S>(pub(super) S);

impl<S, B> ErasedService for Registered<S>
where
    S: tower_service::Service<http::Request<Body>, Response = http::Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Error: Into<tonic::codegen::StdError> + Send + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError>,
{
    fn call(&self, request: http::Request<Body>) -> HandlerFuture {
        let mut service = self.0.clone();
        // tonic's generated servers are always ready: try once without a real waker, and on
        // success call at once (a service that is not ready waits below, with the real one).
        let mut cx = Context::from_waker(std::task::Waker::noop());
        if let Poll::Ready(Ok(())) = service.poll_ready(&mut cx) {
            return into_handler_future(service.call(request));
        }
        Box::pin(async move {
            match std::future::poll_fn(|cx| service.poll_ready(cx)).await {
                Ok(()) => into_handler_future(service.call(request)).await,
                Err(e) => Ok(Status::from_error(e.into()).into_http()),
            }
        })
    }
}

/// A service's future as a [`HandlerFuture`]. tonic's generated servers return exactly that
/// type (`Pin<Box<dyn Future + Send>>` of `http::Response<Body>`): it is taken as it is,
/// saving an allocation per call. Other services (interceptors, tower layers) are boxed, with
/// their body made a `tonic::body::Body` and their error a status.
fn into_handler_future<F, B, E>(future: F) -> HandlerFuture
where
    F: Future<Output = Result<http::Response<B>, E>> + Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError>,
    E: Into<tonic::codegen::StdError> + 'static,
{
    let mut slot = Some(future);
    if let Some(boxed) = <dyn std::any::Any>::downcast_mut::<Option<HandlerFuture>>(&mut slot) {
        if let Some(boxed) = boxed.take() {
            return boxed;
        }
    }
    let future = slot.expect("the future is still in its slot");
    Box::pin(async move {
        match future.await {
            Ok(response) => Ok(response.map(Body::new)),
            Err(e) => Ok(Status::from_error(e.into()).into_http()),
        }
    })
}

/// Registered services by name. A linear scan while there are few (comparing short strings is
/// cheaper than hashing the name with SipHash on every call), a hash map beyond that.
#[derive(Clone, Default)]
pub(super) struct Services {
    list: Vec<(&'static str, Registration)>,
    index: Option<HashMap<&'static str, usize>>,
}

/// A registered service: its encoded entry (tonic's server as a tower service) and, if it was
/// registered with [`Channel::add_typed_service`](crate::Channel::add_typed_service), its typed entry.
#[derive(Clone)]
pub(super) struct Registration {
    pub(super) encoded: Arc<dyn ErasedService>,
    pub(super) typed: Option<Entry>,
    /// The service's methods, when known (its typed entry's, or those given to
    /// [`Channel::add_service_with_methods`](crate::Channel::add_service_with_methods); none
    /// otherwise): the request cardinality of each.
    pub(super) methods: &'static [Method],
}

impl Registration {
    /// Whether `method` takes exactly one request message (unary and server-streaming
    /// methods), as far as the registration knows.
    pub(super) fn single_request(&self, method: &str) -> bool {
        self.methods.iter().any(|m| m.name == method && matches!(m.kind, Kind::Unary | Kind::ServerStreaming))
    }
}

impl Services {
    const SCAN_UP_TO: usize = 16;

    pub(super) fn get(&self, name: &str) -> Option<&Registration> {
        let i = match &self.index {
            Some(index) => *index.get(name)?,
            None => self.list.iter().position(|(n, _)| *n == name)?,
        };
        Some(&self.list[i].1)
    }

    pub(super) fn insert(&mut self, name: &'static str, service: Registration) {
        match self.list.iter().position(|(n, _)| *n == name) {
            Some(i) => self.list[i].1 = service,
            None => self.list.push((name, service)),
        }
        if self.list.len() > Self::SCAN_UP_TO {
            self.index = Some(self.list.iter().enumerate().map(|(i, (n, _))| (*n, i)).collect());
        }
    }

    pub(super) fn names(&self) -> Vec<&'static str> {
        self.list.iter().map(|(n, _)| *n).collect()
    }
}
