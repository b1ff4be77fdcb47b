//! The TLS settings (feature `tls`): [`ServerTlsConfig`] for a server, [`ClientTlsConfig`]
//! for an endpoint, from PEM, files, a rustls configuration, or (the client) the system's
//! roots (module `roots`). Both offer only ALPN `h2` unless the caller's own rustls
//! configuration says otherwise (module `tls`, "HTTP/2 by ALPN").

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::provider::provider;
use super::roots::SystemRoots;

/// The TLS settings of a [`Server`](crate::Server): its certificate chain and key (or a whole
/// rustls `ServerConfig`), optionally the authorities whose client certificates it requires
/// (mutual TLS), and how long a client has to finish the handshake.
#[derive(Clone)]
pub struct ServerTlsConfig {
    pub(crate) config: Arc<rustls::ServerConfig>,
    pub(crate) handshake_timeout: Duration,
}

impl ServerTlsConfig {
    /// From PEM text: `cert_chain` holds the server's certificate then its intermediates,
    /// `key` its private key (PKCS#8, PKCS#1 or SEC1).
    ///
    /// # Errors
    ///
    /// `InvalidData` when either holds no PEM block of the right kind, or when rustls refuses
    /// the pair (a key that does not match the certificate, an unsupported key type); the
    /// message says which.
    pub fn from_pem(cert_chain: &[u8], key: &[u8]) -> io::Result<ServerTlsConfig> {
        ServerTlsConfig::build(cert_chain, key, None)
    }

    /// As [`ServerTlsConfig::from_pem`], and every client must present a certificate issued
    /// by one of the authorities in `client_ca` (PEM): mutual TLS. A client without one, or
    /// with another, fails the handshake.
    ///
    /// # Errors
    ///
    /// As [`ServerTlsConfig::from_pem`], and `InvalidData` when `client_ca` holds no usable
    /// certificate.
    pub fn from_pem_with_client_auth(
        cert_chain: &[u8],
        key: &[u8],
        client_ca: &[u8],
    ) -> io::Result<ServerTlsConfig> {
        ServerTlsConfig::build(cert_chain, key, Some(roots(client_ca, "client CA")?))
    }

