"""
kill -TERM under watch and write load: does any watcher have to relist?

    PYTHONPATH=src:. python bench/bench_shutdown.py [--watches 1000] [--writers 4]

A scratch ``twistd platformd`` (fresh data directory); ``--watches`` watches of one
namespace's ConfigMaps, each on its own TLS connection (``allowWatchBookmarks=true``,
from the resourceVersion of a LIST), read by one thread each; ``--writers`` threads
creating ConfigMaps on keep-alive connections.  Once 200 creates are acknowledged the
server gets SIGTERM.  Figures: SIGTERM to exit, exit status, watches ending with the
chunked terminator, watches whose last event is a BOOKMARK at or after the last
acknowledged write, acknowledged creates missing from a watch; then the server is
started again on the same data and 5 watches resume from the last bookmark: how many
get the next create as their first event (no 410, so no relist).
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import threading
import time

from tests.e2e.daemon import RawWatch, Server, free_port, write_tokens

TOKEN = "bench-token"
PATH = "/api/v1/namespaces/default/configmaps"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watches", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=4)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp()
    server = Server(data_dir, free_port(), write_tokens(data_dir, TOKEN), token=TOKEN)
    server.start()
    _, listed = server.connection().request_json("GET", PATH)
    start = listed["metadata"]["resourceVersion"]
    watches = [RawWatch(server.port, TOKEN, PATH, start) for _ in range(args.watches)]
    acknowledged: dict = {}
    lock = threading.Lock()

    def writer(worker: int) -> None:
        conn, n = server.connection(), 0
        while True:
            try:
                _, body = conn.request_json("POST", PATH, {"metadata": {"name": f"w{worker}-{n}"}})
            except Exception:
                return  # the server closed the connection: shutting down
            with lock:
                acknowledged[body["metadata"]["name"]] = int(body["metadata"]["resourceVersion"])
            n += 1

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(args.writers)]
    for thread in threads:
        thread.start()
    while len(acknowledged) < 200:
        time.sleep(0.05)
    sent = time.monotonic()
    server.signal(signal.SIGTERM)
    status = server.wait(120)
    took = time.monotonic() - sent
    for thread in threads:
        thread.join()

    last = max(acknowledged.values())
    clean = bookmarked = missing = 0
    for watch in watches:
        try:
            events = watch.events()
        except AssertionError:
            continue
        clean += 1
        seen = {e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"}
        missing += len(set(acknowledged) - seen)
        final = events[-1]
        if final["type"] == "BOOKMARK" and int(final["object"]["metadata"]["resourceVersion"]) >= last:
            bookmarked += 1

    server.start()
    resumed = [RawWatch(server.port, TOKEN, PATH, str(last)) for _ in range(5)]
    server.connection().request("POST", PATH, {"metadata": {"name": "after-restart"}})
    time.sleep(0.5)
    server.signal(signal.SIGTERM)
    server.wait(120)
    without_relist = sum(1 for w in resumed
                         if w.events()[0]["object"]["metadata"].get("name") == "after-restart")
    n = args.watches
    print(f"watches {n}, creates acknowledged {len(acknowledged)}; SIGTERM to exit {took:.2f} s,"
          f" exit status {status}; clean terminators {clean}/{n}; final bookmark at the last"
          f" write {bookmarked}/{n}; acknowledged creates missing from a watch {missing};"
          f" resumed after restart without 410 {without_relist}/5")


if __name__ == "__main__":
    main()
