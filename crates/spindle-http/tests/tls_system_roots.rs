//! The HTTP client given no TLS configuration trusts the system's root certificates (feature
//! `tls`). rustls-native-certs reads them from `SSL_CERT_FILE` / `SSL_CERT_DIR` when either is
//! set, and spindle-http keeps them once per process: each case runs its client in a child
//! process of this test binary (`support/child_test.rs`) with `SSL_CERT_FILE` naming a CA made
//! here by rcgen and `SSL_CERT_DIR` an empty directory, so that the machine's own bundle
//! neither helps nor masks a failure. The HTTPS server runs in the parent.

#[path = "../../spindle/tests/support/child_test.rs"]
mod child_test;
#[path = "../../spindle/tests/support/log_capture.rs"]
mod log_capture;
#[path = "../../spindle/tests/support/test_ca.rs"]
mod test_ca;

use log_capture::Capture;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use test_ca::Ca;

use spindle_http::{Body, Client, ClientErrorKind, Request, Response, Server, TlsConfig};

/// The URL the child fetches.
const URL: &str = "SPINDLE_TEST_ROOTS_URL";
/// A PEM file of the server's CA, for the child's explicitly configured client.
const CA_FILE: &str = "SPINDLE_TEST_ROOTS_CA";
/// The hang guard of a child (it normally ends within a second).
const LIMIT: Duration = Duration::from_secs(120);

/// An HTTPS server with a certificate from a CA of its own, the CA's PEM in a file, another
/// CA's in another, and an empty directory.
struct Fixture {
    server: Server,
    url: String,
    ca_file: PathBuf,
    other_ca_file: PathBuf,
    empty_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let ca = Ca::new("spindle-http test CA");
        let (cert, key) = ca.issue(&["localhost"]);
        let server = Server::builder()
            .tls(TlsConfig::from_pem(cert.as_bytes(), key.as_bytes()).unwrap())
            .serve("127.0.0.1:0", |req: Request<Body>| {
                Response::new(format!("hello over {:?}", req.version()))
            })
            .unwrap();
        let url = format!("https://localhost:{}/", server.local_addr().port());
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca.cert.pem()).unwrap();
        let other_ca_file = dir.path().join("other-ca.pem");
        std::fs::write(&other_ca_file, Ca::new("another CA").cert.pem()).unwrap();
        let empty_dir = dir.path().join("empty");
        std::fs::create_dir(&empty_dir).unwrap();
        Fixture { server, url, ca_file, other_ca_file, empty_dir, _dir: dir }
    }

    /// Runs `test` in a child with `SSL_CERT_FILE` = `cert_file`, `SSL_CERT_DIR` = `cert_dir`.
    fn child(&self, test: &str, cert_file: &Path, cert_dir: &OsStr) -> String {
        let env = [
            ("SSL_CERT_FILE", cert_file.as_os_str()),
            ("SSL_CERT_DIR", cert_dir),
            (URL, OsStr::new(&self.url)),
            (CA_FILE, self.ca_file.as_os_str()),
        ];
        child_test::run(test, "client", &env, LIMIT)
    }
}

fn runtime() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(2).build().unwrap()
}

fn url() -> String {
    std::env::var(URL).unwrap()
}

/// (a) `Client::new()` reaches the server whose CA `SSL_CERT_FILE` names, over HTTP/2 (ALPN
/// `h2`, `http/1.1` as `ClientBuilder::tls` sets), from a fiber and from an async task.
#[test]
fn a_client_without_tls_settings_trusts_the_ca_in_ssl_cert_file() {
    const TEST: &str = "a_client_without_tls_settings_trusts_the_ca_in_ssl_cert_file";
    if child_test::role().is_some() {
        let url = url();
        let (from_fiber, from_task) = runtime().block_on(move || {
            let client = Client::new();
            let res = client.get(&url).unwrap();
            let from_fiber = (res.status().as_u16(), res.into_body().text().unwrap());
            let other = Client::new();
            let task = spindle::task::spawn_async(async move {
                let res = other.send(Request::get(url.as_str()).body(Body::empty()).unwrap()).await.unwrap();
                let res_status = res.status().as_u16();
                let body = http_body_util::BodyExt::collect(res.into_body()).await.unwrap();
                (res_status, body.to_bytes())
            });
            (from_fiber, task.join().unwrap())
        });
        assert_eq!(from_fiber, (200, "hello over HTTP/2.0".to_owned()));
        assert_eq!(from_task, (200, bytes::Bytes::from_static(b"hello over HTTP/2.0")));
        child_test::done(TEST);
        return;
    }
    let fixture = Fixture::new();
    fixture.child(TEST, &fixture.ca_file, fixture.empty_dir.as_os_str());
    fixture.server.shutdown();
}

