//! [`IoFuture`]: the boxed future that the asynchronous connects and lookups return.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The future of an asynchronous connect or lookup
/// ([`TcpStream::connect_async`](crate::net::TcpStream::connect_async),
/// [`lookup_host_async`](crate::net::lookup_host_async), …). It is boxed so that it is
/// `Send + 'static` whatever address type started it (a `&str` included): spawn it, or
/// bound it with [`time::timeout`](crate::time::timeout).
#[must_use = "futures do nothing unless polled"]
pub struct IoFuture<T> {
    inner: Pin<Box<dyn Future<Output = io::Result<T>> + Send>>,
}

impl<T> IoFuture<T> {
    pub(crate) fn new(future: impl Future<Output = io::Result<T>> + Send + 'static) -> IoFuture<T> {
        IoFuture { inner: Box::pin(future) }
    }
}

impl<T> Future for IoFuture<T> {
    type Output = io::Result<T>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T> fmt::Debug for IoFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoFuture").finish_non_exhaustive()
    }
}
