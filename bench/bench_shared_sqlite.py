"""
SQLiteStorage shared by several processes (``--shared-data-dir``, docs/storage.md): what a
create costs and how soon another process's watch hears of it.

Run from the project root: ``PYTHONPATH=src:. python bench/bench_shared_sqlite.py
[--creates N] [--writes N] [--dir DIR]``.  Figures only, not a test.

- creates: ``--creates`` creates of 1 KiB values with 16 in flight, per process, through
  a store not shared, shared by one process, and shared by two processes writing at
  once; each process's CPU (user + system, its threads included) per create and the
  creates per second of them all.
- latency: one process creates a key every 5 ms (``--writes`` of them), its value the
  time it was issued; another, which writes nothing, watches: from the create being
  issued to its acknowledgement in the writing process, to the watch's sink hearing of
  it in the other, and from that acknowledgement to the sink (negative: heard first),
  p50 / p99 / max; then the same with the watching process writing too (its writes
  carry the others' events along).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import deferLater, react

from platformd.storage.sqlite import SQLiteStorage

VALUE = b"x" * 1024
LANES = 16


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def creates(reactor, path: str, shared: bool, count: int, name: str):
    """The child's part of "creates": prints its CPU per create and its elapsed time."""
    store = SQLiteStorage(reactor, path, shared=shared)
    await store.start()

    async def lane(number: int):
        for n in range(count // LANES):
            await store.create(f"/registry/bench/{name}/{number}/{n}", VALUE)

    began, used = time.perf_counter(), cpu()
    await gatherResults([Deferred.fromCoroutine(lane(n)) for n in range(LANES)])
    used, elapsed = cpu() - used, time.perf_counter() - began
    done = count // LANES * LANES
    print(f"{used / done * 1e6:.1f} {elapsed:.3f} {done}", flush=True)
    await store.stop()


async def writer(reactor, path: str, count: int):
    """The child's part of "latency": a create every 5 ms, its value the time issued."""
    store = SQLiteStorage(reactor, path, shared=True)
    await store.start()
    acknowledged = []
    for n in range(count):
        await store.create(f"/registry/latency/{n}", str(time.time()).encode())
        acknowledged.append(time.time())
        await deferLater(reactor, 0.005, lambda: None)
    await store.stop()
    print(" ".join(map(repr, acknowledged)), flush=True)


def spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--child", *args],
                            stdout=subprocess.PIPE, text=True)


def run_creates(directory: str, label: str, shared: bool, processes: int, count: int):
    path = os.path.join(directory, f"{label}.db")
    children = [spawn("creates", path, str(shared), str(count), f"p{n}")
                for n in range(processes)]
    results = [tuple(map(float, child.communicate()[0].split())) for child in children]
    total = sum(done for _, _, done in results)
    elapsed = max(elapsed for _, elapsed, _ in results)
    per_create = ", ".join(f"{us:.0f}" for us, _, _ in results)
    print(f"{label:24} CPU per create {per_create} us (per process);"
          f" {total / elapsed:6.0f} creates/s in all")


async def run_latency(reactor, directory: str, writes: int, busy: bool):
    path = os.path.join(directory, f"latency-{busy}.db")
    store = SQLiteStorage(reactor, path, shared=True)
    await store.start()
    seen: list = []  # (issued, seen), in revision order: the order the writer wrote
    done: Deferred = Deferred()

    def sink(event):
        if event.kv.key.startswith("/registry/latency/"):
            seen.append((float(event.kv.value), time.time()))
            if len(seen) == writes:
                done.callback(None)

    store.watch("/registry/", 0, sink)
    child = spawn("writer", path, str(writes))
    own = 0
    while busy and not done.called:
        await store.create(f"/registry/own/{own}", VALUE)
        own += 1
        await deferLater(reactor, 0.003, lambda: None)
    await done
    acknowledged = list(map(float, child.communicate()[0].split()))
    await store.stop()
    label = "watching, writing too" if busy else "watching, idle"
    print(f"latency, {label} ({len(seen)} writes, {own} own):")
    for what, delays in (
            ("issued -> acknowledged to the writer",
             [ack - issued for (issued, _), ack in zip(seen, acknowledged)]),
            ("issued -> seen by the other's watch ", [when - issued for issued, when in seen]),
            ("acknowledged -> seen                ",
             [when - ack for (_, when), ack in zip(seen, acknowledged)])):
        print(f"  {what} {quantiles(delays)}")


def quantiles(delays: list) -> str:
    delays = sorted(delays)
    p50, p99 = (1000 * delays[int(q * (len(delays) - 1))] for q in (0.5, 0.99))
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {1000 * delays[-1]:.2f} ms"


async def main(reactor, *argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--creates", type=int, default=20_000)
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--dir", default=".")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=options.dir) as directory:
        for label, shared, processes in (("not shared", False, 1),
                                         ("shared, one process", True, 1),
                                         ("shared, two processes", True, 2)):
            run_creates(directory, label, shared, processes, options.creates)
        for busy in (False, True):
            await run_latency(reactor, directory, options.writes, busy)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        role, path, *rest = sys.argv[2:]
        if role == "creates":
            react(creates, [path, rest[0] == "True", int(rest[1]), rest[2]])
        else:
            react(writer, [path, int(rest[0])])
    else:
        react(main, sys.argv[1:])
