//! Serving a [`tower_service::Service`]: an axum `Router`, or any tower stack, answers the
//! server's requests (`Builder::serve_service`).
//!
//! The service is an async handler like those of `Builder::serve_async` (module `handler`):
//! each request gets a clone of the service (tower's contract: `poll_ready` then `call` on the
//! same value), and the call's future is polled by the connection's task, which may move
//! between workers between polls: hence `Send` and, since every connection clones from the
//! server's one value, `Sync`. The server's refusals (body limits, `Host`, the shutdown) come
//! first, as for any handler; a panic answers `500` (the async handler's `CatchPanic`).
//!
//! A service's error (from `poll_ready` or from the call) has no HTTP form of its own: it
//! answers `500 Internal Server Error` and is logged (`log::error!`), as hyper-util's server
//! closes the connection on it; axum's `Router` never fails (`Error = Infallible`).
//!
//! The response body is any `http_body::Body` of `Bytes`; one that already is a
//! spindle-http [`Body`] is used as it is, any other is boxed once ([`Body::wrap`]).

use std::any::Any;
use std::future::poll_fn;

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use tower_service::Service;

use crate::transport::body::{Body, BoxError};

/// Serves one request with `service` (a clone of the server's: see the module doc).
pub(crate) async fn call<S, B>(mut service: S, req: Request<Body>) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    if let Err(e) = poll_fn(|cx| service.poll_ready(cx)).await {
        return failed("poll_ready", e.into());
    }
    match service.call(req).await {
        Ok(res) => res.map(into_body),
        Err(e) => failed("call", e.into()),
    }
}

/// `body` as a spindle-http [`Body`]: as it is when it is one, boxed otherwise.
fn into_body<B>(body: B) -> Body
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let mut slot = Some(body);
    match (&mut slot as &mut dyn Any).downcast_mut::<Option<Body>>() {
        Some(own) => own.take().expect("the body was just put there"),
        None => Body::wrap(slot.take().expect("the body was just put there")),
    }
}

/// The `500` answer to a service's error, which is logged.
fn failed(stage: &str, error: BoxError) -> Response<Body> {
    log::error!("spindle-http: the served tower service failed ({stage}): {error}");
    let mut res = Response::new(Body::from("Internal Server Error\n"));
    *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    res
}
