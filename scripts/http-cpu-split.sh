#!/bin/bash
# The server's user and system CPU time per request under wrk, the hello_1w shape: the
# server (WORKERS=1) pinned to CPU 0, `wrk -t1 -c64` pinned to CPU 1, 1 s of warm-up, then
# utime and stime from /proc/PID/stat over 5 s of load, divided by wrk's request count.
# usage: scripts/http-cpu-split.sh NAME -- SERVER COMMAND...   (the server reads PORT)
# e.g.   scripts/http-cpu-split.sh spindle -- bench/peers/rust/target/release/http-peer --server spindle
name=$1; shift; shift
port=$((9000 + RANDOM % 500))
PORT=$port WORKERS=1 taskset -c 0 "$@" >/dev/null 2>&1 &
pid=$!
for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$port/ && break; sleep 0.1; done
taskset -c 1 wrk -t1 -c64 -d1s http://127.0.0.1:$port/ >/dev/null
read u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat)
out=$(taskset -c 1 wrk -t1 -c64 -d5s http://127.0.0.1:$port/)
read u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat)
reqs=$(echo "$out" | awk '/requests in/ {print $1}')
kill $pid; wait $pid 2>/dev/null
python3 -c "
u=($u1-$u0)*1e4/$reqs; s=($s1-$s0)*1e4/$reqs
print(f'$name req/s={$reqs/5:.0f} user={u:.2f} sys={s:.2f} total={u+s:.2f} us/req')"
