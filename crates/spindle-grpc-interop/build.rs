//! Generates the TestService client and server from proto/test.proto, parsed by protox (no
//! system protoc needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/test.proto");
    let fds = protox::compile(["test.proto"], ["proto"])?;
    // `bytes` fields as bytes::Bytes, so that the tests can count live payload buffers.
    tonic_prost_build::configure().build_transport(false).bytes(".spindle.interop").compile_fds(fds)?;
    Ok(())
}
