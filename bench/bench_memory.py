"""
Server memory (issue 28, target 2): resident memory (VmRSS of the twistd process, from
/proc) at three points, for one or more trees alternately in one run (A B A B ...), so
that the machine's state falls on all of them alike.

    PYTHONPATH=src:. python bench/bench_memory.py [--baseline main | --baseline-dir DIR]
        [--tree DIR ...] [--runs 2] [--watchers 2000] [--creates 100000]
        [--only objects|watchers|creates ...] [--holders] [--env NAME=VALUE ...]

1. ``objects``: 11,000 RoleBindings stored (1,000 in ``bench`` and 1,000 in each of ten
   more namespaces; the realistic objects of ``bench_lists_watches.py``: labels,
   annotations, two or three subjects), then three full cluster-wide LISTs (so every
   object's JSON bytes are cached), as ``bench_lists_watches.py``'s memory row.  Target
   ≤ 100 MiB.
2. ``watchers``: on the same server, ``--watchers`` idle watches of ``bench``'s
   RoleBindings from the current resourceVersion, each on its own TLS connection (one
   client process, blocking sockets, opened one after another and held open); server
   RSS before and once every response's headers have arrived, and the difference per
   watch.  Target ≤ 0.5 KiB per idle watcher.
3. ``creates``: a fresh server, ``--creates`` RoleBindings created by wrk
   (``bench_api.py``'s small objects in ``default``, 16 in flight), RSS right after the
   last.  Target ≤ 300 MiB after 100,000.

With ``--holders`` each server also loads ``bench/memhook`` (a ``sitecustomize``) and
writes, at each point, what holds its memory (bytes reachable from the watch cache's
objects part by part, the history, the RBAC index, the watches; glibc malloc's and
pymalloc's figures), printed after the RSS.  It perturbs what it measures (a full
collection): the RSS printed is read before it.  ``--env MALLOC_ARENA_MAX=2`` and the
like set the servers' environment.  Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_api import create_lua  # noqa: E402
from common import (  # noqa: E402
    RBAC, TOKEN, Client, free_port, package_root, rss_mib, tls_context, wait_ready,
    write_tokens,
)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: RoleBindings in the ``objects`` phase (``--objects``).
OBJECTS = 11000
HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memhook")



def raise_nofile(want: int) -> int:
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(hard if hard != resource.RLIM_INFINITY else want, max(want, soft))
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Server:
    """A scratch ``twistd -n platformd`` from ``tree`` (see ``common.start_server``)."""

    def __init__(self, tree: str, tmp: str, tokens: str, holders: bool, env: dict):
        self.port = free_port()
        self.data = tempfile.mkdtemp(dir=tmp)
        self.report = os.path.join(self.data, "memreport.json")
        root = package_root(tree)
        environ = {**os.environ, **env,
                   "PYTHONPATH": os.pathsep.join([HOOK, root] if holders else [root])}
        if holders:
            environ["PLATFORMD_MEMREPORT"] = self.report
        twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
        self.log = open(os.path.join(self.data, "server.log"), "w")
        self.proc = subprocess.Popen(
            [twistd, "-n", "--pidfile=", "platformd", "--data-dir",
             os.path.join(self.data, "d"), "--secure-port", str(self.port),
             "--token-auth-file", tokens],
            stdout=self.log, stderr=self.log, env=environ, cwd=root)
        if not wait_ready(self.proc, self.port, tls_context()):
            sys.exit(f"platformd ({tree}) did not start; see {self.log.name}")
        self.holders = holders

    def rss(self) -> float:
        return rss_mib(self.proc.pid)

    def holders_report(self):
        if not self.holders:
            return None
        if os.path.exists(self.report):
            os.unlink(self.report)
        os.kill(self.proc.pid, signal.SIGUSR2)
        for _ in range(600):
            if os.path.exists(self.report):
                with open(self.report) as f:
                    return json.load(f)
            time.sleep(0.1)
        return {"error": "no report"}

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def print_holders(report) -> None:
    if not report:
        return
    if "error" in report:
        print(f"    holders: {report['error']}")
        return
    m = report.get("mallinfo") or {}
    if m:
        print(f"    malloc: in use {m['uordblks'] / 2**20:.1f} MiB (+ mmapped "
              f"{m['hblkhd'] / 2**20:.1f}), free but kept {m['fordblks'] / 2**20:.1f} MiB, "
              f"heap {m['arena'] / 2**20:.1f} MiB; RSS at report {report['rss_kib'] / 1024:.1f} MiB")
    total = 0
    for name, (size, count) in sorted(report["holders"].items(), key=lambda kv: -kv[1][0]):
        total += size
        print(f"    {name:48s} {size / 2**20:8.2f} MiB  {count:>9,} objects")
    print(f"    {'(sum)':48s} {total / 2**20:8.2f} MiB")
    pm = report.get("pymalloc") or {}
    if pm:
        print(f"    pymalloc: {pm.get('arenas_kib', 0)} arenas (1 MiB in 3.11 = "
              f"{pm.get('arenas_kib', 0)} MiB), in blocks {pm.get('used_bytes', 0) / 2**20:.1f} MiB,"
              f" free in pools {pm.get('free_bytes', 0) / 2**20:.1f} MiB")
    print(f"    kinds (objects, history): {report.get('kinds')}")
    print("    most numerous types: " + ", ".join(f"{t} {n:,}" for t, n in report["counts"][:14]))


# -- 1. 11,000 objects ------------------------------------------------------------------

def phase_objects(server: Server) -> dict:
    from bench_lists_watches import create_many, create_namespace
    client = Client(server.port, timeout=120)
    figures = {"empty": server.rss()}
    create_namespace(client, "bench")
    create_many(server.port, "bench", min(1000, OBJECTS))
    for k in range(max(0, OBJECTS - 1000) // 1000):
        create_namespace(client, f"bulk-{k}")
        create_many(server.port, f"bulk-{k}", 1000)
    figures["created"] = server.rss()
    for _ in range(3):
        status, body = client.call("GET", f"{RBAC}/rolebindings")
        if status != 200:
            sys.exit(f"full LIST: {status}")
    items = body.count(b'"kind":"RoleBinding"')
    del body
    time.sleep(0.5)
    figures["listed"] = server.rss()
    figures["items"] = items
    client.close()
    return figures


# -- 2. idle watchers ---------------------------------------------------------------------

def open_watch(port: int, path: str, context) -> ssl.SSLSocket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    tls = context.wrap_socket(sock, server_hostname="127.0.0.1")
    tls.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
                 "Accept: application/json\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = tls.recv(4096)
        if not chunk:
            raise OSError("closed before the headers")
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        raise OSError(head[:200].decode(errors="replace"))
    return tls


def phase_watchers(server: Server, count: int) -> dict:
    client = Client(server.port)
    status, body = client.call("GET", f"{RBAC}/namespaces/bench/rolebindings?limit=1")
    client.close()
    rv = json.loads(body)["metadata"]["resourceVersion"]
    path = f"{RBAC}/namespaces/bench/rolebindings?watch=1&resourceVersion={rv}"
    context = tls_context()
    # One watch first: whatever the first watch makes once (a series, a code path's
    # first allocations) is not counted per watcher.
    warm = [open_watch(server.port, path, context) for _ in range(10)]
    time.sleep(0.5)
    before = server.rss()
    socks = []
    start = time.monotonic()
    for _ in range(count):
        socks.append(open_watch(server.port, path, context))
    took = time.monotonic() - start
    time.sleep(1.0)
    after = server.rss()
    report = server.holders_report()
    for s in socks + warm:
        s.close()
    return {"before": before, "after": after, "count": count, "took": took,
            "per_kib": (after - before) * 1024 / count, "report": report}


# -- 3. 100,000 creates -------------------------------------------------------------------

def phase_creates(server: Server, creates: int, tmp: str) -> dict:
    lua = os.path.join(tmp, f"create-{creates}.lua")
    from common import wrk_run
    start = time.monotonic()
    done = 0
    rate = 500.0
    chunk = 0
    while done < creates:
        # wrk runs for a time, not a count: chunks sized to what is left, each with
        # names of its own.
        chunk += 1
        with open(lua, "w") as f:
            f.write(create_lua(f"rb-{chunk}"))
        seconds = int(max(1, min(20, (creates - done) / rate + 0.5)))  # wrk: whole seconds
        r = wrk_run(["-c16", "-s", lua], seconds, f"https://127.0.0.1:{server.port}")
        done += r["requests"] - r["bad"]
        rate = max(50.0, r["rate"])
    took = time.monotonic() - start
    rss = server.rss()
    time.sleep(2.0)
    settled = server.rss()
    return {"rss": rss, "settled": settled, "requests": done, "took": took}


# -- driver -------------------------------------------------------------------------------

def materialise(commit: str) -> str:
    import ab
    return ab.materialise(commit, HERE)


def main():
    global OBJECTS
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", help="a commit run as A (git archive)")
    parser.add_argument("--baseline-dir", help="an already materialised tree run as A")
    parser.add_argument("--tree", action="append",
                        help="a tree to run (repeatable; default this checkout)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--watchers", type=int, default=2000)
    parser.add_argument("--objects", type=int, default=11000,
                        help="RoleBindings in the objects phase (default 11,000)")
    parser.add_argument("--creates", type=int, default=100000)
    parser.add_argument("--only", action="append",
                        choices=("objects", "watchers", "creates"))
    parser.add_argument("--holders", action="store_true")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    opts = parser.parse_args()
    OBJECTS = opts.objects
    parts = set(opts.only or ("objects", "watchers", "creates"))
    if "watchers" in parts:
        parts.add("objects")
    if not shutil.which("wrk") and "creates" in parts:
        sys.exit("bench_memory needs wrk (apt-get install wrk)")
    raise_nofile(2 * opts.watchers + 200)
    env = dict(e.split("=", 1) for e in opts.env)
    trees = []
    made = None
    if opts.baseline:
        made = materialise(opts.baseline)
        trees.append((f"A {opts.baseline}", made))
    elif opts.baseline_dir:
        trees.append((f"A {opts.baseline_dir}", opts.baseline_dir))
    for i, tree in enumerate(opts.tree or [HERE]):
        trees.append((f"{'B' if trees else 'A'}{i or ''} {tree}", tree))
    tmp = tempfile.mkdtemp(prefix="platformd-mem-")
    tokens = write_tokens(tmp)
    results: dict = {label: [] for label, _ in trees}
    try:
        for run in range(opts.runs):
            for label, tree in trees:
                figures: dict = {}
                if "objects" in parts:
                    server = Server(tree, tmp, tokens, opts.holders, env)
                    try:
                        figures.update(phase_objects(server))
                        print(f"run {run + 1} {label}: empty {figures['empty']:.1f} MiB; "
                              f"{OBJECTS:,} RoleBindings {figures['created']:.1f} MiB; after 3 "
                              f"full LISTs ({figures['items']:,} items) "
                              f"{figures['listed']:.1f} MiB", flush=True)
                        print_holders(server.holders_report())
                        if "watchers" in parts:
                            w = phase_watchers(server, opts.watchers)
                            figures["per_watch"] = w["per_kib"]
                            print(f"  {w['count']:,} idle watches (opened in {w['took']:.1f} s):"
                                  f" {w['before']:.1f} -> {w['after']:.1f} MiB, "
                                  f"{w['per_kib']:.2f} KiB per watch", flush=True)
                            print_holders(w["report"])
                    finally:
                        server.stop()
                if "creates" in parts:
                    server = Server(tree, tmp, tokens, opts.holders, env)
                    try:
                        c = phase_creates(server, opts.creates, tmp)
                        figures["after_creates"] = c["rss"]
                        print(f"  {c['requests']:,} creates in {c['took']:.0f} s "
                              f"({c['requests'] / c['took']:,.0f}/s): RSS {c['rss']:.1f} MiB "
                              f"right after, {c['settled']:.1f} MiB 2 s later", flush=True)
                        print_holders(server.holders_report())
                    finally:
                        server.stop()
                results[label].append(figures)
        print("\nmedians (range):")
        for label, runs in results.items():
            cells = []
            for key, name, unit in (("listed", "11k objects + LISTs", "MiB"),
                                    ("per_watch", "per idle watch", "KiB"),
                                    ("after_creates", "after creates", "MiB")):
                values = [r[key] for r in runs if key in r]
                if values:
                    cells.append(f"{name} {statistics.median(values):.1f} "
                                 f"({min(values):.1f}-{max(values):.1f}) {unit}")
            print(f"  {label}: " + "; ".join(cells))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if made:
            shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    main()
