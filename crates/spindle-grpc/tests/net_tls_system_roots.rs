//! The system's root certificates (feature `tls`): an `https://` endpoint given no
//! `Endpoint::tls`, and `ClientTlsConfig::native_roots`. rustls-native-certs reads them from
//! `SSL_CERT_FILE` / `SSL_CERT_DIR` when either is set, and spindle-grpc keeps them once per
//! process: each case runs its client in a child process of this test binary
//! (`support/child_test.rs`) with `SSL_CERT_FILE` naming a CA made here by rcgen and
//! `SSL_CERT_DIR` an empty directory, so that the machine's own bundle neither helps nor masks
//! a failure. The servers run in the parent.

mod net;

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

use spindle_grpc::{ClientTlsConfig, Endpoint, RemoteChannel, ServerTlsConfig};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::SimpleRequest;

/// The port of the server (certificate for `localhost`, no client authentication).
const PORT: &str = "SPINDLE_TEST_ROOTS_PORT";
/// The port of the server that requires a client certificate (mutual TLS).
const MTLS_PORT: &str = "SPINDLE_TEST_ROOTS_MTLS_PORT";
/// The directory of the PEM files: `ca.pem` (the servers' CA), `client.pem` and `client.key`
/// (a client certificate the mutual-TLS server accepts).
const FILES: &str = "SPINDLE_TEST_ROOTS_FILES";
/// The hang guard of a child (it normally ends within a second or two).
const LIMIT: Duration = Duration::from_secs(120);

/// Two TLS servers with the conformance service, certificates for `localhost` from one CA (the
/// second requires a client certificate from a client CA), and the PEM files.
struct Fixture {
    _server: net::Net,
    _mtls_server: net::Net,
    ports: (u16, u16),
    dir: tempfile::TempDir,
    empty_dir: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let ca = Ca::new("spindle-grpc test CA");
        let client_ca = Ca::new("spindle-grpc client CA");
        let (cert, key) = ca.issue(&["localhost"]);
        let tls = ServerTlsConfig::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();
        let server = net::start(move |s| s.tls(tls));
        let mtls = ServerTlsConfig::from_pem_with_client_auth(
            cert.as_bytes(),
            key.as_bytes(),
            client_ca.cert.pem().as_bytes(),
        )
        .unwrap();
        let mtls_server = net::start(move |s| s.tls(mtls));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.cert.pem()).unwrap();
        std::fs::write(dir.path().join("other-ca.pem"), Ca::new("another CA").cert.pem()).unwrap();
        let (client_cert, client_key) = client_ca.issue(&["client"]);
        std::fs::write(dir.path().join("client.pem"), client_cert).unwrap();
        std::fs::write(dir.path().join("client.key"), client_key).unwrap();
        let empty_dir = dir.path().join("empty");
        std::fs::create_dir(&empty_dir).unwrap();
        let ports = (server.addr.port(), mtls_server.addr.port());
        Fixture { _server: server, _mtls_server: mtls_server, ports, dir, empty_dir }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `test` in a child with `SSL_CERT_FILE` = `cert_file`, `SSL_CERT_DIR` = `cert_dir`.
    fn child(&self, test: &str, cert_file: &Path, cert_dir: &OsStr) {
        let (port, mtls_port) = (self.ports.0.to_string(), self.ports.1.to_string());
        let env = [
            ("SSL_CERT_FILE", cert_file.as_os_str()),
            ("SSL_CERT_DIR", cert_dir),
            (PORT, OsStr::new(&port)),
            (MTLS_PORT, OsStr::new(&mtls_port)),
            (FILES, self.dir.path().as_os_str()),
        ];
        child_test::run(test, "client", &env, LIMIT);
    }
}

/// The child's side: a runtime, and the servers' ports and files from the parent.
struct Client {
    rt: spindle::Runtime,
}

impl Client {
    fn new() -> Client {
        Client { rt: spindle::Builder::new().worker_threads(2).build().unwrap() }
    }

    fn port(name: &str) -> u16 {
        std::env::var(name).unwrap().parse().unwrap()
    }

    fn file(name: &str) -> Vec<u8> {
        std::fs::read(Path::new(&std::env::var(FILES).unwrap()).join(name)).unwrap()
    }

