//! The gRPC interop client on spindle-grpc: runs one interop case (or several, comma
//! separated, or `all`) against a `grpc.testing.TestService` server over HTTP/2; exit status 0
//! when every case passed.
//!
//! `interop_client --server_host 127.0.0.1 --server_port 10000 --test_case large_unary`
//! (over TLS: `--use_tls --ca_file PEM [--server_host_override NAME]`, grpc-go's flags)

use spindle_grpc_interop::cases;

fn main() {
    let known = [
        "server_host",
        "server_port",
        "test_case",
        "use_tls",
        "server_host_override",
        "use_test_ca",
        "ca_file",
    ];
    let flags = match spindle_grpc_interop::args::parse(std::env::args().skip(1), &known) {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!(
                "interop_client: {e}\nusage: interop_client --server_host H --server_port P --test_case NAME[,NAME|all] \
                 [--use_tls --ca_file PEM [--server_host_override NAME]]"
            );
            std::process::exit(2);
        }
    };
    // TLS with grpc-go's flags: the server's certificate must chain to --ca_file (system roots
    // are not loaded) and name --server_host_override, else --server_host.
    let tls = if flags.get("use_tls").is_some_and(|v| v != "false") {
        let Some(ca_file) = flags.get("ca_file") else {
            eprintln!("interop_client: --use_tls needs --ca_file (the authority to trust)");
            std::process::exit(2);
        };
        let config = std::fs::read(ca_file).and_then(|pem| spindle_grpc::ClientTlsConfig::from_ca_pem(&pem));
        match config {
            Ok(config) => Some(match flags.get("server_host_override") {
                Some(name) => config.domain_name(name.clone()),
                None => config,
            }),
            Err(e) => {
                eprintln!("interop_client: TLS: {ca_file}: {e}");
                std::process::exit(2);
            }
        }
    } else {
        None
    };
    let host = flags.get("server_host").cloned().unwrap_or_else(|| "127.0.0.1".into());
    let port = flags.get("server_port").cloned().unwrap_or_else(|| "10000".into());
    let names = flags.get("test_case").cloned().unwrap_or_else(|| "large_unary".into());
    let names: Vec<String> = if names == "all" {
        cases::CASES.iter().map(|s| s.to_string()).collect()
    } else {
        names.split(',').map(str::to_string).collect()
    };
    let host = if host.contains(':') { format!("[{host}]") } else { host };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let uri = format!("{scheme}://{host}:{port}");
    let rt = spindle::Builder::new().worker_threads(1).build().expect("a spindle runtime");
    let failed = rt.block_on(move || {
        let endpoint = match spindle_grpc::Endpoint::new(&uri) {
            Ok(e) => match tls {
                Some(tls) => e.tls(tls),
                None => e,
            },
            Err(e) => {
                eprintln!("interop_client: {e}");
                std::process::exit(2);
            }
        };
        let channel = match spindle::task::block_on(endpoint.connect()) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("interop_client: connecting to {uri}: {e}");
                std::process::exit(1);
            }
        };
        let mut failed = 0;
        for name in &names {
            let sleep: spindle_grpc_interop::SleepFn = |d| Box::pin(spindle::time::sleep_future(d));
            match spindle::task::block_on(cases::run(name, channel.clone(), sleep)) {
                Ok(()) => println!("{name}: PASS"),
                Err(e) => {
                    println!("{name}: FAIL: {e}");
                    failed += 1;
                }
            }
        }
        failed
    });
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
