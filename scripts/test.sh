#!/usr/bin/env bash
# The test command: formatting, lints, every test, the examples, gRPC interop with grpc-go, the
# loom models, ASan over spindle's tests and a smoke run of the
# tournament (--quick: every suite in seconds; peers that are not installed get a row saying
# why). Run from anywhere: `bash scripts/test.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets --all-features -- -D warnings"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "cargo test --all-features"
cargo test --workspace --all-features

step "examples: net, signals and shutdown, the tokio bridge (each runs on 127.0.0.1 and exits)"
cargo run -q -p spindle --example net_connect
cargo run -q -p spindle --example graceful_shutdown
cargo run -q -p spindle --features tokio-compat --example tokio_compat

step "gRPC interop with grpc-go (scripts/grpc-interop.sh)"
bash scripts/grpc-interop.sh

step "loom models (RUSTFLAGS=--cfg spindle_loom; not plain loom, which tokio in the dev-dependencies also reads)"
RUSTFLAGS="--cfg spindle_loom" CARGO_TARGET_DIR=target/loom cargo test -p spindle --lib --release loom

step "tournament smoke test (--quick --no-install)"
cargo run --release -p tournament -- --quick --no-install --no-progress --out target/tournament-smoke
report=target/tournament-smoke/REPORT.md
for section in "## Machine" "## Summary" "## fibers" "## tcp" "## http" "## rpc"; do
    grep -q "^$section" "$report" || { echo "smoke test: $report lacks '$section'" >&2; exit 1; }
done
grep -q '"competitor":"spindle"' target/tournament-smoke/results.jsonl \
    || { echo "smoke test: no spindle results in results.jsonl" >&2; exit 1; }
ls target/tournament-smoke/charts/*.svg >/dev/null \
    || { echo "smoke test: no charts were written" >&2; exit 1; }

if rustup target list --installed 2>/dev/null | grep -q aarch64-unknown-linux-gnu; then
    step "aarch64 cross-check (cargo check --target aarch64-unknown-linux-gnu)"
    cargo check -p spindle --target aarch64-unknown-linux-gnu --lib --tests
fi

step "sanitizers: spindle's tests under ASan (scripts/sanitizers.sh asan, nightly -Zbuild-std)"
# TSan (`bash scripts/sanitizers.sh tsan`) passed over spindle's tests as they were before the
# signal/shutdown/compat/sync-primitive tests landed; it joins CI once it has passed with them.
bash scripts/sanitizers.sh asan
