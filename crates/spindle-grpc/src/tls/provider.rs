//! The rustls crypto provider of every TLS configuration spindle-grpc builds (ring), server
//! and client, given or from the system's roots. A leaf: `config` and `roots` both build
//! with it.

use std::sync::Arc;

/// The crypto provider (ring) every configuration is built with.
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
