"""tcp suite, competitors python-asyncio and python-uvloop: asyncio streams API.

  bind            asyncio.start_server(cb, "127.0.0.1", 0), then close() + wait_closed()
  bind_concurrent the same from 100 tasks, each doing 1/100 of the ops
  accept_connect  one server whose callback closes each connection; per op the client
                  opens a connection, reads EOF, closes
  pingpong        one connection (TCP_NODELAY), echo callback, 64-byte round trips
  idle_conns      N connections, each server end held by its own callback task blocked in read

Usage: tcp.py --loop asyncio|uvloop [--quick] [--case NAME]
"""

import argparse
import asyncio
import json
import os
import resource
import socket
import sys
import time

MSG = 64
CONC_UNITS = 100
FD_RESERVE = 100
HOST = "127.0.0.1"

competitor = "python-asyncio"


def emit(case, metric, value, unit):
    print(json.dumps({"suite": "tcp", "case": case, "competitor": competitor,
                      "metric": metric, "value": value, "unit": unit}), flush=True)


def nodelay(writer):
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def close_at_once(reader, writer):
    writer.close()


async def bind_loop(n):
    for _ in range(n):
        server = await asyncio.start_server(close_at_once, HOST, 0)
        server.close()
        await server.wait_closed()


async def case_bind(warm, n):
    await bind_loop(warm)
    t0 = time.perf_counter_ns()
    await bind_loop(n)
    emit("bind", "ns_per_op", (time.perf_counter_ns() - t0) / n, "ns")


async def bind_concurrent(total):
    await asyncio.gather(*(bind_loop(total // CONC_UNITS) for _ in range(CONC_UNITS)))


async def case_bind_concurrent(warm, n):
    n = n // CONC_UNITS * CONC_UNITS
    await bind_concurrent(warm)
    t0 = time.perf_counter_ns()
    await bind_concurrent(n)
    emit("bind_concurrent", "ns_per_op", (time.perf_counter_ns() - t0) / n, "ns")


async def case_accept_connect(warm, n):
    server = await asyncio.start_server(close_at_once, HOST, 0)
    port = server.sockets[0].getsockname()[1]

    async def loop(n):
        for _ in range(n):
            reader, writer = await asyncio.open_connection(HOST, port)
            if await reader.read(1) != b"":
                raise RuntimeError("expected EOF")
            writer.close()
            await writer.wait_closed()

    await loop(warm)
    t0 = time.perf_counter_ns()
    await loop(n)
    emit("accept_connect", "ns_per_op", (time.perf_counter_ns() - t0) / n, "ns")
    server.close()
    await server.wait_closed()


async def echo(reader, writer):
    nodelay(writer)
    try:
        while True:
            data = await reader.readexactly(MSG)
            writer.write(data)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    writer.close()


async def case_pingpong(warm, n):
    server = await asyncio.start_server(echo, HOST, 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection(HOST, port)
    nodelay(writer)
    msg = b"0123456789abcdef" * (MSG // 16)

    async def loop(n):
        for _ in range(n):
            writer.write(msg)
            await writer.drain()
            await reader.readexactly(MSG)

    await loop(warm)
    t0 = time.perf_counter_ns()
    await loop(n)
    emit("pingpong", "ns_per_op", (time.perf_counter_ns() - t0) / n, "ns")
    writer.close()
    await writer.wait_closed()
    server.close()
    await server.wait_closed()


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def case_idle_conns(want, fd_limit):
    n = want
    if 2 * n + FD_RESERVE > fd_limit:
        n = (fd_limit - FD_RESERVE) // 2
        print(f"idle_conns: RLIMIT_NOFILE is {fd_limit}, using {n} connections instead of {want}",
              file=sys.stderr)
    loop = asyncio.get_running_loop()
    state = {"accepted": 0, "finished": 0, "target": 0, "waiter": None}

    def wake(key):
        w = state["waiter"]
        if w is not None and state[key] >= state["target"] and not w.done():
            w.set_result(None)

    async def wait_for(key, target):
        if state[key] < target:
            state["target"] = target
            state["waiter"] = loop.create_future()
            await state["waiter"]
            state["waiter"] = None

    async def hold(reader, writer):
        state["accepted"] += 1
        wake("accepted")
        await reader.read(MSG)
        writer.close()
        state["finished"] += 1
        wake("finished")

    server = await asyncio.start_server(hold, HOST, 0)
    port = server.sockets[0].getsockname()[1]
    await asyncio.sleep(0.01)
    before = rss()
    clients = []
    while len(clients) < n:
        k = min(100, n - len(clients))
        for _ in range(k):
            clients.append(await asyncio.open_connection(HOST, port))
        await wait_for("accepted", len(clients))
    await asyncio.sleep(0.1)  # every server task is parked in read
    after = rss()
    emit("idle_conns", "bytes_per_conn", (after - before) / n, "bytes")
    for _, writer in clients:
        writer.close()
    await wait_for("finished", n)
    server.close()
    await server.wait_closed()


async def main(args, fd_limit):
    q = (lambda small, full: small if args.quick else full)

    def want(name):
        return args.case is None or args.case == name

    # idle_conns first, so that its resident-set baseline is the fresh process.
    if want("idle_conns"):
        await case_idle_conns(q(1000, 10000), fd_limit)
    if want("bind"):
        await case_bind(q(100, 1000), q(2000, 20000))
    if want("bind_concurrent"):
        await case_bind_concurrent(q(1000, 2000), q(2000, 20000))
    if want("accept_connect"):
        await case_accept_connect(q(50, 500), q(500, 5000))
    if want("pingpong"):
        await case_pingpong(q(100, 1000), q(2000, 20000))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--case")
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.loop == "uvloop":
        import uvloop
        competitor = "python-uvloop"
        uvloop.run(main(args, hard))
    else:
        asyncio.run(main(args, hard))