    /// From PEM files (see [`ServerTlsConfig::from_pem`]).
    ///
    /// # Errors
    ///
    /// A file that cannot be read (the error names it), or as [`ServerTlsConfig::from_pem`].
    pub fn from_pem_files(
        cert_chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> io::Result<ServerTlsConfig> {
        ServerTlsConfig::from_pem(&read(cert_chain.as_ref())?, &read(key.as_ref())?)
    }

    /// From a rustls configuration (another crypto provider, session resumption, a custom
    /// client verifier...). If its `alpn_protocols` is empty, the server offers `h2`.
    pub fn from_rustls(config: Arc<rustls::ServerConfig>) -> ServerTlsConfig {
        let config = if config.alpn_protocols.is_empty() {
            let mut config = (*config).clone();
            config.alpn_protocols = vec![b"h2".to_vec()];
            Arc::new(config)
        } else {
            config
        };
        ServerTlsConfig { config, handshake_timeout: Duration::from_secs(10) }
    }

    /// How long a client has to complete the TLS handshake (default 10 s); past it the
    /// connection is closed.
    pub fn handshake_timeout(mut self, timeout: Duration) -> ServerTlsConfig {
        self.handshake_timeout = timeout;
        self
    }

    fn build(
        cert_chain: &[u8],
        key: &[u8],
        client_ca: Option<rustls::RootCertStore>,
    ) -> io::Result<ServerTlsConfig> {
        let certs = certificates(cert_chain, "certificate")?;
        let key = private_key(key)?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS versions: {e}")))?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(roots) => {
                let verifier =
                    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                        .build()
                        .map_err(|e| invalid(format!("client CA refused: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(certs, key)
            .map_err(|e| invalid(format!("certificate and key refused: {e}")))?;
        Ok(ServerTlsConfig::from_rustls(Arc::new(config)))
    }
}

impl fmt::Debug for ServerTlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTlsConfig")
            .field("alpn_protocols", &self.config.alpn_protocols)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

/// The TLS settings of an [`Endpoint`](crate::Endpoint) (`https://` URIs): the authorities
/// whose server certificates it trusts (given, or the system's:
/// [`ClientTlsConfig::native_roots`], what an `https://` endpoint without
/// [`Endpoint::tls`](crate::Endpoint::tls) uses), optionally a client certificate (mutual TLS),
/// and the name the server's certificate must carry (default: the URI's host).
#[derive(Clone)]
pub struct ClientTlsConfig {
    pub(crate) config: ClientRustls,
    pub(crate) domain: Option<String>,
}

/// The rustls configuration of a [`ClientTlsConfig`]: built, or built at the first connection
/// attempt from the system's roots (module `roots`).
#[derive(Clone)]
pub(crate) enum ClientRustls {
    Built(Arc<rustls::ClientConfig>),
    System(Arc<SystemRoots>),
}

impl ClientTlsConfig {
    /// Trusts the system's root certificates, found by rustls-native-certs: the PEM file in
    /// `SSL_CERT_FILE` and the directories in `SSL_CERT_DIR` when either variable is set, else
    /// the distribution's bundle. Nothing is read here: the roots are loaded at the first
    /// connection attempt that needs them (of any channel of the process), on spindle's blocking
    /// pool, never on a worker, and kept for the rest of the process. Files that could not be read
    /// beside certificates that could are logged once (`warn`).
    ///
    /// When no certificate could be loaded, each connection attempt fails with an error naming
    /// `SSL_CERT_FILE` and `Endpoint::tls` as the fixes, as a refused connection does
    /// (`connect()` returns it, a lazy channel's calls fail `UNAVAILABLE` with it). Composes
    /// with [`ClientTlsConfig::domain_name`].
    pub fn native_roots() -> ClientTlsConfig {
        let roots = SystemRoots::new(None);
        ClientTlsConfig { config: ClientRustls::System(Arc::new(roots)), domain: None }
    }

    /// As [`ClientTlsConfig::native_roots`], presenting the client certificate `cert_chain`
    /// with its `key` to servers that ask for one (mutual TLS). The certificate and key are
    /// read and checked here; the roots, at the first connection attempt.
    ///
    /// # Errors
    ///
    /// As [`ServerTlsConfig::from_pem`] for the certificate and key.
    pub fn native_roots_with_identity(cert_chain: &[u8], key: &[u8]) -> io::Result<ClientTlsConfig> {
        let certs = certificates(cert_chain, "client certificate")?;
        let identity = rustls::sign::CertifiedKey::from_der(certs, private_key(key)?, &provider())
            .map_err(|e| invalid(format!("client certificate and key refused: {e}")))?;
        let identity = Arc::new(rustls::sign::SingleCertAndKey::from(identity));
        let roots = SystemRoots::new(Some(identity));
        Ok(ClientTlsConfig { config: ClientRustls::System(Arc::new(roots)), domain: None })
    }

    /// Trusts the certificate authorities in `ca` (PEM: one or more certificates). The
    /// server's certificate must chain to one of them and name the host connected to (or
    /// [`ClientTlsConfig::domain_name`]).
    ///
    /// # Errors
    ///
    /// `InvalidData` when `ca` holds no usable certificate.
    pub fn from_ca_pem(ca: &[u8]) -> io::Result<ClientTlsConfig> {
        ClientTlsConfig::build(roots(ca, "CA")?, None)
    }

    /// As [`ClientTlsConfig::from_ca_pem`], presenting the client certificate `cert_chain`
    /// with its `key` to servers that ask for one (mutual TLS).
    ///
    /// # Errors
    ///
    /// As [`ClientTlsConfig::from_ca_pem`], and as [`ServerTlsConfig::from_pem`] for the
    /// certificate and key.
    pub fn from_ca_pem_with_identity(
        ca: &[u8],
        cert_chain: &[u8],
        key: &[u8],
    ) -> io::Result<ClientTlsConfig> {
        let identity = (certificates(cert_chain, "client certificate")?, private_key(key)?);
        ClientTlsConfig::build(roots(ca, "CA")?, Some(identity))
    }

    /// From a rustls configuration (another crypto provider, a custom server verifier...). If
    /// its `alpn_protocols` is empty, the client offers `h2`.
    pub fn from_rustls(config: Arc<rustls::ClientConfig>) -> ClientTlsConfig {
        let config = if config.alpn_protocols.is_empty() {
            let mut config = (*config).clone();
            config.alpn_protocols = vec![b"h2".to_vec()];
            Arc::new(config)
        } else {
            config
        };
        ClientTlsConfig { config: ClientRustls::Built(config), domain: None }
    }

    /// The name sent in SNI and checked against the server's certificate, instead of the
    /// URI's host (a server reached by address whose certificate names a host). Kept by
    /// every constructor's configuration, [`ClientTlsConfig::native_roots`]'s included.
    pub fn domain_name(mut self, name: impl Into<String>) -> ClientTlsConfig {
        self.domain = Some(name.into());
        self
    }

    fn build(
        roots: rustls::RootCertStore,
        identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    ) -> io::Result<ClientTlsConfig> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS versions: {e}")))?
            .with_root_certificates(roots);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((certs, key)) => builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| invalid(format!("client certificate and key refused: {e}")))?,
        };
        Ok(ClientTlsConfig::from_rustls(Arc::new(config)))
    }
}

impl fmt::Debug for ClientTlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("ClientTlsConfig");
        match &self.config {
            ClientRustls::Built(config) => f.field("alpn_protocols", &config.alpn_protocols),
            ClientRustls::System(roots) => f.field("system_roots", roots),
        };
        f.field("domain", &self.domain).finish_non_exhaustive()
    }
}

impl ClientTlsConfig {
    /// The rustls configuration; with the system's roots, loaded first if the process has not
    /// yet (module `roots`), waiting until `deadline` (run by the manager fiber).
    pub(crate) fn rustls(&self, deadline: std::time::Instant) -> io::Result<Arc<rustls::ClientConfig>> {
        match &self.config {
            ClientRustls::Built(config) => Ok(config.clone()),
            ClientRustls::System(roots) => roots.config(deadline),
        }
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

fn read(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))
}

fn certificates(pem: &[u8], what: &str) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("reading the {what} PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(format!("no CERTIFICATE block in the {what} PEM")));
    }
    Ok(certs)
}

fn private_key(pem: &[u8]) -> io::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| invalid(format!("reading the key PEM: {e}")))
}

fn roots(pem: &[u8], what: &str) -> io::Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certificates(pem, what)?);
    if added == 0 {
        return Err(invalid(format!("no usable certificate in the {what} PEM")));
    }
    Ok(roots)
}
