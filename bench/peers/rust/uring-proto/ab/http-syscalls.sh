#!/usr/bin/env bash
# Syscalls per request of each hello server of the io_uring A/B under the hello_1w load
# (server on CPU 0, `wrk -t1 -c64` on CPU 1), counted with perf's syscall tracepoints on the
# server process; the servers run interleaved, ROUNDS times each.
# Usage: http-syscalls.sh [ROUNDS] [SECONDS]   (from any directory; needs perf, wrk, taskset;
# build first: cargo build --release -p http-peer -p monoio-peer -p uring-proto in bench/peers/rust)
set -euo pipefail
rounds=${1:-3}
secs=${2:-5}
bin=$(cd "$(dirname "$0")/../../target/release" && pwd)
declare -A cmd=(
  [spindle]="$bin/http-peer --server spindle --no-header-timeout"
  [monoio]="$bin/monoio-http"
  [proto-epoll]="$bin/uring-proto http --backend epoll"
  [proto-uring]="$bin/uring-proto http --backend uring"
  [proto-uring-multi]="$bin/uring-proto http --backend uring-multi"
)
order=(spindle monoio proto-epoll proto-uring proto-uring-multi)
events="raw_syscalls:sys_enter,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_writev"
port=18700
for r in $(seq "$rounds"); do
  for name in "${order[@]}"; do
    port=$((port + 1))
    PORT=$port WORKERS=1 taskset -c 0 ${cmd[$name]} 2>/dev/null &
    pid=$!
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
    taskset -c 1 wrk -t1 -c64 -d1s http://127.0.0.1:$port/ >/dev/null
    perf stat -x, -e "$events" -p "$pid" -o /tmp/http-syscalls.$$ -- sleep "$secs" &
    perf_pid=$!
    out=$(taskset -c 1 wrk -t1 -c64 -d"${secs}s" http://127.0.0.1:$port/)
    wait $perf_pid
    kill $pid; wait $pid 2>/dev/null || true
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    awk -F, -v name="$name" -v reqs="$reqs" -v rps="$rps" -v round="$r" '
      $3 ~ /sys_enter/ { n = $3; sub(/.*sys_enter_?/, "", n); if (n == "") n = "all"; c[n] = $1 }
      END {
        printf "round %d %-18s %8.0f req/s  syscalls/req %.2f  (", round, name, rps, c["all"] / reqs
        split("io_uring_enter epoll_wait recvfrom sendto read write writev", k, " ")
        for (i = 1; i <= 7; i++) if (c[k[i]] > 0) printf " %s %.2f", k[i], c[k[i]] / reqs
        print " )"
      }' /tmp/http-syscalls.$$
  done
done
rm -f /tmp/http-syscalls.$$
