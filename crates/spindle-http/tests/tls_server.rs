//! HTTPS (feature `tls`): rustls on the server, HTTP/1.1 or HTTP/2 by ALPN, certificates made
//! at run time with rcgen; a bad certificate, an expired one and a handshake that never
//! finishes each end in a clear error with no fiber left. The client is
//! rustls's blocking `StreamOwned` on a std socket.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, ServerName};
use spindle_http::{Body, Request, Response, Server, TlsConfig};

/// A self-signed certificate for `localhost` (valid now, or expired in 2001), as PEM, with
/// its key, and its DER for the client's trust store.
fn certificate(expired: bool) -> (String, String, CertificateDer<'static>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    if expired {
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
    }
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem(), cert.der().clone())
}

fn client_config(trust: CertificateDer<'static>, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trust).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

fn tls_connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let conn = rustls::ClientConnection::new(config, ServerName::try_from("localhost").unwrap()).unwrap();
    rustls::StreamOwned::new(conn, sock)
}

fn https_server(cert_pem: &str, key_pem: &str) -> Server {
    let tls = TlsConfig::from_pem(cert_pem.as_bytes(), key_pem.as_bytes()).unwrap();
    Server::builder()
        .tls(tls.handshake_timeout(Duration::from_millis(300)))
        .serve("127.0.0.1:0", |req: Request<Body>| {
            Response::new(format!("{:?} {}", req.version(), req.uri().path()))
        })
        .unwrap()
}

/// Waits (bounded: 5 s) until the server has no open connection and no fiber left; returns
/// how many connections and which fibers are left.
fn connections_gone(server: &Server) -> (usize, Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let fibers: Vec<String> = server.dump_fibers().into_iter().filter_map(|f| f.name).collect();
        let left = (server.open_connections(), fibers);
        if (left.0 == 0 && left.1.is_empty()) || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn https_serves_http1_and_selects_h2_by_alpn() {
    let (cert, key, der) = certificate(false);
    let server = https_server(&cert, &key);
    let addr = server.local_addr();
    // HTTP/1.1.
    let mut s = tls_connect(addr, client_config(der.clone(), &[b"http/1.1"]));
    s.write_all(b"GET /secure HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let res = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(res.is_ok(), "the server ends with close_notify: {res:?}");
    assert!(text.starts_with("HTTP/1.1 200") && text.ends_with("HTTP/1.1 /secure"), "{text:?}");
    // HTTP/2 by ALPN: the server's first frame after the preface is SETTINGS (type 4).
    let mut s = tls_connect(addr, client_config(der, &[b"h2", b"http/1.1"]));
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00").unwrap();
    let mut frame = [0u8; 9];
    s.read_exact(&mut frame).unwrap();
    assert_eq!(s.conn.alpn_protocol(), Some(&b"h2"[..]));
    assert_eq!(frame[3], 4, "a SETTINGS frame: {frame:?}");
    drop(s);
    server.shutdown();
}

#[test]
fn bad_certificates_are_refused_with_clear_errors() {
    let (cert, key, _) = certificate(false);
    let (_, other_key, _) = certificate(false);
    let err = TlsConfig::from_pem(b"not a certificate", key.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("no CERTIFICATE"), "{err}");
    let err = TlsConfig::from_pem(cert.as_bytes(), b"not a key").unwrap_err();
    assert!(err.to_string().contains("key PEM"), "{err}");
    let err = TlsConfig::from_pem(cert.as_bytes(), other_key.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("certificate and key refused"), "{err}");
    let err = TlsConfig::from_pem_files("/nonexistent/cert.pem", "/nonexistent/key.pem").unwrap_err();
    assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
    // From files, the good pair works.
    let dir = std::env::temp_dir().join(format!("spindle-http-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cert.pem"), &cert).unwrap();
    std::fs::write(dir.join("key.pem"), &key).unwrap();
    assert!(TlsConfig::from_pem_files(dir.join("cert.pem"), dir.join("key.pem")).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn expired_certificate_fails_the_handshake_and_leaves_no_fiber() {
    let (cert, key, der) = certificate(true);
    let server = https_server(&cert, &key);
    let mut s = tls_connect(server.local_addr(), client_config(der, &[b"http/1.1"]));
    let err = s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").and_then(|_| s.flush());
    let err = match err {
        Err(e) => e,
        Ok(()) => s.read(&mut [0u8; 64]).expect_err("the handshake must fail"),
    };
    assert!(err.to_string().contains("certificate expired"), "{err}");
    assert_eq!(connections_gone(&server), (0, Vec::<String>::new()));
    server.shutdown();
}

#[test]
fn handshake_that_never_finishes_is_cut_at_its_timeout() {
    let (cert, key, _) = certificate(false);
    let server = https_server(&cert, &key);
    // Half a TLS record header, then silence.
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&[0x16, 0x03, 0x01]).unwrap();
    let mut out = Vec::new();
    let res = s.read_to_end(&mut out);
    assert!(
        res.is_ok() || res.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "closed by the server before the client's 20 s read timeout: {res:?}"
    );
    assert_eq!(connections_gone(&server), (0, Vec::<String>::new()));
    server.shutdown();
}
