//! HTTPS (feature `tls`): the server side of TLS with rustls ([`TlsConfig`], the handshake's
//! acceptor); the stream it makes is one of the connection's transports (module
//! `transport::stream`).
//!
//! rustls is driven through `futures-rustls` over spindle's `TcpStream`, which implements the
//! futures-io traits: the handshake and every record are plain futures polled by the
//! connection's task, so a TLS connection waits exactly as a plain one does, and
//! no TLS state machine code is written here (futures-rustls is the crate made for driving
//! rustls's `Connection` over a poll-based socket; `tokio-rustls` is the same code for
//! tokio's traits).
//!
//! Invariants:
//!
//! - **Bounded handshake**: the handshake runs under [`TlsConfig::handshake_timeout`] and
//!   the server's shutdown; a client that never finishes it is disconnected and its task
//!   ends. A failed handshake (bad client hello, a client that rejects the certificate) ends
//!   the connection with a `debug` log line; nothing is left waiting.
//! - **Bounded buffers**: rustls's own plaintext send buffer has its default limit (64 KiB),
//!   so a client that does not read stalls the connection as on a plain socket.
//! - **Protocol by ALPN**: `h2` selects HTTP/2, anything else (or no ALPN) HTTP/1.1.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::transport::stream::ServerStream;

/// The TLS settings of a server: its certificate chain and key (or a whole rustls
/// `ServerConfig`), and how long a client has to finish the handshake.
#[derive(Clone)]
pub struct TlsConfig {
    pub(crate) config: Arc<rustls::ServerConfig>,
    pub(crate) handshake_timeout: Duration,
}

impl TlsConfig {
    /// From PEM text: `cert_chain` holds the server's certificate then its intermediates,
    /// `key` its private key (PKCS#8, PKCS#1 or SEC1).
    ///
    /// # Errors
    ///
    /// `InvalidData` when either holds no PEM block of the right kind, or when rustls refuses
    /// the pair (a key that does not match the certificate, an unsupported key type); the
    /// message says which.
    pub fn from_pem(cert_chain: &[u8], key: &[u8]) -> io::Result<TlsConfig> {
        let certs = CertificateDer::pem_slice_iter(cert_chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("reading the certificate PEM: {e}")))?;
        if certs.is_empty() {
            return Err(invalid("no CERTIFICATE block in the certificate PEM".to_owned()));
        }
        let key =
            PrivateKeyDer::from_pem_slice(key).map_err(|e| invalid(format!("reading the key PEM: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS versions: {e}")))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| invalid(format!("certificate and key refused: {e}")))?;
        Ok(TlsConfig::from_rustls(Arc::new(config)))
    }

    /// From PEM files (see [`TlsConfig::from_pem`]).
    ///
    /// # Errors
    ///
    /// A file that cannot be read (the error names it), or as [`TlsConfig::from_pem`].
    pub fn from_pem_files(cert_chain: impl AsRef<Path>, key: impl AsRef<Path>) -> io::Result<TlsConfig> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", p.display())))
        };
        TlsConfig::from_pem(&read(cert_chain.as_ref())?, &read(key.as_ref())?)
    }

    /// From a rustls configuration (client authentication, session resumption, another
    /// crypto provider...). If its `alpn_protocols` is empty the server sets `h2` (when
    /// HTTP/2 is on) and `http/1.1`.
    pub fn from_rustls(config: Arc<rustls::ServerConfig>) -> TlsConfig {
        TlsConfig { config, handshake_timeout: Duration::from_secs(10) }
    }

    /// How long a client has to complete the TLS handshake (default 10 s); past it the
    /// connection is closed.
    pub fn handshake_timeout(mut self, timeout: Duration) -> TlsConfig {
        self.handshake_timeout = timeout;
        self
    }

    /// The configuration the server uses: ALPN set if the caller left it empty.
    pub(crate) fn with_alpn(mut self, http2: bool) -> TlsConfig {
        if self.config.alpn_protocols.is_empty() {
            let mut config = (*self.config).clone();
            if http2 {
                config.alpn_protocols.push(b"h2".to_vec());
            }
            config.alpn_protocols.push(b"http/1.1".to_vec());
            self.config = Arc::new(config);
        }
        self
    }
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("alpn_protocols", &self.config.alpn_protocols)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Whether the client and server agreed on HTTP/2 by ALPN.
pub(crate) fn negotiated_h2(stream: &ServerStream) -> bool {
    stream.get_ref().1.alpn_protocol() == Some(b"h2")
}

/// The acceptor for a configuration.
pub(crate) fn acceptor(config: &TlsConfig) -> futures_rustls::TlsAcceptor {
    futures_rustls::TlsAcceptor::from(config.config.clone())
}