    /// An endpoint for `https://{host}:{port}` on the runtime, with `tls` if given.
    fn endpoint(&self, host: &str, port: u16, tls: Option<ClientTlsConfig>) -> Endpoint {
        let endpoint = Endpoint::new(format!("https://{host}:{port}"))
            .unwrap()
            .handle(self.rt.handle())
            .connect_timeout(Duration::from_secs(10));
        match tls {
            Some(tls) => endpoint.tls(tls),
            None => endpoint,
        }
    }

    fn connect(&self, endpoint: Endpoint) -> std::io::Result<RemoteChannel> {
        self.rt.block_on(move || spindle::task::block_on(endpoint.connect()))
    }

    /// A unary call asking for `size` bytes: the size of the payload answered.
    fn unary(&self, channel: &RemoteChannel, size: i32) -> Result<usize, tonic::Status> {
        let channel = channel.clone();
        self.rt.block_on(move || {
            spindle::task::block_on(async move {
                let request = SimpleRequest { response_size: size, ..Default::default() };
                let response = TestServiceClient::new(channel).unary_call(request).await?;
                Ok(response.into_inner().payload.unwrap_or_default().body.len())
            })
        })
    }
}

/// (a) An `https://localhost` endpoint without `Endpoint::tls` trusts the CA in
/// `SSL_CERT_FILE` (it was refused before); so does `ClientTlsConfig::native_roots()` with
/// `domain_name` for a server reached by address.
#[test]
fn an_https_endpoint_without_tls_settings_trusts_the_ca_in_ssl_cert_file() {
    const TEST: &str = "an_https_endpoint_without_tls_settings_trusts_the_ca_in_ssl_cert_file";
    if child_test::role().is_some() {
        let client = Client::new();
        let port = Client::port(PORT);
        let channel = client.connect(client.endpoint("localhost", port, None)).unwrap();
        assert_eq!(client.unary(&channel, 1000).unwrap(), 1000);
        let by_address = ClientTlsConfig::native_roots().domain_name("localhost");
        let channel = client.connect(client.endpoint("127.0.0.1", port, Some(by_address))).unwrap();
        assert_eq!(client.unary(&channel, 7).unwrap(), 7);
        child_test::done(TEST);
        return;
    }
    let fixture = Fixture::new();
    fixture.child(TEST, &fixture.file("ca.pem"), fixture.empty_dir.as_os_str());
}

/// (b) With another CA in `SSL_CERT_FILE`, the server's certificate is from an unknown issuer:
/// `connect` fails with the TLS error (no hang, no panic), a lazy channel's call is
/// `UNAVAILABLE` naming it, and `native_roots` fails alike.
#[test]
fn a_server_outside_the_system_roots_is_an_unknown_issuer() {
    const TEST: &str = "a_server_outside_the_system_roots_is_an_unknown_issuer";
    if child_test::role().is_some() {
        let client = Client::new();
        let port = Client::port(PORT);
        let err = client.connect(client.endpoint("localhost", port, None)).unwrap_err();
        assert!(
            err.to_string().contains("TLS handshake") && err.to_string().contains("UnknownIssuer"),
            "{err}"
        );
        let lazy = client.endpoint("localhost", port, None).connect_lazy().unwrap();
        let status = client.unary(&lazy, 1).unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert!(status.message().contains("UnknownIssuer"), "{status:?}");
        let by_address = ClientTlsConfig::native_roots().domain_name("localhost");
        let err = client.connect(client.endpoint("127.0.0.1", port, Some(by_address))).unwrap_err();
        assert!(err.to_string().contains("UnknownIssuer"), "{err}");
        child_test::done(TEST);
        return;
    }
    let fixture = Fixture::new();
    fixture.child(TEST, &fixture.file("other-ca.pem"), fixture.empty_dir.as_os_str());
}

