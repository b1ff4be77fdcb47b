//! Generates the TestService clients and servers, parsed by protox (no system protoc needed):
//! spindle's conformance service (proto/test.proto, package spindle.interop) and the gRPC
//! interop suite's (proto/grpc/testing, package grpc.testing).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(["test.proto"], ["proto"])?;
    // `bytes` fields as bytes::Bytes, so that the tests can count live payload buffers.
    tonic_prost_build::configure().build_transport(false).bytes(".spindle.interop").compile_fds(fds)?;
    let fds = protox::compile(["grpc/testing/test.proto"], ["proto"])?;
    tonic_prost_build::configure().build_transport(false).bytes(".grpc.testing").compile_fds(fds)?;
    Ok(())
}
