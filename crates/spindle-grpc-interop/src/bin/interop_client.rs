//! The gRPC interop client on spindle-grpc: runs one interop case (or several, comma
//! separated, or `all`) against a `grpc.testing.TestService` server over HTTP/2; exit status 0
//! when every case passed.
//!
//! `interop_client --server_host 127.0.0.1 --server_port 10000 --test_case large_unary`

use spindle_grpc_interop::cases;

fn main() {
    let known = ["server_host", "server_port", "test_case", "use_tls", "server_host_override"];
    let flags = match spindle_grpc_interop::args::parse(std::env::args().skip(1), &known) {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!(
                "interop_client: {e}\nusage: interop_client --server_host H --server_port P --test_case NAME[,NAME|all]"
            );
            std::process::exit(2);
        }
    };
    if flags.get("use_tls").is_some_and(|v| v != "false") {
        eprintln!("interop_client: TLS is not supported (--use_tls=false)");
        std::process::exit(2);
    }
    let host = flags.get("server_host").cloned().unwrap_or_else(|| "127.0.0.1".into());
    let port = flags.get("server_port").cloned().unwrap_or_else(|| "10000".into());
    let names = flags.get("test_case").cloned().unwrap_or_else(|| "large_unary".into());
    let names: Vec<String> = if names == "all" {
        cases::CASES.iter().map(|s| s.to_string()).collect()
    } else {
        names.split(',').map(str::to_string).collect()
    };
    let host = if host.contains(':') { format!("[{host}]") } else { host };
    let uri = format!("http://{host}:{port}");
    let rt = spindle::Builder::new().worker_threads(1).build().expect("a spindle runtime");
    let failed = rt.block_on(move || {
        let endpoint = match spindle_grpc::Endpoint::new(&uri) {
            Ok(e) => e,
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
