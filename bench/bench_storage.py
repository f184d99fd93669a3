"""
Creates per second through SQLiteStorage, with 16 and with 256 creates in flight.

Run from the project root: ``PYTHONPATH=src:. python bench/bench_storage.py [--creates N]
[--dir DIR]``.  One process, the real reactor, a fresh database file per run in a
temporary directory under ``--dir`` (default: here, a real disk rather than a tmpfs).
Each of the ``concurrency`` lanes issues its next create as soon as the previous one is
acknowledged (durable), so the figure is the acknowledged-write throughput that group
commit achieves at that load.
"""

import argparse
import os
import sys
import tempfile
import time

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import react

from platformd.storage.sqlite import SQLiteStorage

VALUE = b"x" * 1024  # about the size of a small encoded object


async def lane(store, number: int, creates: int):
    for n in range(creates):
        await store.create(f"/registry/bench/{number}/{n}", VALUE)


async def measure(reactor, directory: str, concurrency: int, creates: int):
    store = SQLiteStorage(reactor, os.path.join(directory, f"bench-{concurrency}.db"))
    await store.start()
    each = creates // concurrency
    began = time.perf_counter()
    await gatherResults([Deferred.fromCoroutine(lane(store, number, each))
                         for number in range(concurrency)])
    elapsed = time.perf_counter() - began
    done = each * concurrency
    print(f"concurrency {concurrency:4}: {done / elapsed:8.0f} creates/s"
          f"  ({done} creates in {elapsed:.2f} s, {store.commits} commits,"
          f" {done / store.commits:.1f} writes per commit)")
    await store.stop()


async def main(reactor, *argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--creates", type=int, default=50_000)
    parser.add_argument("--dir", default=".")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=options.dir) as directory:
        for concurrency in (16, 256):
            await measure(reactor, directory, concurrency, options.creates)


if __name__ == "__main__":
    react(main, sys.argv[1:])