/// (b) With another CA in `SSL_CERT_FILE`, the server's certificate is from an unknown issuer:
/// a `Tls` error (no hang, no panic), twice (the roots kept are used again).
#[test]
fn a_server_outside_the_system_roots_is_an_unknown_issuer() {
    const TEST: &str = "a_server_outside_the_system_roots_is_an_unknown_issuer";
    if child_test::role().is_some() {
        let url = url();
        let errors = runtime().block_on(move || {
            let client = Client::new();
            [client.get(&url).unwrap_err(), client.get(&url).unwrap_err()]
        });
        for err in errors {
            assert_eq!(err.kind(), ClientErrorKind::Tls, "{err}");
            assert!(err.to_string().contains("UnknownIssuer"), "{err}");
        }
        child_test::done(TEST);
        return;
    }
    let fixture = Fixture::new();
    fixture.child(TEST, &fixture.other_ca_file, fixture.empty_dir.as_os_str());
    fixture.server.shutdown();
}

/// No root certificate at all (`SSL_CERT_FILE` names no file): a `Tls` error naming the fixes,
/// for every such request; a client with its own roots still connects.
#[test]
fn no_system_root_is_a_tls_error_naming_the_fixes() {
    const TEST: &str = "no_system_root_is_a_tls_error_naming_the_fixes";
    if child_test::role().is_some() {
        let url = url();
        let ca = std::fs::read(std::env::var(CA_FILE).unwrap()).unwrap();
        let (errors, explicit) = runtime().block_on(move || {
            let client = Client::new();
            let errors = [client.get(&url).unwrap_err(), Client::new().get(&url).unwrap_err()];
            let own = Client::builder().root_certificates_pem(&ca).unwrap().build();
            (errors, own.get(&url).unwrap().into_body().text().unwrap())
        });
        for err in errors {
            assert_eq!(err.kind(), ClientErrorKind::Tls, "{err}");
            let message = err.to_string();
            assert!(message.contains("no trusted root certificate"), "{message}");
            assert!(message.contains("SSL_CERT_FILE") && message.contains("ClientBuilder::tls"), "{message}");
            // rustls-native-certs's own reason: the file it could not read.
            assert!(message.contains("no-such-file.pem"), "{message}");
        }
        assert_eq!(explicit, "hello over HTTP/2.0");
        child_test::done(TEST);
        return;
    }
    let fixture = Fixture::new();
    let missing = fixture.empty_dir.join("no-such-file.pem");
    fixture.child(TEST, &missing, fixture.empty_dir.as_os_str());
    fixture.server.shutdown();
}

/// The warnings the child's logger saw from spindle-http.
static CAPTURE: Capture = Capture::new("spindle_http");

/// A directory in `SSL_CERT_DIR` that does not exist, beside the CA in `SSL_CERT_FILE`: the
/// CA is used and the unreadable part logged once, although four clients connect at once
/// (each waits for the one load).
#[test]
fn a_partial_load_goes_on_and_warns_once() {
    const TEST: &str = "a_partial_load_goes_on_and_warns_once";
    if child_test::role().is_some() {
        log::set_logger(&CAPTURE).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
        let url = url();
        let bodies = runtime().block_on(move || {
            let fibers: Vec<_> = (0..4)
                .map(|_| {
                    let url = url.clone();
                    spindle::spawn(move || Client::new().get(&url).unwrap().into_body().text().unwrap())
                })
                .collect();
            fibers.into_iter().map(|f| f.join().unwrap()).collect::<Vec<_>>()
        });
        assert_eq!(bodies, vec!["hello over HTTP/2.0"; 4]);
        let warnings = CAPTURE.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("no-such-dir"), "{warnings:?}");
        child_test::done(TEST);
        return;
    }
    let fixture = Fixture::new();
    let dirs =
        std::env::join_paths([fixture.empty_dir.clone(), fixture.empty_dir.join("no-such-dir")]).unwrap();
    fixture.child(TEST, &fixture.ca_file, &dirs);
    fixture.server.shutdown();
}