/// Mutual TLS with the system's roots: `native_roots_with_identity` presents the client
/// certificate; `native_roots` alone is refused by the server that requires one.
#[test]
fn native_roots_with_identity_for_mutual_tls() {
    const TEST: &str = "native_roots_with_identity_for_mutual_tls";
    if child_test::role().is_some() {
        let client = Client::new();
        let port = Client::port(MTLS_PORT);
        let identity = ClientTlsConfig::native_roots_with_identity(
            &Client::file("client.pem"),
            &Client::file("client.key"),
        )
        .unwrap();
        let channel = client.connect(client.endpoint("localhost", port, Some(identity))).unwrap();
        assert_eq!(client.unary(&channel, 5).unwrap(), 5);
        // Without a certificate: the attempt or the first call fails (TLS 1.3 reports the
        // server's refusal after the client's handshake ended). The attempt sometimes fails
        // only at its connect timeout instead of at the server's alert (as with `from_ca_pem`,
        // not a matter of the roots): a short one keeps the test short.
        let anonymous = client.endpoint("localhost", port, Some(ClientTlsConfig::native_roots()));
        let anonymous = client.connect(anonymous.connect_timeout(Duration::from_secs(2)));
        assert!(anonymous.is_err() || client.unary(&anonymous.unwrap(), 1).is_err());
        // A key that is not the certificate's is refused at once.
        let (_, other_key) = Ca::new("unrelated").issue(&["client"]);
        let err =
            ClientTlsConfig::native_roots_with_identity(&Client::file("client.pem"), other_key.as_bytes())
                .unwrap_err();
        assert!(err.to_string().contains("refused"), "{err}");
        child_test::done(TEST);
        return;
    }
    let fixture = Fixture::new();
    fixture.child(TEST, &fixture.file("ca.pem"), fixture.empty_dir.as_os_str());
}

/// No root certificate at all (`SSL_CERT_FILE` names no file): each attempt fails with an
/// error naming the fixes; an endpoint with `Endpoint::tls` still connects.
#[test]
fn no_system_root_is_an_error_naming_the_fixes() {
    const TEST: &str = "no_system_root_is_an_error_naming_the_fixes";
    if child_test::role().is_some() {
        let client = Client::new();
        let port = Client::port(PORT);
        for _ in 0..2 {
            let err = client.connect(client.endpoint("localhost", port, None)).unwrap_err();
            let message = err.to_string();
            assert!(message.contains("no trusted root certificate"), "{message}");
            assert!(message.contains("SSL_CERT_FILE") && message.contains("Endpoint::tls"), "{message}");
            // rustls-native-certs's own reason: the file it could not read.
            assert!(message.contains("no-such-file.pem"), "{message}");
        }
        let own = ClientTlsConfig::from_ca_pem(&Client::file("ca.pem")).unwrap();
        let channel = client.connect(client.endpoint("localhost", port, Some(own))).unwrap();
        assert_eq!(client.unary(&channel, 3).unwrap(), 3);
        child_test::done(TEST);
        return;
    }
    let fixture = Fixture::new();
    fixture.child(TEST, &fixture.empty_dir.join("no-such-file.pem"), fixture.empty_dir.as_os_str());
}

/// The warnings the child's logger saw from spindle-grpc.
static CAPTURE: Capture = Capture::new("spindle_grpc");

/// A directory in `SSL_CERT_DIR` that does not exist, beside the CA in `SSL_CERT_FILE`: the CA
/// is used and the unreadable part logged once, although four channels connect at once.
#[test]
fn a_partial_load_goes_on_and_warns_once() {
    const TEST: &str = "a_partial_load_goes_on_and_warns_once";
    if child_test::role().is_some() {
        log::set_logger(&CAPTURE).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
        let client = Client::new();
        let port = Client::port(PORT);
        let endpoints: Vec<Endpoint> = (0..4).map(|_| client.endpoint("localhost", port, None)).collect();
        let channels = client.rt.block_on(move || {
            let fibers: Vec<_> = endpoints
                .into_iter()
                .map(|endpoint| spindle::spawn(move || spindle::task::block_on(endpoint.connect())))
                .collect();
            fibers.into_iter().map(|f| f.join().unwrap().unwrap()).collect::<Vec<_>>()
        });
        for channel in &channels {
            assert_eq!(client.unary(channel, 2).unwrap(), 2);
        }
        let warnings = CAPTURE.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("no-such-dir"), "{warnings:?}");
        child_test::done(TEST);
        return;
    }
    let fixture = Fixture::new();
    let dirs =
        std::env::join_paths([fixture.empty_dir.clone(), fixture.empty_dir.join("no-such-dir")]).unwrap();
    fixture.child(TEST, &fixture.file("ca.pem"), &dirs);
}
