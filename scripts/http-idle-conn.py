#!/usr/bin/env python3
"""Memory of an idle keep-alive HTTP/1.1 connection, server side: resident bytes per connection.

Starts the server command with PORT and WORKERS in its environment, opens and closes a warm-up
batch (so that allocator arenas, pools and the accept path exist), then opens N connections,
sends one `GET /` on each and reads its response, and compares the server's VmRSS before and
after. The connections stay open and idle while it is read. Each round is a fresh server
process; the median and the spread of the rounds are printed.

    python3 scripts/http-idle-conn.py [-n 2000] [--rounds 5] [--workers 1] -- SERVER ARGS...

For example, the tournament's http peers (bench/peers/rust, cargo build --release):

    python3 scripts/http-idle-conn.py -- bench/peers/rust/target/release/http-peer --server spindle
    python3 scripts/http-idle-conn.py -- bench/peers/rust/target/release/http-peer --single current
"""

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

REQUEST = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def connect(port, deadline):
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port))
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def read_response(conn):
    """Reads one response with a Content-Length body (the hello servers send one)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(4096)
        if not chunk:
            raise RuntimeError("the server closed the connection before answering")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(4096)
        if not chunk:
            raise RuntimeError("the server closed the connection inside a body")
        body += chunk


def one_round(cmd, n, workers):
    port = free_port()
    env = dict(os.environ, PORT=str(port), WORKERS=str(workers))
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conns = []
    try:
        deadline = time.monotonic() + 20
        connect(port, deadline).close()
        warm = []
        for _ in range(200):
            c = connect(port, deadline)
            c.sendall(REQUEST)
            read_response(c)
            warm.append(c)
        for c in warm:
            c.close()
        time.sleep(0.5)
        before = rss(server.pid)
        for _ in range(n):
            c = connect(port, deadline)
            c.sendall(REQUEST)
            conns.append(c)
        for c in conns:
            read_response(c)
        time.sleep(0.5)
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}")
        return (rss(server.pid) - before) / n
    finally:
        for c in conns:
            c.close()
        server.kill()
        server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=2000, help="idle connections (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="fresh server processes (default 5)")
    parser.add_argument("--workers", type=int, default=1, help="WORKERS for the server (default 1)")
    parser.add_argument("cmd", nargs="+", help="the server command")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2 * args.n + 500:
        sys.exit(f"need {2 * args.n + 500} open files, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    per_conn = [one_round(args.cmd, args.n, args.workers) for _ in range(args.rounds)]
    print(
        f"{' '.join(args.cmd)}: {statistics.median(per_conn):.0f} bytes per idle connection "
        f"(median of {args.rounds}, {min(per_conn):.0f}..{max(per_conn):.0f}; n = {args.n}, "
        f"WORKERS={args.workers})"
    )


if __name__ == "__main__":
    main()
