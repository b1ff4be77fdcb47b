//! Handlers: blocking functions called on the connection fiber, or async functions whose
//! futures the connection fiber polls. Both catch panics and answer 500.

use std::any::Any;
use std::cell::Cell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};

use crate::service::Origin;
use crate::Body;

/// Counts the handlers running on one connection (request received, response not yet
/// produced), for the idle timeout: a connection with a running handler is not idle.
pub(crate) struct Busy(Rc<Cell<u32>>);

impl Busy {
    pub(crate) fn enter(count: &Rc<Cell<u32>>) -> Busy {
        count.set(count.get() + 1);
        Busy(count.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// How the server turns a request into a response.
pub(crate) trait Respond: Send + Sync + 'static {
    type Future: Future<Output = Response<Body>>;
    fn respond(&self, req: Request<Body>, busy: Busy, origin: &Origin) -> Self::Future;
}

/// A blocking handler. A request without a body is answered inline, on the connection's
/// fiber: the handler may park it (channels, sleep, sockets) without blocking the worker.
/// A request with a body gets a fiber of its own for the handler: the connection fiber
/// must keep driving hyper's dispatcher meanwhile, since that is what reads the body the
/// handler is waiting for (an inline handler reading the body would wait for itself).
pub(crate) struct Blocking<F>(pub(crate) Arc<F>);

impl<F, B> Respond for Blocking<F>
where
    F: Fn(Request<Body>) -> Response<B> + Send + Sync + 'static,
    B: Into<Body>,
{
    type Future = BlockingResponse;

    fn respond(&self, req: Request<Body>, busy: Busy, origin: &Origin) -> Self::Future {
        if origin.inline && http_body::Body::is_end_stream(req.body()) {
            let result = catch_unwind(AssertUnwindSafe(|| (self.0)(req).map(Into::into)));
            drop(busy);
            return BlockingResponse::Ready(Some(result.unwrap_or_else(panicked)));
        }
        let slot = Arc::new(Mutex::new(Slot { response: None, waker: None }));
        let (handler, filled) = (self.0.clone(), slot.clone());
        let spawned = spindle::fiber::Builder::new()
            .name(origin.handler_name(&req))
            .stack_size(origin.stack_size)
            .spawn(move || {
                let result = catch_unwind(AssertUnwindSafe(|| handler(req).map(Into::into)));
                let response = result.unwrap_or_else(panicked);
                let waker = {
                    let mut slot = lock(&filled);
                    slot.response = Some(response);
                    slot.waker.take()
                };
                if let Some(waker) = waker {
                    waker.wake();
                }
            });
        match spawned {
            Ok(_) => BlockingResponse::Waiting { slot, _busy: busy },
            Err(e) => {
                log::warn!("spindle-http: could not spawn a handler fiber: {e}");
                BlockingResponse::Ready(Some(status(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Service Unavailable\n",
                )))
            }
        }
    }
}

pub(crate) struct Slot {
    response: Option<Response<Body>>,
    waker: Option<Waker>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The response future of a blocking handler.
pub(crate) enum BlockingResponse {
    Ready(Option<Response<Body>>),
    Waiting { slot: Arc<Mutex<Slot>>, _busy: Busy },
}

impl Future for BlockingResponse {
    type Output = Response<Body>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response<Body>> {
        match self.get_mut() {
            BlockingResponse::Ready(res) => Poll::Ready(res.take().expect("polled after completion")),
            BlockingResponse::Waiting { slot, .. } => {
                let mut slot = lock(slot);
                match slot.response.take() {
                    Some(res) => Poll::Ready(res),
                    None => {
                        slot.waker = Some(cx.waker().clone());
                        Poll::Pending
                    }
                }
            }
        }
    }
}

/// An async handler: its future is polled by the connection fiber (it need not be `Send`).
pub(crate) struct Async<F>(pub(crate) F);

impl<F, Fut, B> Respond for Async<F>
where
    F: Fn(Request<Body>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + 'static,
    B: Into<Body>,
{
    type Future = CatchPanic<Fut>;

    fn respond(&self, req: Request<Body>, busy: Busy, _origin: &Origin) -> Self::Future {
        match catch_unwind(AssertUnwindSafe(|| (self.0)(req))) {
            Ok(future) => CatchPanic { future: Some(future), early: None, _busy: Some(busy) },
            Err(payload) => CatchPanic { future: None, early: Some(panicked(payload)), _busy: None },
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of an async handler: a panic while polling becomes a 500.
    pub(crate) struct CatchPanic<Fut> {
        #[pin]
        future: Option<Fut>,
        early: Option<Response<Body>>,
        _busy: Option<Busy>,
    }
}

impl<Fut, B> Future for CatchPanic<Fut>
where
    Fut: Future<Output = Response<B>>,
    B: Into<Body>,
{
    type Output = Response<Body>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response<Body>> {
        let mut this = self.project();
        if let Some(res) = this.early.take() {
            return Poll::Ready(res);
        }
        let Some(future) = this.future.as_mut().as_pin_mut() else {
            panic!("spindle-http response future polled after completion");
        };
        let result = catch_unwind(AssertUnwindSafe(|| future.poll(cx)));
        let response = match result {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(res)) => res.map(Into::into),
            Err(payload) => panicked(payload),
        };
        this.future.set(None);
        this._busy.take();
        Poll::Ready(response)
    }
}

/// The 500 answer to a handler panic. A fiber being cancelled by its runtime's shutdown
/// unwinds with a `Cancelled` payload: that one keeps unwinding.
fn panicked(payload: Box<dyn Any + Send>) -> Response<Body> {
    if payload.is::<spindle::fiber::Cancelled>() {
        std::panic::resume_unwind(payload);
    }
    status(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error\n")
}

fn status(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut res = Response::new(Body::from(text));
    *res.status_mut() = code;
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    res
}
