//! tonic interceptors on the typed path: [`Intercepted`] wraps a typed server with a tonic
//! [`Interceptor`], which runs on every call's metadata and extensions on both paths: through
//! tonic's own `InterceptedService` on the encoded path, on the typed [`Call`] on the typed
//! path, before the request is checked or the handler exists (as tonic's `InterceptedService`
//! runs it before the server decodes anything).
//!
//! tonic's `InterceptedService` keeps its interceptor private, so a server wrapped in it
//! (`FooServer::with_interceptor`) has no typed entry: register `Intercepted::new(FooServer::new(x),
//! interceptor)` instead to keep the typed path.

use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::server::NamedService;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::Status;

use super::dispatch::Call;
use super::entry::{Dispatch, Entry, Method, TypedService};
use super::handler::BoxHandler;

/// A typed server behind a tonic interceptor (module doc). A tower service (tonic's
/// `InterceptedService` around the server) and a [`TypedService`].
#[derive(Clone)]
pub struct Intercepted<S, F> {
    encoded: InterceptedService<S, F>,
    entry: Entry,
}

impl<S, F> Intercepted<S, F>
where
    S: TypedService,
    F: Interceptor + Clone + Send + Sync + 'static,
{
    /// `service` behind `interceptor`.
    pub fn new(service: S, interceptor: F) -> Intercepted<S, F> {
        let typed = interceptor.clone();
        let entry = service.typed_entry().map(move |inner| InterceptDispatch { inner, interceptor: typed });
        Intercepted { encoded: InterceptedService::new(service, interceptor), entry }
    }
}

impl<S, F> std::fmt::Debug for Intercepted<S, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intercepted").field("entry", &self.entry).finish_non_exhaustive()
    }
}

impl<S: NamedService, F> NamedService for Intercepted<S, F> {
    const NAME: &'static str = S::NAME;
}

impl<S, F> TypedService for Intercepted<S, F> {
    fn typed_entry(&self) -> Entry {
        self.entry.clone()
    }
}

impl<S, F, Req> tower_service::Service<Req> for Intercepted<S, F>
where
    InterceptedService<S, F>: tower_service::Service<Req>,
{
    type Response = <InterceptedService<S, F> as tower_service::Service<Req>>::Response;
    type Error = <InterceptedService<S, F> as tower_service::Service<Req>>::Error;
    type Future = <InterceptedService<S, F> as tower_service::Service<Req>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.encoded.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        self.encoded.call(request)
    }
}

/// The typed entry behind an interceptor.
struct InterceptDispatch<F> {
    inner: Arc<dyn Dispatch>,
    interceptor: F,
}

impl<F: Interceptor + Clone + Send + Sync + 'static> Dispatch for InterceptDispatch<F> {
    fn methods(&self) -> &'static [Method] {
        self.inner.methods()
    }

    fn call(&self, method: usize, mut call: Call<'_>) -> Result<BoxHandler, Status> {
        // A clone per call, as the encoded path clones the registered service per call.
        let mut interceptor = self.interceptor.clone();
        call.intercept(&mut interceptor)?;
        self.inner.call(method, call)
    }
}
