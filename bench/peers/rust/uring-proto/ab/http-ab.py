#!/usr/bin/env python3
"""The hello_1w shape of the io_uring A/B (issue 17 item 4), interleaved: each server with
WORKERS=1 pinned to CPU 0, `wrk -t1 -c64` pinned to CPU 1 (1 s warm-up, then SECONDS
measured), and over the measured seconds perf counts the server's task-clock and syscalls.
Prints req/s, CPU us per request and syscalls per request (with the main ones split out):
median and min-max of ROUNDS.

Usage: [AB_SERVERS=spindle,may-minihttp,...] http-ab.py [ROUNDS] [SECONDS]
Build first, in bench/peers/rust: cargo build --release -p http-peer -p monoio-peer -p uring-proto
"""
import os, socket, statistics, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
rel = os.path.normpath(os.path.join(here, "../../target/release"))
SERVERS = {
    "spindle": [f"{rel}/http-peer", "--server", "spindle", "--no-header-timeout"],
    "spindle-hyper": ["env", "SPINDLE_HTTP_FAST_PATH=0", f"{rel}/http-peer", "--server", "spindle", "--no-header-timeout"],
    "spindle-async": ["env", "SPINDLE_HTTP_HANDLER=async", f"{rel}/http-peer", "--server", "spindle", "--no-header-timeout"],
    "h1-proto-fiber": [f"{rel}/h1-proto", "--handler", "fiber"],
    "h1-proto-inline": [f"{rel}/h1-proto", "--handler", "inline"],
    "monoio": [f"{rel}/monoio-http"],
    "may-minihttp": [f"{rel}/may-http"],
    "tokio-hyper": [f"{rel}/http-peer", "--server", "tokio", "--single", "current"],
    "proto-epoll": [f"{rel}/uring-proto", "http", "--backend", "epoll"],
    "proto-uring": [f"{rel}/uring-proto", "http", "--backend", "uring"],
    "proto-uring-multi": [f"{rel}/uring-proto", "http", "--backend", "uring-multi"],
    "proto-uring-multi-defer": [f"{rel}/uring-proto", "http", "--backend", "uring-multi-defer"],
}
# AB_SERVERS=name,name,... runs only those (default: all).
if os.environ.get("AB_SERVERS"):
    SERVERS = {n: SERVERS[n] for n in os.environ["AB_SERVERS"].split(",")}
SPLIT = ["io_uring_enter", "epoll_wait", "recvfrom", "sendto", "read", "write", "writev"]
EVENTS = ["task-clock", "raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{s}" for s in SPLIT]

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p

def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} never accepted")

def wrk(port, secs):
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c64", f"-d{secs}s",
                          f"http://127.0.0.1:{port}/"], capture_output=True, text=True, check=True).stdout
    reqs = next(int(l.split()[0]) for l in out.splitlines() if "requests in" in l)
    return reqs, reqs / secs

def one(cmd, secs):
    port = free_port()
    env = dict(os.environ, PORT=str(port), WORKERS="1")
    srv = subprocess.Popen(["taskset", "-c", "0"] + cmd, env=env, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        wrk(port, 1)
        perf = subprocess.Popen(["perf", "stat", "-x,", "-e", ",".join(EVENTS), "-p", str(srv.pid),
                                 "--", "sleep", str(secs)], stderr=subprocess.PIPE, text=True)
        reqs, rps = wrk(port, secs)
        _, err = perf.communicate()
    finally:
        srv.terminate()
        srv.wait()
    stat = {}
    for line in err.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].replace(".", "").isdigit():
            stat[f[2]] = float(f[0])
    row = {"req/s": rps, "cpu_us": stat["task-clock"] * 1e3 / reqs,
           "sys": stat["raw_syscalls:sys_enter"] / reqs}
    for s in SPLIT:
        row[s] = stat.get(f"syscalls:sys_enter_{s}", 0.0) / reqs
    return row

def fmt(xs, digits=0):
    return f"{statistics.median(xs):,.{digits}f} ({min(xs):,.{digits}f}-{max(xs):,.{digits}f})"

def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    secs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    res = {n: [] for n in SERVERS}
    for r in range(rounds):
        for name, cmd in SERVERS.items():
            res[name].append(one(cmd, secs))
        print(f"round {r + 1} done", file=sys.stderr)
    print(f"hello_1w shape ({rounds} interleaved rounds of {secs} s): median (min-max)")
    print("| server | req/s | CPU us/req | syscalls/req | of which |\n| --- | ---: | ---: | ---: | --- |")
    for name, rows in res.items():
        split = ", ".join(f"{s} {statistics.median(r[s] for r in rows):.2f}"
                          for s in SPLIT if statistics.median(r[s] for r in rows) >= 0.01)
        print(f"| {name} | {fmt([r['req/s'] for r in rows])} | {fmt([r['cpu_us'] for r in rows], 2)} "
              f"| {fmt([r['sys'] for r in rows], 2)} | {split} |")

main()
