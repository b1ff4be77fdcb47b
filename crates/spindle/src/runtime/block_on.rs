//! What [`Runtime::block_on`](crate::Runtime::block_on) runs: a closure or a future.
//!
//! One method for both, rather than a second `block_on_future`, so that every existing
//! `rt.block_on(|| ...)` caller compiles unchanged and async code writes
//! `rt.block_on(async { ... })` as with tokio. The `Marker` parameter keeps the two impls
//! apart (a type could in principle be both a closure and a future; the marker makes them
//! different traits, and inference picks the one whose bounds hold).

use std::future::Future;

/// A body for [`Runtime::block_on`](crate::Runtime::block_on): implemented for closures
/// (`FnOnce() -> T`, run as a fiber) and for futures (polled in a fiber until ready).
pub trait BlockOn<Marker>: Send + 'static {
    /// What the body returns.
    type Output: Send + 'static;

    /// Runs the body to completion; called in the `block_on` fiber.
    fn run(self) -> Self::Output;
}

/// Marks the closure impl of [`BlockOn`].
#[derive(Debug)]
pub enum Closure {}

/// Marks the future impl of [`BlockOn`].
#[derive(Debug)]
pub enum Async {}

impl<F, T> BlockOn<Closure> for F
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    type Output = T;

    fn run(self) -> T {
        self()
    }
}

impl<F> BlockOn<Async> for F
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = F::Output;

    fn run(self) -> F::Output {
        crate::task::block_on(self)
    }
}
