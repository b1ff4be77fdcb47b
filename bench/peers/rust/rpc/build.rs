//! Generates the Bench client and server from the suite's shared service definition, with
//! spindle-grpc-build: tonic's generated client and server exactly as tonic-prost-build writes
//! them (the tonic rows use those), plus spindle-grpc's typed fast path beside them (the
//! `spindle-grpc-typed` row). protoc comes from $PROTOC or PATH (Debian: protobuf-compiler).

fn main() -> std::io::Result<()> {
    spindle_grpc_build::configure()
        // `bytes` fields as bytes::Bytes: the client can resend one payload without copying it
        // (a refcount bump, as Go resends the same []byte), and decoding can share the buffer.
        .bytes(".spindle.bench")
        .compile_protos(&["../../proto/bench.proto"], &["../../proto"])
}
