//! [`Config`]: a server's settings, which its [`Builder`](crate::Builder) sets and its tasks
//! read; [`Accept`]: how a server with several workers spreads its connections.

use std::time::Duration;

use crate::transport::limits::{BodyLimits, MinRate};

/// How a server with several workers accepts connections and spreads them over the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Accept {
    /// One spindle runtime with `workers` worker threads, one `SO_REUSEPORT` listener and
    /// accept task per worker (the kernel spreads connections over the listeners by a hash of
    /// their addresses); connections move between workers as with `RoundRobin`.
    ReusePort,
    /// One spindle runtime with `workers` worker threads and one listener, whose accept task
    /// spawns each connection as a `Send` task: whichever worker is free serves it, request
    /// by request (a connection is not tied to a worker between requests).
    RoundRobin,
    /// `workers` separate single-worker spindle runtimes, each with its own `SO_REUSEPORT`
    /// listener (the first design; nothing shared between workers, so nothing moves).
    Runtimes,
}

/// A server's settings, as [`Builder`](crate::Builder) sets them.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) workers: usize,
    pub(crate) accept: Accept,
    pub(crate) keep_alive: bool,
    pub(crate) http2: bool,
    pub(crate) http1_fast_path: bool,
    pub(crate) max_concurrent_streams: u32,
    pub(crate) http2_max_unsent: u64,
    pub(crate) http2_send_timeout: Option<Duration>,
    pub(crate) pipeline_flush: bool,
    pub(crate) max_buf_size: usize,
    pub(crate) max_header_size: usize,
    pub(crate) max_headers: usize,
    pub(crate) body_limits: BodyLimits,
    pub(crate) header_read_timeout: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) shutdown_timeout: Duration,
    pub(crate) nodelay: bool,
    pub(crate) stack_size: usize,
    pub(crate) shutdown_on: Option<spindle::shutdown::ShutdownToken>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<crate::server::tls::TlsConfig>,
}

impl Config {
    /// The largest request head hyper accepts (`431` beyond): the smaller of its buffer and
    /// header limits.
    pub(crate) fn head_limit(&self) -> usize {
        self.max_buf_size.min(self.max_header_size)
    }
}

impl Default for Config {
    /// The defaults of [`Builder`](crate::Builder).
    fn default() -> Config {
        Config {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            accept: Accept::RoundRobin,
            keep_alive: true,
            http2: true,
            http1_fast_path: true,
            max_concurrent_streams: 100,
            http2_max_unsent: 4 << 20,
            http2_send_timeout: Some(Duration::from_secs(10)),
            pipeline_flush: true,
            max_buf_size: 64 * 1024,
            max_header_size: 64 * 1024,
            max_headers: 100,
            body_limits: BodyLimits { max_size: Some(2 << 20), min_rate: Some(MinRate::default()) },
            header_read_timeout: Some(Duration::from_secs(30)),
            idle_timeout: Some(Duration::from_secs(60)),
            shutdown_timeout: Duration::from_secs(30),
            nodelay: true,
            stack_size: spindle::DEFAULT_STACK_SIZE,
            shutdown_on: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}
