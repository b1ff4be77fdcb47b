//! The system's root certificates (feature `tls`): the TLS configuration of an `https://`
//! connection whose client was given none (`ClientBuilder::tls`, `root_certificates_pem`).
//!
//! # Invariants
//!
//! - **Once per process.** The roots are read by rustls-native-certs (`SSL_CERT_FILE` and
//!   `SSL_CERT_DIR` when either is set, else the distribution's bundle) at the first connection
//!   that needs them, and the outcome, a configuration or the reason there is none, is kept in
//!   [`SYSTEM`] for every client of the process. Later connections read it without a thread hop.
//! - **Never on a worker.** The load reads files: it runs on spindle's blocking pool, and the
//!   connection waits for it as a future (fibers and tasks alike). The blocking job itself runs
//!   `OnceLock::get_or_init`, so concurrent first connections load once: the others' jobs wait
//!   on their pool threads for the first one's outcome, never on a worker.
//! - **Partial loads go on.** Files that could not be read, beside certificates that could,
//!   are logged once (`warn`) by the load that is kept; no root at all is an error that every
//!   such connection gets, naming the fixes.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::client::{ClientError, ClientErrorKind, Key};

/// The process's outcome of loading the system's roots (module docs, "once per process").
static SYSTEM: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();

/// The configuration trusting the system's roots (ALPN `h2`, `http/1.1`), loaded at the first
/// call on spindle's blocking pool, waited for within `timeout`.
pub(crate) async fn system(key: &Key, timeout: Duration) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let outcome = match SYSTEM.get() {
        Some(outcome) => outcome.clone(),
        None => {
            if spindle::Handle::current().is_none() {
                return Err(ClientError::new(
                    ClientErrorKind::NoRuntime,
                    format!("{key}: loading the system's root certificates needs a spindle runtime"),
                ));
            }
            let job = spindle::spawn_blocking(|| SYSTEM.get_or_init(load).clone());
            match spindle::time::timeout(timeout, job).await {
                Ok(Ok(outcome)) => outcome,
                // The runtime shut down before the job ran, or it panicked: not kept.
                Ok(Err(e)) => {
                    return Err(ClientError::new(
                        ClientErrorKind::Tls,
                        format!("{key}: loading the system's root certificates: {e}"),
                    ))
                }
                // The job goes on and keeps its outcome for the next connection.
                Err(_) => {
                    return Err(ClientError::new(
                        ClientErrorKind::ConnectTimeout,
                        format!("{key}: the system's root certificates were not loaded within {timeout:?}"),
                    ))
                }
            }
        }
    };
    outcome.map_err(|why| {
        ClientError::new(
            ClientErrorKind::Tls,
            format!(
                "{key}: no trusted root certificate found on this system ({why}); set SSL_CERT_FILE to a PEM \
                 file of CA certificates (or SSL_CERT_DIR to a directory of them), or configure TLS with \
                 ClientBuilder::tls or ClientBuilder::root_certificates_pem"
            ),
        )
    })
}

/// Reads the system's roots (on a blocking-pool thread) into a client configuration.
fn load() -> Result<Arc<rustls::ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
    let mut roots = rustls::RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why =
            if errors.is_empty() { "no certificate in the store".to_owned() } else { errors.join("; ") };
        return Err(why);
    }
    if !errors.is_empty() {
        log::warn!(
            "spindle-http: loaded {added} system root certificate(s), but some of the store could not be read: {}",
            errors.join("; ")
        );
    }
    if ignored > 0 {
        log::debug!("spindle-http: {ignored} system root certificates were not usable by rustls");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
