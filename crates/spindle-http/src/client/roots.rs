//! The TLS configuration of an `https://` connection whose client was given none
//! (`ClientBuilder::tls`, `root_certificates_pem`): the system's root certificates (feature
//! `tls`), in one rustls client configuration (ALPN `h2`, `http/1.1`) that every such client
//! of the process shares.
//!
//! Invariants:
//!
//! - **Loaded once, never on a worker.** The roots come from spindle's `native_roots`
//!   (`SSL_CERT_FILE` and `SSL_CERT_DIR` when either is set, else the distribution's bundle):
//!   read once per process, at the first connection that needs them, on spindle's blocking
//!   pool, the connection waiting for them as a future within its connect timeout (fibers and
//!   tasks alike). Its warnings (files that could not be read, beside certificates that could)
//!   are logged under this crate's target, once.
//! - **Built once.** The configuration is built from the roots once and kept in [`SYSTEM`]
//!   for every later connection, which reads it without a thread hop (and shares rustls's
//!   session cache). No root at all is an error that every such connection gets, naming the
//!   fixes.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use spindle::native_roots::RootsError;

use crate::client::error::{ClientError, ClientErrorKind};
use crate::client::key::Key;

/// The configuration trusting the system's roots, once built ("built once").
static SYSTEM: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();

/// The configuration trusting the system's roots (ALPN `h2`, `http/1.1`), their first load
/// waited for within `timeout`.
pub(crate) async fn system(key: &Key, timeout: Duration) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    if let Some(config) = SYSTEM.get() {
        return Ok(config.clone());
    }
    let roots = spindle::native_roots::load_async(timeout, "spindle_http")
        .await
        .map_err(|e| roots_error(key, timeout, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::new(ClientErrorKind::Tls, format!("{key}: TLS versions: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(SYSTEM.get_or_init(|| Arc::new(config)).clone())
}

/// The client's error for a load of the roots that gave none.
fn roots_error(key: &Key, timeout: Duration, e: RootsError) -> ClientError {
    match e {
        RootsError::NoRuntime => ClientError::new(
            ClientErrorKind::NoRuntime,
            format!("{key}: loading the system's root certificates needs a spindle runtime"),
        ),
        // The job goes on and keeps its outcome for the next connection.
        RootsError::TimedOut => ClientError::new(
            ClientErrorKind::ConnectTimeout,
            format!("{key}: the system's root certificates were not loaded within {timeout:?}"),
        ),
        RootsError::NotFound(why) => ClientError::new(
            ClientErrorKind::Tls,
            format!(
                "{key}: no trusted root certificate found on this system ({why}); set SSL_CERT_FILE to a PEM \
                 file of CA certificates (or SSL_CERT_DIR to a directory of them), or configure TLS with \
                 ClientBuilder::tls or ClientBuilder::root_certificates_pem"
            ),
        ),
        // The runtime shut down before the job ran, or it panicked: not kept.
        e => ClientError::new(ClientErrorKind::Tls, format!("{key}: {e}")),
    }
}
