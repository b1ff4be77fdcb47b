//! Generates the Bench client and server from the suite's shared service definition.
//! protoc comes from $PROTOC or PATH (Debian: protobuf-compiler).

fn main() -> std::io::Result<()> {
    tonic_prost_build::configure()
        // `bytes` fields as bytes::Bytes: the client can resend one payload without copying it
        // (a refcount bump, as Go resends the same []byte), and decoding can share the buffer.
        .bytes(".spindle.bench")
        .compile_protos(&["../../proto/bench.proto"], &["../../proto"])
}
