//! The system's root certificates (feature `native-roots`), for the TLS clients built on
//! spindle: read by rustls-native-certs (`SSL_CERT_FILE` and `SSL_CERT_DIR` when either is
//! set, else the distribution's bundle) into a [`rustls::RootCertStore`].
//!
//! Invariants:
//!
//! - **Once per process.** The roots are read at the first call that needs them, and the
//!   outcome, the roots or the reason there are none, is kept for every later call of the
//!   process ([`loaded`]), whichever crate asks. A later call reads it without a thread hop.
//! - **Never on a worker.** The load reads files: it runs on spindle's blocking pool, and the
//!   caller waits for it as a future ([`load_async`]) or parks its fiber ([`load_until`]),
//!   within its own bound. The blocking job itself runs `OnceLock::get_or_init`, so concurrent
//!   first calls load once: the others' jobs wait on their pool threads for the first one's
//!   outcome, never on a worker. A caller whose bound passes leaves the job running: its
//!   outcome is kept for the next call.
//! - **Partial loads go on.** Files that could not be read, beside certificates that could,
//!   are logged once (`warn`, under the log target of the call whose job loads) by the load
//!   that is kept; no root at all is [`RootsError::NotFound`] for every such call.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The process's outcome of loading the system's roots ("once per process").
static ROOTS: OnceLock<Result<Arc<rustls::RootCertStore>, String>> = OnceLock::new();

/// Why there are no roots for this call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RootsError {
    /// Called outside a spindle runtime: the load runs on a runtime's blocking pool.
    NoRuntime,
    /// The load job did not complete (the runtime shut down before it ran, or it panicked):
    /// the join error's text. Not kept: a later call tries again.
    Failed(String),
    /// Not loaded within the caller's bound; the load goes on and keeps its outcome.
    TimedOut,
    /// The store holds no certificate rustls can use: the errors met reading it, or "no
    /// certificate in the store".
    NotFound(String),
}

impl fmt::Display for RootsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootsError::NoRuntime => {
                f.write_str("loading the system's root certificates needs a spindle runtime")
            }
            RootsError::Failed(e) => write!(f, "loading the system's root certificates: {e}"),
            RootsError::TimedOut => f.write_str("the system's root certificates were not loaded in time"),
            RootsError::NotFound(why) => {
                write!(f, "no trusted root certificate found on this system ({why})")
            }
        }
    }
}

impl std::error::Error for RootsError {}

/// The process's outcome, if a load has completed ("once per process").
pub fn loaded() -> Option<Result<Arc<rustls::RootCertStore>, RootsError>> {
    ROOTS.get().map(|outcome| outcome.clone().map_err(RootsError::NotFound))
}

/// The system's roots, loaded on the blocking pool unless the process has them already,
/// waited for as a future within `timeout` (fibers and tasks alike). A load this call starts
/// logs its warnings under `log_target`.
pub async fn load_async(
    timeout: Duration,
    log_target: &'static str,
) -> Result<Arc<rustls::RootCertStore>, RootsError> {
    if let Some(outcome) = loaded() {
        return outcome;
    }
    if crate::runtime::handle::Handle::current().is_none() {
        return Err(RootsError::NoRuntime);
    }
    let job = crate::spawn_blocking(move || ROOTS.get_or_init(|| load(log_target)).clone());
    match crate::time::timeout(timeout, job).await {
        Ok(Ok(outcome)) => outcome.map_err(RootsError::NotFound),
        Ok(Err(e)) => Err(RootsError::Failed(e.to_string())),
        Err(_) => Err(RootsError::TimedOut),
    }
}

/// The system's roots as [`load_async`], waited for until `deadline`: parks a fiber (blocks
/// a thread that is not a worker).
///
/// # Panics
///
/// In an async task polled by a spindle worker: use [`load_async`] there.
#[track_caller]
pub fn load_until(
    deadline: Instant,
    log_target: &'static str,
) -> Result<Arc<rustls::RootCertStore>, RootsError> {
    if let Some(outcome) = loaded() {
        return outcome;
    }
    if crate::runtime::handle::Handle::current().is_none() {
        return Err(RootsError::NoRuntime);
    }
    let job = crate::spawn_blocking(move || ROOTS.get_or_init(|| load(log_target)).clone());
    match job.join_deadline(deadline) {
        Ok(Ok(outcome)) => outcome.map_err(RootsError::NotFound),
        Ok(Err(e)) => Err(RootsError::Failed(e.to_string())),
        Err(_running) => Err(RootsError::TimedOut),
    }
}

/// Reads the system's roots (on a blocking-pool thread).
fn load(log_target: &'static str) -> Result<Arc<rustls::RootCertStore>, String> {
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
            target: log_target,
            "loaded {added} system root certificate(s), but some of the store could not be read: {}",
            errors.join("; ")
        );
    }
    if ignored > 0 {
        log::debug!(target: log_target, "{ignored} system root certificates were not usable by rustls");
    }
    Ok(Arc::new(roots))
}
