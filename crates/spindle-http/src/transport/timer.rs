//! hyper's timer on spindle's timer wheel: the core's [`spindle::hyper_rt::Timer`], under the
//! names this crate has always exported.

/// Implements [`hyper::rt::Timer`] with spindle's timer futures (each worker's timer wheel);
/// the same type as [`spindle::hyper_rt::Timer`].
pub type SpindleTimer = spindle::hyper_rt::Timer;

/// A [`spindle::time::Sleep`] as a [`hyper::rt::Sleep`]; the same type as
/// [`spindle::hyper_rt::Sleep`].
pub type HyperSleep = spindle::hyper_rt::Sleep;
