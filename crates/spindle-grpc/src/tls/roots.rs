//! The system's root certificates (feature `tls`): the authorities of
//! [`ClientTlsConfig::native_roots`](crate::ClientTlsConfig::native_roots), which an `https://`
//! endpoint given no `Endpoint::tls` uses too.
//!
//! # Invariants
//!
//! - **Once per process.** The roots are read by rustls-native-certs (`SSL_CERT_FILE` and
//!   `SSL_CERT_DIR` when either is set, else the distribution's bundle) at the first connection
//!   attempt that needs them, and the outcome, the roots or the reason there are none, is kept
//!   in [`ROOTS`] for every channel of the process. Each [`SystemRoots`] (one per
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

/// The process's outcome of loading the system's roots (module docs, "once per process").
static ROOTS: OnceLock<Result<Arc<rustls::RootCertStore>, String>> = OnceLock::new();

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

/// The system's roots, loaded on the blocking pool unless the process has them already.
fn roots(deadline: Instant) -> io::Result<Arc<rustls::RootCertStore>> {
    let outcome = match ROOTS.get() {
        Some(outcome) => outcome.clone(),
        None => match spindle::spawn_blocking(|| ROOTS.get_or_init(load).clone()).join_deadline(deadline) {
            Ok(Ok(outcome)) => outcome,
            // The runtime shut down before the job ran, or it panicked: not kept.
            Ok(Err(e)) => {
                return Err(io::Error::other(format!("loading the system's root certificates: {e}")))
            }
            // The job goes on and keeps its outcome for the next attempt.
            Err(_running) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the system's root certificates were not loaded within the connect timeout",
                ))
            }
        },
    };
    outcome.map_err(|why| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no trusted root certificate found on this system ({why}); set SSL_CERT_FILE to a PEM file \
                 of CA certificates (or SSL_CERT_DIR to a directory of them), or give the endpoint the \
                 authorities to trust: Endpoint::tls(ClientTlsConfig::from_ca_pem(..))"
            ),
        )
    })
}

/// Reads the system's roots (on a blocking-pool thread).
fn load() -> Result<Arc<rustls::RootCertStore>, String> {
    let found = rustls_native_certs::load_native_certs();
    let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
    let mut roots = rustls::RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(if errors.is_empty() {
            "no certificate in the store".to_owned()
        } else {
            errors.join("; ")
        });
    }
    if !errors.is_empty() {
        log::warn!(
            "spindle-grpc: loaded {added} system root certificate(s), but some of the store could not be read: {}",
            errors.join("; ")
        );
    }
    if ignored > 0 {
        log::debug!("spindle-grpc: {ignored} system root certificates were not usable by rustls");
    }
    Ok(Arc::new(roots))
}
