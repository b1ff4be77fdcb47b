//! `tls_hello [CERT.pem KEY.pem]`: HTTPS with spindle-http (feature `tls`), server and client
//! in one process. The server answers `Hello, TLS!` on 127.0.0.1 (an ephemeral port), with the
//! certificate and key from the PEM files or, without them, a self-signed certificate for
//! `localhost` made at run time with rcgen. The client trusts that certificate and fetches
//! `https://localhost:PORT/` twice: once letting ALPN pick HTTP/2, once offering only
//! HTTP/1.1. It prints each status line and body length; then the server shuts down.
//!
//! ```text
//! cargo run -p spindle-http --features tls --example tls_hello
//! serving https://localhost:41235/ (self-signed certificate made at run time)
//! HTTP/2.0 200 OK
//! body: 11 bytes
//! HTTP/1.1 200 OK
//! body: 11 bytes
//! ```
//!
//! PEM files must hold a self-signed end-entity certificate for `localhost` (the client trusts
//! exactly that certificate; rustls refuses a CA certificate as a server's), for example:
//!
//! ```text
//! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
//!     -subj /CN=localhost -addext subjectAltName=DNS:localhost \
//!     -addext basicConstraints=critical,CA:FALSE -keyout key.pem -out cert.pem
//! ```
//!
//! For an HTTPS server that keeps running, use the `hello` example with TLS_CERT and TLS_KEY
//! (and `fetch` with FETCH_CA).

use std::error::Error;
use std::sync::Arc;

use spindle_http::rustls;
use spindle_http::{Body, Client, Request, Response, Server, TlsConfig};

type BoxError = Box<dyn Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cert, key, origin) = match args.as_slice() {
        [] => {
            let key = rcgen::KeyPair::generate()?;
            let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])?.self_signed(&key)?;
            (
                cert.pem().into_bytes(),
                key.serialize_pem().into_bytes(),
                "self-signed certificate made at run time",
            )
        }
        [cert, key] => (read(cert)?, read(key)?, "certificate from the PEM files"),
        _ => return Err("usage: tls_hello [CERT.pem KEY.pem]".into()),
    };

    let server = Server::builder()
        .workers(1)
        .tls(TlsConfig::from_pem(&cert, &key)?)
        .serve("127.0.0.1:0", |_req: Request<Body>| Response::new("Hello, TLS!"))?;
    let url = format!("https://localhost:{}/", server.local_addr().port());
    println!("serving {url} ({origin})");

    // ALPN offers h2 and http/1.1: spindle-http's server picks HTTP/2.
    let h2 = Client::builder().root_certificates_pem(&cert)?.build();
    // A rustls configuration of one's own: this one offers only http/1.1.
    let h1 = Client::builder().tls(http11_only(&cert)?).build();

    let rt = spindle::Runtime::new()?;
    let fetched = rt.block_on(move || -> Result<(), BoxError> {
        for client in [h2, h1] {
            let res = client.get(&url)?;
            println!("{:?} {}", res.version(), res.status());
            println!("body: {} bytes", res.into_body().bytes()?.len());
        }
        Ok(())
    });
    server.shutdown();
    fetched
}

fn read(path: &str) -> Result<Vec<u8>, BoxError> {
    std::fs::read(path).map_err(|e| format!("reading {path}: {e}").into())
}

/// A rustls client configuration trusting the certificates in `pem`, with ALPN `http/1.1` only.
fn http11_only(pem: &[u8]) -> Result<Arc<rustls::ClientConfig>, BoxError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
