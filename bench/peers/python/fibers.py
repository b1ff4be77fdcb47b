"""fibers suite (shapes of seed 003), competitors python-asyncio and python-thread.

  alloc       N units, each switching twice and then parked until released; timed: creation
              until the last has parked + release until all are done; resident-set growth
              per unit with all N parked
  switch      2 units, each switching to the other `switches` times
  warm        `repeats` rounds of N units that switch once and finish, joined: first round
              against last (per unit)
  throughput  `repeats` rounds of `units` units that each switch `switches` times, joined;
              the fastest round counts

--mode asyncio: one task per unit (asyncio.create_task) on the default event loop (one
                thread); a switch is `await asyncio.sleep(0)` (the ready queue is FIFO, so two
                tasks that yield alternately hand control to each other); alloc units park in
                asyncio.Event.wait; joined with asyncio.gather.
--mode thread:  one threading.Thread per unit (default stack size); a unit switches with
                time.sleep(0) (drops the GIL); alloc units block in threading.Event.wait; the
                switch case is a ping-pong over two queue.SimpleQueue.

Usage: fibers.py --mode asyncio|thread [--quick]
"""

import argparse
import asyncio
import os
import queue
import threading
import time

FULL = dict(alloc_units=10_000, alloc_switches=2, switches=10_000, warm_units=10_000,
            warm_switches=1, warm_repeats=10, tp_units=1_000, tp_switches=100, tp_repeats=10)
QUICK = dict(alloc_units=1_000, alloc_switches=2, switches=1_000, warm_units=1_000,
             warm_switches=1, warm_repeats=3, tp_units=100, tp_switches=100, tp_repeats=3)

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
now = time.perf_counter


def rss_bytes():
    """Resident set: /proc/self/statm field 2 x page size."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_SIZE


# --- asyncio ---------------------------------------------------------------------------


async def _yielding(switches):
    for _ in range(switches):
        await asyncio.sleep(0)


class Asyncio:
    NAME = "python-asyncio"

    def __init__(self):
        self.runner = asyncio.Runner()

    def alloc(self, n, switches):
        return self.runner.run(self._alloc(n, switches))

    async def _alloc(self, n, switches):
        parked = 0
        all_parked = asyncio.Event()
        release = asyncio.Event()

        async def unit():
            nonlocal parked
            for _ in range(switches):
                await asyncio.sleep(0)
            parked += 1
            if parked == n:
                all_parked.set()
            await release.wait()

        rss0 = rss_bytes()
        t0 = now()
        tasks = [asyncio.create_task(unit()) for _ in range(n)]
        await all_parked.wait()
        to_peak = now() - t0
        rss1 = rss_bytes()
        t1 = now()
        release.set()
        await asyncio.gather(*tasks)
        return to_peak + (now() - t1), rss1 - rss0

    def switch(self, switches):
        return self.rounds(2, switches, 1)[0]

    def rounds(self, units, switches, repeats):
        return self.runner.run(self._rounds(units, switches, repeats))

    async def _rounds(self, units, switches, repeats):
        reps = []
        for _ in range(repeats):
            t0 = now()
            await asyncio.gather(*[asyncio.create_task(_yielding(switches)) for _ in range(units)])
            reps.append(now() - t0)
        return reps


# --- threads ---------------------------------------------------------------------------


def _spawn(target):
    t = threading.Thread(target=target)
    t.start()
    return t


def _yield_thread(switches):
    def body():
        for _ in range(switches):
            time.sleep(0)

    return body


class Threads:
    NAME = "python-thread"

    def alloc(self, n, switches):
        parked = 0
        lock = threading.Lock()
        all_parked = threading.Event()
        release = threading.Event()

        def unit():
            nonlocal parked
            for _ in range(switches):
                time.sleep(0)
            with lock:
                parked += 1
                if parked == n:
                    all_parked.set()
            release.wait()

        rss0 = rss_bytes()
        t0 = now()
        threads = [_spawn(unit) for _ in range(n)]
        all_parked.wait()
        to_peak = now() - t0
        rss1 = rss_bytes()
        t1 = now()
        release.set()
        for t in threads:
            t.join()
        return to_peak + (now() - t1), rss1 - rss0

    def switch(self, switches):
        to_a, to_b = queue.SimpleQueue(), queue.SimpleQueue()

        def a():
            for _ in range(switches):
                to_b.put(True)
                to_a.get()

        def b():
            for _ in range(switches):
                to_b.get()
                to_a.put(True)

        t0 = now()
        threads = [_spawn(a), _spawn(b)]
        for t in threads:
            t.join()
        return now() - t0

    def rounds(self, units, switches, repeats):
        reps = []
        for _ in range(repeats):
            t0 = now()
            threads = [_spawn(_yield_thread(switches)) for _ in range(units)]
            for t in threads:
                t.join()
            reps.append(now() - t0)
        return reps


# --- main ------------------------------------------------------------------------------


def emit(competitor, case, metric, value, unit):
    # Hand-formatted so that the key order is the protocol's; round() keeps plain decimals.
    print(
        '{"suite":"fibers","case":"%s","competitor":"%s","metric":"%s","value":%r,"unit":"%s"}'
        % (case, competitor, metric, round(float(value), 4), unit),
        flush=True,
    )


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["asyncio", "thread"], required=True)
    p.add_argument("--quick", action="store_true", help="small sizes, seconds in all")
    args = p.parse_args()
    s = QUICK if args.quick else FULL
    impl = Asyncio() if args.mode == "asyncio" else Threads()
    name = impl.NAME

    elapsed, growth = impl.alloc(s["alloc_units"], s["alloc_switches"])
    emit(name, "alloc", "us_per_unit", elapsed * 1e6 / s["alloc_units"], "us")
    emit(name, "alloc", "bytes_per_unit", growth / s["alloc_units"], "bytes")

    elapsed = impl.switch(s["switches"])
    total = 2 * s["switches"]
    emit(name, "switch", "us_per_switch", elapsed * 1e6 / total, "us")
    emit(name, "switch", "switches_per_s", total / elapsed, "switches/s")

    reps = impl.rounds(s["warm_units"], s["warm_switches"], s["warm_repeats"])
    emit(name, "warm", "first_alloc_us", reps[0] * 1e6 / s["warm_units"], "us")
    emit(name, "warm", "last_alloc_us", reps[-1] * 1e6 / s["warm_units"], "us")

    reps = impl.rounds(s["tp_units"], s["tp_switches"], s["tp_repeats"])
    emit(name, "throughput", "total_ms", min(reps) * 1e3, "ms")


if __name__ == "__main__":
    main()
