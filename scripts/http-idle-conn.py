#!/usr/bin/env python3
"""Memory of an idle connection, server side: resident bytes per connection.

Starts the server command with PORT and WORKERS in its environment, opens and closes a warm-up
batch of connections brought to the measured state (so that allocator arenas, pools and the
accept path exist), then opens N connections, brings each to that state, and compares the
server's VmRSS before and after. The connections stay open and idle while it is read. Each
round is a fresh server process; the median and the spread of the rounds are printed.

The state (`--mode`):

- `h1` (default): kept alive after one HTTP/1.1 request (`GET /`, its response read);
- `silent`: connected, nothing sent yet (the server waits for the first byte);
- `h2c`: HTTP/2 by prior knowledge, after the preface and the SETTINGS exchange (the client's
  SETTINGS acknowledged by the server and the server's by the client), no stream opened.

`--tls` wraps each connection in TLS (ALPN `http/1.1` for `h1`, `h2` for `h2c`; the server's
certificate is not checked) for a server that serves HTTPS; `silent` sends no byte at all,
not even a ClientHello.

    python3 scripts/http-idle-conn.py [-n 2000] [--rounds 5] [--workers 1] [--mode h1|silent|h2c]
        [--tls] -- SERVER ARGS...

For example, the tournament's http peers (bench/peers/rust, cargo build --release):

    python3 scripts/http-idle-conn.py -- bench/peers/rust/target/release/http-peer --server spindle
    python3 scripts/http-idle-conn.py -- bench/peers/rust/target/release/http-peer --single current
"""

import argparse
import os
import resource
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import time

REQUEST = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_SETTINGS = 0x4
H2_ACK = 0x1


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


def recv_exact(conn, n, buf):
    while len(buf) < n:
        chunk = conn.recv(4096)
        if not chunk:
            raise RuntimeError("the server closed the connection during the HTTP/2 exchange")
        buf += chunk
    return buf


def h2_settings_exchange(conn):
    """Sends the preface and an empty SETTINGS frame; reads frames until the server's SETTINGS
    and its acknowledgement of ours have come, then acknowledges the server's."""
    conn.sendall(H2_PREFACE + struct.pack(">I", 0)[1:] + bytes([H2_SETTINGS, 0]) + struct.pack(">I", 0))
    buf = b""
    theirs = acked = False
    while not (theirs and acked):
        buf = recv_exact(conn, 9, buf)
        length = int.from_bytes(buf[:3], "big")
        kind, flags = buf[3], buf[4]
        buf = recv_exact(conn, 9 + length, buf)
        buf = buf[9 + length:]
        if kind == H2_SETTINGS:
            if flags & H2_ACK:
                acked = True
            else:
                theirs = True
    conn.sendall(struct.pack(">I", 0)[1:] + bytes([H2_SETTINGS, H2_ACK]) + struct.pack(">I", 0))


class Client:
    """Opens connections in the measured state (see the module doc)."""

    def __init__(self, port, mode, tls):
        self.port, self.mode = port, mode
        self.tls = None
        if tls and mode != "silent":
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            self.tls.check_hostname = False
            self.tls.verify_mode = ssl.CERT_NONE
            self.tls.set_alpn_protocols(["h2"] if mode == "h2c" else ["http/1.1"])

    def open(self, deadline):
        """A connection with its opening sent (the reply, if any, is read by `finish`)."""
        c = connect(self.port, deadline)
        if self.tls is not None:
            c = self.tls.wrap_socket(c, server_hostname="localhost")
        if self.mode == "h1":
            c.sendall(REQUEST)
        return c

    def finish(self, c):
        if self.mode == "h1":
            read_response(c)
        elif self.mode == "h2c":
            h2_settings_exchange(c)


def one_round(cmd, n, workers, mode, tls):
    port = free_port()
    env = dict(os.environ, PORT=str(port), WORKERS=str(workers))
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conns = []
    try:
        deadline = time.monotonic() + 20
        connect(port, deadline).close()
        client = Client(port, mode, tls)
        warm = []
        for _ in range(200):
            c = client.open(deadline)
            client.finish(c)
            warm.append(c)
        for c in warm:
            c.close()
        time.sleep(0.5)
        before = rss(server.pid)
        for _ in range(n):
            conns.append(client.open(deadline))
        for c in conns:
            client.finish(c)
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
    parser.add_argument("--mode", choices=["h1", "silent", "h2c"], default="h1", help="the idle state (default h1)")
    parser.add_argument("--tls", action="store_true", help="connect with TLS (for an HTTPS server)")
    parser.add_argument("cmd", nargs="+", help="the server command")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2 * args.n + 500:
        sys.exit(f"need {2 * args.n + 500} open files, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    per_conn = [one_round(args.cmd, args.n, args.workers, args.mode, args.tls) for _ in range(args.rounds)]
    print(
        f"{' '.join(args.cmd)}: {statistics.median(per_conn):.0f} bytes per idle connection "
        f"({args.mode}{', TLS' if args.tls else ''}) "
        f"(median of {args.rounds}, {min(per_conn):.0f}..{max(per_conn):.0f}; n = {args.n}, "
        f"WORKERS={args.workers})"
    )


if __name__ == "__main__":
    main()
