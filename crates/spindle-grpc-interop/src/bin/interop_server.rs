//! The gRPC interop server on spindle-grpc: `grpc.testing.TestService` over HTTP/2 on
//! loopback TCP, for the official interop clients (`interop_server --port 10000`).

use spindle_grpc_interop::grpc_testing::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::grpc_testing::InteropService;
use spindle_grpc_interop::EchoMetadata;

fn main() {
    let flags =
        match spindle_grpc_interop::args::parse(std::env::args().skip(1), &["port", "use_tls", "host"]) {
            Ok(flags) => flags,
            Err(e) => {
                eprintln!("interop_server: {e}\nusage: interop_server --port N [--host 127.0.0.1]");
                std::process::exit(2);
            }
        };
    if flags.get("use_tls").is_some_and(|v| v != "false") {
        eprintln!("interop_server: TLS is not supported (--use_tls=false)");
        std::process::exit(2);
    }
    let port: u16 = match flags.get("port").map(|p| p.parse()) {
        Some(Ok(port)) => port,
        None => 10000,
        Some(Err(e)) => {
            eprintln!("interop_server: bad --port: {e}");
            std::process::exit(2);
        }
    };
    let host = flags.get("host").cloned().unwrap_or_else(|| "127.0.0.1".into());
    let rt = spindle::Builder::new().worker_threads(1).build().expect("a spindle runtime");
    rt.block_on(move || {
        let service = InteropService::new(|d| Box::pin(spindle::time::sleep_future(d)));
        let channel = spindle_grpc::Channel::new().add_service(EchoMetadata(TestServiceServer::new(service)));
        let listener = match spindle::net::TcpListener::bind((host.as_str(), port)) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("interop_server: binding {host}:{port}: {e}");
                std::process::exit(1);
            }
        };
        let serving = spindle_grpc::Server::new(channel).serve_tcp(listener).expect("serving");
        eprintln!("interop_server: serving grpc.testing.TestService on {}", serving.local_addr().unwrap());
        loop {
            spindle::time::sleep(std::time::Duration::from_secs(3600));
        }
    });
}
