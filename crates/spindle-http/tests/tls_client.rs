//! The HTTP client over TLS (feature `tls`): ALPN picks HTTP/2 or HTTP/1.1 against
//! spindle-http's HTTPS server; an untrusted or expired certificate is a `Tls` error that
//! says why.

use std::sync::Arc;
use std::time::Duration;

use spindle_http::{Body, Client, ClientErrorKind, Request, Response, Server, TlsConfig, Version};

fn certificate(expired: bool) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    if expired {
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
    }
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn https_server(cert: &str, key: &str) -> Server {
    Server::builder()
        .tls(TlsConfig::from_pem(cert.as_bytes(), key.as_bytes()).unwrap())
        .serve("127.0.0.1:0", |req: Request<Body>| Response::new(format!("{:?}", req.version())))
        .unwrap()
}

fn runtime() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(1).build().unwrap()
}

#[test]
fn https_client_negotiates_h2_or_http11_by_alpn() {
    let (cert, key) = certificate(false);
    let server = https_server(&cert, &key);
    let url = format!("https://localhost:{}/", server.local_addr().port());
    let h2 = Client::builder().root_certificates_pem(cert.as_bytes()).unwrap().build();
    let mut h1_only =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates({
                let mut roots = rustls::RootCertStore::empty();
                use rustls::pki_types::pem::PemObject;
                roots
                    .add(rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).unwrap())
                    .unwrap();
                roots
            })
            .with_no_client_auth();
    h1_only.alpn_protocols = vec![b"http/1.1".to_vec()];
    let h1 = Client::builder().tls(Arc::new(h1_only)).build();
    let out = runtime().block_on(move || {
        let a = h2.get(&url).unwrap();
        let b = h1.get(&url).unwrap();
        (a.version(), a.into_body().text().unwrap(), b.version(), b.into_body().text().unwrap())
    });
    assert_eq!(out, (Version::HTTP_2, "HTTP/2.0".to_owned(), Version::HTTP_11, "HTTP/1.1".to_owned()));
    server.shutdown();
}

#[test]
fn untrusted_and_expired_certificates_are_tls_errors() {
    let (cert, key) = certificate(true);
    let server = https_server(&cert, &key);
    let (other, _) = certificate(false);
    let url = format!("https://localhost:{}/", server.local_addr().port());
    let trusting = Client::builder()
        .root_certificates_pem(cert.as_bytes())
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .build();
    let stranger = Client::builder().root_certificates_pem(other.as_bytes()).unwrap().build();
    let plain = Client::new();
    let (expired, unknown, no_tls) = runtime().block_on(move || {
        (trusting.get(&url).unwrap_err(), stranger.get(&url).unwrap_err(), plain.get(&url).unwrap_err())
    });
    assert_eq!(expired.kind(), ClientErrorKind::Tls, "{expired}");
    assert!(expired.to_string().contains("expired"), "{expired}");
    assert_eq!(unknown.kind(), ClientErrorKind::Tls, "{unknown}");
    // No TLS configuration: the system's roots, which do not hold this self-signed certificate
    // (or, on a machine without any, the error saying so). `tests/tls_system_roots.rs` has the
    // system's roots under control.
    assert_eq!(no_tls.kind(), ClientErrorKind::Tls, "{no_tls}");
    let message = no_tls.to_string();
    assert!(
        message.contains("TLS handshake") || message.contains("no trusted root certificate"),
        "{message}"
    );
    server.shutdown();
}
