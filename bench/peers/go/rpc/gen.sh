#!/bin/sh
# Regenerates benchpb/ from ../../proto/bench.proto. The generated files are committed so that
# building the peer needs only the Go toolchain. Needs protoc and
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@latest
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@latest
set -e
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
M=Mbench.proto=rpcpeer/benchpb
protoc -I ../../proto \
  --go_out=benchpb --go_opt=paths=source_relative --go_opt=$M \
  --go-grpc_out=benchpb --go-grpc_opt=paths=source_relative --go-grpc_opt=$M \
  bench.proto
