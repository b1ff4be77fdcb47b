#!/bin/bash
# User-space instructions per request of an HTTP server under wrk (the hello_1w shape, one
# worker): the server runs under valgrind's callgrind for the whole run, `wrk -t1 -c64 -d6s`
# loads it, and the total (startup included, a few per cent at most) is divided by wrk's
# request count. The profile stays in /tmp/cg.NAME.out for callgrind_annotate.
# usage: scripts/http-callgrind.sh NAME -- SERVER COMMAND...   (the server reads PORT)
name=$1; shift; shift
port=$((8200 + RANDOM % 500))
PORT=$port WORKERS=1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$name.out "$@" >/dev/null 2>/tmp/cg.$name.err &
pid=$!
for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$port/ && break; sleep 0.2; done
out=$(wrk -t1 -c64 -d6s http://127.0.0.1:$port/)
reqs=$(echo "$out" | awk '/requests in/ {print $1}')
kill -INT $pid; sleep 2; kill $pid 2>/dev/null; wait $pid 2>/dev/null
ir=$(grep -m1 "^summary:" /tmp/cg.$name.out | awk '{print $2}')
echo "$name reqs=$reqs Ir=$ir Ir/req=$((ir / reqs))"
