//! [`ClientConfig`]: a client's settings, which its builder sets and its requests read.

#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::Duration;

use crate::client::redirect::Policy;

/// A client's settings, as [`ClientBuilder`](crate::ClientBuilder) sets them.
#[derive(Debug, Clone)]
pub(crate) struct ClientConfig {
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) read_timeout: Option<Duration>,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_idle_per_host: usize,
    pub(crate) max_connections_per_host: usize,
    pub(crate) http2_prior_knowledge: bool,
    pub(crate) max_buf_size: usize,
    pub(crate) redirect: Policy,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
}
