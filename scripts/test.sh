#!/usr/bin/env bash
# The test command: the real servers some tests need (PostgreSQL, redis-server: installed with
# apt as root when missing), formatting, lints (also of the Rust peers' workspace), the docs without a
# broken link, every test (with all features, spindle's libc hook among them, then spindle's
# again without it), the examples, gRPC interop with grpc-go, the loom models, a smoke
# run of the tournament (--quick: every suite in seconds; peers that are not installed get a
# row saying why), the aarch64 cross-check and spindle's tests under ASan and TSan.
# Also: no import circle in spindle-http and spindle-grpc, and in spindle only the one the
# layer rule allows and no import up a layer (scripts/import-cycles.py).
# Run from anywhere: `bash scripts/test.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "the real servers of tests/servers and the blocking suite (PostgreSQL, redis-server)"
# Installed with apt when missing and this runs as root (.ci/run installs them first); else
# the tests that need them fail and say which package is missing.
servers_apt=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || servers_apt+=(postgresql)
command -v redis-server >/dev/null 2>&1 || servers_apt+=(redis-server)
if [ "${#servers_apt[@]}" -eq 0 ]; then
    echo "installed"
elif [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${servers_apt[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${servers_apt[@]}" >/dev/null
else
    echo "missing ${servers_apt[*]} and cannot apt-get install them (not root or no apt-get): the tests of tests/servers will fail" >&2
fi

step "import circles: none in spindle-http and spindle-grpc; in spindle only the one between fiber and sched, and no import up a layer"
python3 scripts/import-cycles.py crates/spindle-http/src crates/spindle-grpc/src
python3 scripts/import-cycles.py --allow fiber,sched \
    --layers "sys,lock,loom,report,trace,error < fiber < sched,reactor < park,sync,blocking,services,shutdown,signal < net,time,task,hook,fs,process < runtime,compat,graceful,hyper_exec,hyper_rt,native_roots" \
    crates/spindle/src

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets --all-features -- -D warnings"
cargo clippy --workspace --all-targets --all-features -- -D warnings
step "cargo clippy --all-targets -- -D warnings (default features: code under cfg(not(feature)) too)"
cargo clippy --workspace --all-targets -- -D warnings

step "the Rust peers' own workspace (bench/peers/rust): fmt and clippy -D warnings"
(cd bench/peers/rust && cargo fmt --all --check && cargo clippy --workspace --all-targets -- -D warnings)

step "cargo doc --all-features (RUSTDOCFLAGS=-D warnings: no broken intra-doc link)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps

step "cargo test --all-features (spindle's hook feature on: std's blocking calls park the fibers of every test; tests/servers: the sync postgres, redis and ureq crates in fibers against real servers)"
cargo test --workspace --all-features

step "cargo test -p spindle (default features: std's blocking calls not hooked)"
cargo test -p spindle

step "examples: net, signals and shutdown, the tokio bridge (each runs on 127.0.0.1 and exits)"
cargo run -q -p spindle --example net_connect
cargo run -q -p spindle --example graceful_shutdown
cargo run -q -p spindle --features tokio-compat --example tokio_compat

step "examples: spindle-http's hello (HTTP/1.1 and h2c) fetched by fetch, and tls_hello (HTTPS, ALPN h2 and http/1.1)"
# Built first, so that the time limits below bound the runs, not the compilation.
cargo build -q -p spindle-http --features tls --examples
# expect_lines OUTPUT LINE...: each LINE is a whole line of OUTPUT, as often as it is given.
expect_lines() {
    local out=$1 line; shift
    for line in "$@"; do
        [ "$(grep -cxF -- "$line" <<<"$out")" -ge "$(printf '%s\n' "$@" | grep -cxF -- "$line")" ] \
            || { printf 'example output lacks "%s":\n%s\n' "$line" "$out" >&2; return 1; }
    done
}
hello_log=$(mktemp)
PORT=0 timeout 120 cargo run -q -p spindle-http --features tls --example hello 2>"$hello_log" &
hello_pid=$!
trap 'kill "$hello_pid" 2>/dev/null || true' EXIT
hello_addr=""
for _ in $(seq 300); do
    hello_addr=$(sed -n 's|^listening on http://\([0-9.:]*\) .*|\1|p' "$hello_log")
    [ -n "$hello_addr" ] && break
    kill -0 "$hello_pid" 2>/dev/null || break
    sleep 0.1
done
[ -n "$hello_addr" ] || { echo "hello did not start listening:" >&2; cat "$hello_log" >&2; exit 1; }
out=$(timeout 30 cargo run -q -p spindle-http --features tls --example fetch -- "http://$hello_addr/")
echo "$out"
expect_lines "$out" "HTTP/1.1 200 OK" "body: 13 bytes"
out=$(timeout 30 cargo run -q -p spindle-http --features tls --example fetch -- --http2 "http://$hello_addr/")
echo "$out"
expect_lines "$out" "HTTP/2.0 200 OK" "body: 13 bytes"
kill "$hello_pid"
wait "$hello_pid" || true
trap - EXIT
rm -f "$hello_log"
out=$(timeout 60 cargo run -q -p spindle-http --features tls --example tls_hello)
echo "$out"
expect_lines "$out" "HTTP/2.0 200 OK" "HTTP/1.1 200 OK" "body: 11 bytes" "body: 11 bytes"
if command -v openssl >/dev/null; then
    # The same from PEM files (a self-signed end-entity certificate for localhost).
    pem_dir=$(mktemp -d)
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost -addext basicConstraints=critical,CA:FALSE \
        -keyout "$pem_dir/key.pem" -out "$pem_dir/cert.pem" 2>/dev/null
    out=$(timeout 60 cargo run -q -p spindle-http --features tls --example tls_hello -- "$pem_dir/cert.pem" "$pem_dir/key.pem")
    echo "$out"
    expect_lines "$out" "HTTP/2.0 200 OK" "HTTP/1.1 200 OK" "body: 11 bytes" "body: 11 bytes"
    rm -r "$pem_dir"
else
    echo "openssl not installed: tls_hello from PEM files skipped (the rcgen run above covers TLS)"
fi

step "gRPC interop with grpc-go (scripts/grpc-interop.sh)"
bash scripts/grpc-interop.sh

step "loom models (RUSTFLAGS=--cfg spindle_loom; not plain loom, which tokio in the dev-dependencies also reads)"
RUSTFLAGS="--cfg spindle_loom -D warnings" CARGO_TARGET_DIR=target/loom cargo test -p spindle --lib --release loom

step "tournament smoke test (--quick --no-install)"
cargo run --release -p tournament -- --quick --no-install --no-progress --out target/tournament-smoke
report=target/tournament-smoke/REPORT.md
for section in "## Machine" "## Summary" "## fibers" "## tcp" "## http" "## rpc" "## blocking"; do
    grep -q "^$section" "$report" || { echo "smoke test: $report lacks '$section'" >&2; exit 1; }
done
grep -q '"competitor":"spindle"' target/tournament-smoke/results.jsonl \
    || { echo "smoke test: no spindle results in results.jsonl" >&2; exit 1; }
ls target/tournament-smoke/charts/*.svg >/dev/null \
    || { echo "smoke test: no charts were written" >&2; exit 1; }

if rustup target list --installed 2>/dev/null | grep -q aarch64-unknown-linux-gnu; then
    step "aarch64 cross-check (cargo check --target aarch64-unknown-linux-gnu, the hook included)"
    cargo check -p spindle --target aarch64-unknown-linux-gnu --features hook --lib --tests
fi

step "sanitizers: spindle's tests under ASan and TSan (scripts/sanitizers.sh, nightly -Zbuild-std)"
bash scripts/sanitizers.sh all
