//! The gRPC interop server on spindle-grpc: `grpc.testing.TestService` over HTTP/2 on
//! loopback TCP, for the official interop clients (`interop_server --port 10000`; over TLS
//! with `--use_tls --tls_cert_file PEM --tls_key_file PEM`, grpc-go's flags). It reads gzip and
//! answers with it where a request asks (`grpc_testing::server`).

use spindle_grpc_interop::grpc_testing::{self, InteropService};

fn main() {
    let known = ["port", "use_tls", "host", "tls_cert_file", "tls_key_file", "server_id", "unavailable_file"];
    let flags = match spindle_grpc_interop::args::parse(std::env::args().skip(1), &known) {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!(
                "interop_server: {e}\nusage: interop_server --port N [--host 127.0.0.1] \
                 [--use_tls --tls_cert_file PEM --tls_key_file PEM] [--server_id ID] \
                 [--unavailable_file PATH]"
            );
            std::process::exit(2);
        }
    };
    // TLS with grpc-go's flags; the certificate and key are the caller's (no test ones are
    // built in).
    let tls = if flags.get("use_tls").is_some_and(|v| v != "false") {
        let (Some(cert), Some(key)) = (flags.get("tls_cert_file"), flags.get("tls_key_file")) else {
            eprintln!("interop_server: --use_tls needs --tls_cert_file and --tls_key_file");
            std::process::exit(2);
        };
        match spindle_grpc::ServerTlsConfig::from_pem_files(cert, key) {
            Ok(config) => Some(config),
            Err(e) => {
                eprintln!("interop_server: TLS: {e}");
                std::process::exit(2);
            }
        }
    } else {
        None
    };
    let port: u16 = match flags.get("port").map(|p| p.parse()) {
        Some(Ok(port)) => port,
        None => 10000,
        Some(Err(e)) => {
            eprintln!("interop_server: bad --port: {e}");
            std::process::exit(2);
        }
    };
    let host = flags.get("host").cloned().unwrap_or_else(|| "127.0.0.1".into());
    // Test hooks of the cluster tests (not interop flags): every response names this server
    // (`x-server-id`), and while the file exists every call is answered UNAVAILABLE.
    let tag = Tag {
        id: flags
            .get("server_id")
            .map(|id| http::HeaderValue::from_str(id).expect("a header-safe --server_id")),
        unavailable: flags.get("unavailable_file").map(std::path::PathBuf::from),
    };
    let rt = spindle::Builder::new().worker_threads(1).build().expect("a spindle runtime");
    rt.block_on(move || {
        let service = InteropService::new(|d| Box::pin(spindle::time::sleep_future(d)));
        let channel = spindle_grpc::Channel::new().add_service(grpc_testing::server(service));
        let listener = match spindle::net::TcpListener::bind((host.as_str(), port)) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("interop_server: binding {host}:{port}: {e}");
                std::process::exit(1);
            }
        };
        let mut server = spindle_grpc::Server::new(channel);
        if tag.id.is_some() || tag.unavailable.is_some() {
            server = server.layer(tower_layer::layer_fn(move |inner| Tagged { inner, tag: tag.clone() }));
        }
        if let Some(tls) = tls {
            server = server.tls(tls);
        }
        let serving = server.serve_tcp(listener).expect("serving");
        eprintln!("interop_server: serving grpc.testing.TestService on {}", serving.local_addr().unwrap());
        loop {
            spindle::time::sleep(std::time::Duration::from_secs(3600));
        }
    });
}

/// The cluster tests' hooks (see `main`).
#[derive(Clone)]
struct Tag {
    id: Option<http::HeaderValue>,
    unavailable: Option<std::path::PathBuf>,
}

/// The server's routes with [`Tag`]'s hooks.
#[derive(Clone)]
struct Tagged<S> {
    inner: S,
    tag: Tag,
}

type Body = tonic::body::Body;

impl<S> tower_service::Service<http::Request<Body>> for Tagged<S>
where
    S: tower_service::Service<http::Request<Body>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let id = self.tag.id.clone();
        let tagged = move |mut response: http::Response<Body>| {
            if let Some(id) = id {
                response.headers_mut().insert("x-server-id", id);
            }
            response
        };
        if self.tag.unavailable.as_ref().is_some_and(|path| path.exists()) {
            let response =
                tonic::Status::unavailable("interop_server: unavailable (--unavailable_file exists)")
                    .into_http();
            return Box::pin(std::future::ready(Ok(tagged(response))));
        }
        let call = self.inner.call(request);
        Box::pin(async move { call.await.map(tagged) })
    }
}
