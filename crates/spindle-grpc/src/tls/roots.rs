//! The system's root certificates (feature `tls`): the authorities of
//! [`ClientTlsConfig::native_roots`](crate::ClientTlsConfig::native_roots), which an `https://`
//! endpoint given no `Endpoint::tls` uses too.
//!
//! # Invariants
//!
//! - **Once per process.** The roots are read by rustls-native-certs (`SSL_CERT_FILE` and
//!   `SSL_CERT_DIR` when either is set, else the distribution's bundle) at the first connection
//!   attempt that needs them, and the outcome, the roots or the reason there are none, is kept
//!   by `spindle::native_roots` for every client of the process (spindle-http's too). Each [`SystemRoots`] (one per
//!   `native_roots` configuration, shared by its clones) then builds its rustls configuration
//!   once from them.
//! - **Never on a worker.** The load reads files: the manager fiber hands it to spindle's
//!   blocking pool and parks until it is done, within the attempt's connect deadline. The
//!   blocking job itself runs `OnceLock::get_or_init`, so the first attempts of several
//!   channels load once: the others' jobs wait on their pool threads for its outcome.
//! - **Partial loads go on.** Files that could not be read, beside certificates that could,
//!   are logged once (`warn`) by the load that is kept; no root at all fails every such
//!   attempt (the channel is `Down` with the error, which names the fixes, and retries after
//!   its backoff, finding the same outcome).

use std::fmt;
use std::io;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use super::provider::provider;

/// A client configuration trusting the system's roots, built at its first connection attempt.
pub(crate) struct SystemRoots {
    /// The client certificate for mutual TLS, if any.
    identity: Option<Arc<dyn rustls::client::ResolvesClientCert>>,
    config: OnceLock<Arc<rustls::ClientConfig>>,
}

impl SystemRoots {
    pub(crate) fn new(identity: Option<Arc<dyn rustls::client::ResolvesClientCert>>) -> SystemRoots {
        SystemRoots { identity, config: OnceLock::new() }
    }

    /// The rustls configuration (ALPN `h2`), loading the roots first if no attempt of the
    /// process has yet (module docs); run by the manager fiber, waiting until `deadline`.
    pub(crate) fn config(&self, deadline: Instant) -> io::Result<Arc<rustls::ClientConfig>> {
        if let Some(config) = self.config.get() {
            return Ok(config.clone());
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("TLS versions: {e}")))?
            .with_root_certificates(roots(deadline)?);
        let mut config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some(identity) => builder.with_client_cert_resolver(identity.clone()),
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(self.config.get_or_init(|| Arc::new(config)).clone())
    }
}

impl fmt::Debug for SystemRoots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemRoots")
            .field("identity", &self.identity.is_some())
            .field("loaded", &self.config.get().is_some())
            .finish()
    }
}

/// The system's roots, loaded once per process on the blocking pool
/// (`spindle::native_roots`), within `deadline`; the errors as an attempt reports them.
fn roots(deadline: Instant) -> io::Result<Arc<rustls::RootCertStore>> {
    use spindle::native_roots::RootsError;
    spindle::native_roots::load_until(deadline, "spindle_grpc").map_err(|e| match e {
        RootsError::TimedOut => io::Error::new(
            io::ErrorKind::TimedOut,
            "the system's root certificates were not loaded within the connect timeout",
        ),
        RootsError::NotFound(why) => io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no trusted root certificate found on this system ({why}); set SSL_CERT_FILE to a PEM file \
                 of CA certificates (or SSL_CERT_DIR to a directory of them), or give the endpoint the \
                 authorities to trust: Endpoint::tls(ClientTlsConfig::from_ca_pem(..))"
            ),
        ),
        other => io::Error::other(other.to_string()),
    })
}
