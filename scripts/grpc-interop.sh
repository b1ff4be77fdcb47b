#!/usr/bin/env bash
# gRPC interop with a peer no one here wrote: grpc-go's official interop client and server
# (google.golang.org/grpc/interop/{client,server}, installed through the Go module proxy)
# against spindle-grpc's interop_server and interop_client, every case both ways, over
# loopback TCP, then again over TLS (a CA and a server certificate for "localhost" made here
# with openssl; grpc-go's --use_tls flags). Skips (exit 0, with a message) only when Go is
# absent.
#
# The gzip cases (COMPRESSION_CASES) have no grpc-go peer: grpc-go's interop client (v1.85.0)
# does not implement them ("Unsupported test case"), and its interop server links no gzip codec
# and ignores expect_compressed / response_compressed. So grpc-go's client is tried on each (a
# case it does not know is reported SKIP, one it knows must pass: a later grpc-go that adds them
# is run), spindle-grpc's interop_client is not run against grpc-go's server on them, and they
# run interop_client -> interop_server instead, plain and over TLS, marked "spindle->spindle".
#
#   bash scripts/grpc-interop.sh            # uses target/ (or $CARGO_TARGET_DIR)
#   GRPC_GO_VERSION=v1.85.0 GOBIN=/some/dir bash scripts/grpc-interop.sh
set -euo pipefail
cd "$(dirname "$0")/.."

CASES="empty_unary large_unary client_streaming server_streaming ping_pong empty_stream custom_metadata
status_code_and_message special_status_message unimplemented_method unimplemented_service
cancel_after_begin cancel_after_first_response timeout_on_sleeping_server"
COMPRESSION_CASES="client_compressed_unary server_compressed_unary"
VERSION="${GRPC_GO_VERSION:-v1.85.0}"
TARGET="${CARGO_TARGET_DIR:-target}"
case "$TARGET" in /*) ;; *) TARGET="$PWD/$TARGET" ;; esac
export GOBIN="${GOBIN:-$TARGET/grpc-go-interop-$VERSION}"

if ! command -v go >/dev/null 2>&1; then
    echo "grpc-interop: SKIPPED: no Go toolchain on PATH (grpc-go's interop programs need one)"
    exit 0
fi

if [ ! -x "$GOBIN/client" ] || [ ! -x "$GOBIN/server" ]; then
    echo "grpc-interop: installing grpc-go $VERSION interop client and server into $GOBIN"
    (cd /tmp && go install "google.golang.org/grpc/interop/client@$VERSION" "google.golang.org/grpc/interop/server@$VERSION")
fi

cargo build --release -p spindle-grpc-interop --bins
BIN="$TARGET/release"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# A free loopback port (bind to 0 and read what the kernel chose).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "grpc-interop: nothing listens on 127.0.0.1:$1" >&2
    return 1
}

failed=0 passed=0 skipped=0
run_case() { # direction case command...
    local dir="$1" case="$2"; shift 2
    if timeout 60 "$@" >"$log" 2>&1; then
        echo "  PASS $dir $case"
        passed=$((passed + 1))
    elif grep -q "Unsupported test case" "$log" && [[ " $COMPRESSION_CASES " == *" $case "* ]]; then
        echo "  SKIP $dir $case (grpc-go $VERSION's interop client does not implement it)"
        skipped=$((skipped + 1))
    else
        echo "  FAIL $dir $case"; sed 's/^/      /' "$log" | tail -n 20
        failed=$((failed + 1))
    fi
}
no_go_server() { # direction
    echo "  NOT RUN $1 $COMPRESSION_CASES (grpc-go's interop server has no gzip nor compression checks)"
}
log="$(mktemp)"

port="$(free_port)"
"$BIN/interop_server" --port "$port" 2>/dev/null &
pids+=($!)
wait_port "$port"
echo "grpc-interop: grpc-go client -> spindle-grpc interop_server (127.0.0.1:$port)"
for c in $CASES $COMPRESSION_CASES; do
    run_case "go->spindle" "$c" "$GOBIN/client" --server_host=127.0.0.1 --server_port="$port" --test_case="$c"
done
echo "grpc-interop: spindle-grpc interop_client -> spindle-grpc interop_server (127.0.0.1:$port)"
for c in $COMPRESSION_CASES; do
    run_case "spindle->spindle" "$c" "$BIN/interop_client" --server_host 127.0.0.1 --server_port "$port" \
        --test_case "$c"
done

port="$(free_port)"
"$GOBIN/server" --port="$port" 2>/dev/null &
pids+=($!)
wait_port "$port"
echo "grpc-interop: spindle-grpc interop_client -> grpc-go server (127.0.0.1:$port)"
for c in $CASES; do
    run_case "spindle->go" "$c" "$BIN/interop_client" --server_host 127.0.0.1 --server_port "$port" --test_case "$c"
done
no_go_server "spindle->go"

# TLS: a throwaway CA and a certificate for "localhost" it signs (EC P-256, two days).
tls="$(mktemp -d)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=spindle interop CA" -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
    -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost\n' >"$tls/ext.cnf"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
    -days 2 -extfile "$tls/ext.cnf" -out "$tls/server.pem" 2>/dev/null

port="$(free_port)"
"$BIN/interop_server" --port "$port" --use_tls --tls_cert_file "$tls/server.pem" --tls_key_file "$tls/server.key" 2>/dev/null &
pids+=($!)
wait_port "$port"
echo "grpc-interop: grpc-go client -> spindle-grpc interop_server over TLS (127.0.0.1:$port)"
for c in $CASES $COMPRESSION_CASES; do
    run_case "go->spindle tls" "$c" "$GOBIN/client" --server_host=127.0.0.1 --server_port="$port" --test_case="$c" \
        --use_tls=true --use_test_ca=true --ca_file="$tls/ca.pem" --server_host_override=localhost
done
echo "grpc-interop: spindle-grpc interop_client -> spindle-grpc interop_server over TLS (127.0.0.1:$port)"
for c in $COMPRESSION_CASES; do
    run_case "spindle->spindle tls" "$c" "$BIN/interop_client" --server_host 127.0.0.1 --server_port "$port" \
        --test_case "$c" --use_tls --ca_file "$tls/ca.pem" --server_host_override localhost
done

port="$(free_port)"
"$GOBIN/server" --port="$port" --use_tls=true --tls_cert_file="$tls/server.pem" --tls_key_file="$tls/server.key" 2>/dev/null &
pids+=($!)
wait_port "$port"
echo "grpc-interop: spindle-grpc interop_client -> grpc-go server over TLS (127.0.0.1:$port)"
for c in $CASES; do
    run_case "spindle->go tls" "$c" "$BIN/interop_client" --server_host 127.0.0.1 --server_port "$port" --test_case "$c" \
        --use_tls --ca_file "$tls/ca.pem" --server_host_override localhost
done
no_go_server "spindle->go tls"
rm -rf "$tls"
rm -f "$log"

if [ "$failed" -ne 0 ]; then
    echo "grpc-interop: $failed case(s) failed" >&2
    exit 1
fi
n_cases=$(echo $CASES | wc -w) n_gzip=$(echo $COMPRESSION_CASES | wc -w)
echo "grpc-interop: all cases passed ($passed passed, $skipped skipped): the $n_cases cases both ways with grpc-go," \
    "plain and over TLS; the $n_gzip gzip cases spindle->spindle only, plain and over TLS" \
    "(grpc-go $VERSION's interop programs lack them)"
