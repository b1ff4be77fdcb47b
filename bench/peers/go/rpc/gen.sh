#!/bin/sh
# Regenerates benchpb/ from ../../proto/bench.proto. The generated files are committed so that
# building the peer needs only the Go toolchain. Needs protoc (Debian: protobuf-compiler) and
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
# These versions with protoc 3.21.12 (Debian 12) reproduce the committed files byte for byte
# (other versions differ at least in the version comments at the top of each file).
set -e
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
M=Mbench.proto=rpcpeer/benchpb
protoc -I ../../proto \
  --go_out=benchpb --go_opt=paths=source_relative --go_opt=$M \
  --go-grpc_out=benchpb --go-grpc_opt=paths=source_relative --go-grpc_opt=$M \
  bench.proto
