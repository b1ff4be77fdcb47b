#!/usr/bin/env python3
"""The tcp cases of the io_uring A/B (issue 17 item 4), interleaved, with three figures each:
wall-clock ns per op (the suite's own figure), CPU ns per op (the process's task-clock over
warm-up + timed ops, which other load on the machine disturbs less) and syscalls per op
(perf's raw_syscalls:sys_enter tracepoint over the same ops). Median and min-max of ROUNDS.

Usage: [AB_SERVERS=spindle,c-syscalls,...] tcp-ab.py [ROUNDS] [CPU]   (CPU: pin every program to this CPU, default 1)
Build first, in bench/peers/rust: cargo build --release -p tcp-peer -p monoio-peer -p uring-proto
(and bench/peers/c/bin/tcp: gcc -O2 -pthread -o bench/peers/c/bin/tcp bench/peers/c/tcp.c).
"""
import json, os, statistics, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
rel = os.path.normpath(os.path.join(here, "../../target/release"))
ctcp = os.path.normpath(os.path.join(here, "../../../c/bin/tcp"))
COMPETITORS = {
    "c-syscalls": [ctcp],
    "spindle": [f"{rel}/tcp-peer", "--mode", "spindle"],
    "spindle-local": [f"{rel}/tcp-peer", "--mode", "spindle", "--flavor", "local"],
    "monoio": [f"{rel}/monoio-tcp"],
    "proto-epoll": [f"{rel}/uring-proto", "tcp", "--backend", "epoll"],
    "proto-uring": [f"{rel}/uring-proto", "tcp", "--backend", "uring"],
    "proto-uring-multi": [f"{rel}/uring-proto", "tcp", "--backend", "uring-multi"],
    "proto-uring-defer": [f"{rel}/uring-proto", "tcp", "--backend", "uring-defer"],
    "proto-uring-multi-defer": [f"{rel}/uring-proto", "tcp", "--backend", "uring-multi-defer"],
}
# AB_SERVERS=name,name,... runs only those (default: all).
if os.environ.get("AB_SERVERS"):
    COMPETITORS = {n: COMPETITORS[n] for n in os.environ["AB_SERVERS"].split(",")}
# Warm-up + timed ops of each case (bench/peers/README.md, full counts).
OPS = {"accept_connect": 500 + 5000, "pingpong": 1000 + 20000}

def one(cmd, case, cpu):
    out = subprocess.run(
        ["perf", "stat", "-x,", "-e", "task-clock,raw_syscalls:sys_enter", "-o", "/dev/stderr",
         "taskset", "-c", str(cpu)] + cmd + ["--case", case],
        capture_output=True, text=True, check=True)
    wall = next(json.loads(l)["value"] for l in out.stdout.splitlines() if l.startswith("{"))
    stat = {}
    for line in out.stderr.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].replace(".", "").isdigit():
            stat[f[2]] = float(f[0])
    cpu_ns = stat["task-clock"] * 1e6 / OPS[case]  # task-clock is in ms
    sys_per_op = stat["raw_syscalls:sys_enter"] / OPS[case]
    return wall, cpu_ns, sys_per_op

def fmt(xs, digits=0):
    m = statistics.median(xs)
    return f"{m:,.{digits}f} ({min(xs):,.{digits}f}-{max(xs):,.{digits}f})"

def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    cpu = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    res = {(n, c): [] for n in COMPETITORS for c in OPS}
    for r in range(rounds + 1):  # round 0 is a discarded warm-up
        for case in OPS:
            for name, cmd in COMPETITORS.items():
                x = one(cmd, case, cpu)
                if r > 0:
                    res[(name, case)].append(x)
        print(f"round {r} done", file=sys.stderr)
    for case in OPS:
        print(f"\n{case} ({rounds} interleaved rounds, pinned to CPU {cpu}): median (min-max)")
        print(f"| competitor | wall ns/op | CPU ns/op | syscalls/op |\n| --- | ---: | ---: | ---: |")
        for name in COMPETITORS:
            xs = res[(name, case)]
            print(f"| {name} | {fmt([x[0] for x in xs])} | {fmt([x[1] for x in xs])} | {fmt([x[2] for x in xs], 2)} |")

main()
