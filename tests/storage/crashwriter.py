"""
The child process of the crash-durability test (``test_sqlite.CrashTests``).

``crashwriter.py PATH [--shared]`` opens SQLiteStorage on PATH (shared with other
processes with ``--shared``: ``test_sqlite_shared.OtherProcessTests``) and creates keys,
many at a time, until it is killed.  It prints ``KEY REVISION`` for a create only once the create's
Deferred has fired, that is once the store acknowledged it as durable.
"""

import itertools
import os
import sys

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import react

from platformd.storage.sqlite import SQLiteStorage

CONCURRENCY = 32


async def write_forever(store, lane: int):
    for n in itertools.count():
        key = f"/crash/{os.getpid()}/{lane}/{n}"
        kv = await store.create(key, key.encode())
        print(key, kv.mod_revision, flush=True)


async def main(reactor, path: str, *options: str):
    store = SQLiteStorage(reactor, path, shared="--shared" in options)
    await store.start()
    lanes = (Deferred.fromCoroutine(write_forever(store, lane)) for lane in range(CONCURRENCY))
    await gatherResults(list(lanes))


if __name__ == "__main__":
    react(main, sys.argv[1:])
