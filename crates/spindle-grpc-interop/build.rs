//! Generates the TestService clients and servers, parsed by protox (no system protoc needed),
//! with spindle-grpc-build (tonic's client and server, plus spindle-grpc's typed fast path):
//! spindle's conformance service (proto/test.proto, package spindle.interop), the gRPC interop
//! suite's (proto/grpc/testing, package grpc.testing), and the counted service
//! (proto/counted.proto, whose message type counts its encodings: `crate::counted`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(["test.proto"], ["proto"])?;
    // `bytes` fields as bytes::Bytes, so that the tests can count live payload buffers.
    spindle_grpc_build::configure().build_transport(false).bytes(".spindle.interop").compile_fds(fds)?;
    let fds = protox::compile(["grpc/testing/test.proto"], ["proto"])?;
    spindle_grpc_build::configure().build_transport(false).bytes(".grpc.testing").compile_fds(fds)?;
    let fds = protox::compile(["counted.proto"], ["proto"])?;
    spindle_grpc_build::configure()
        .build_transport(false)
        .extern_path(".spindle.counted.Counted", "crate::counted::Counted")
        .compile_fds(fds)?;
    Ok(())
}
