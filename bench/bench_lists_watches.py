"""
List, paging, watch fan-out and memory benchmarks: client and server on the same 2-core
machine, HTTPS with keep-alive and a bearer token, one scratch platformd started the way
bench_api.py starts it (``twistd -n platformd``, fresh data directory).

    PYTHONPATH=src:. python bench/bench_lists_watches.py [--runs 3] [--py-spy OUT.txt]
        [--only list|walk|fanout|memory ...] [--watchers 500] [--rate 50] [--keep-log F]

1. LIST of 1,000 RoleBindings in one namespace.  Each object is realistic: four labels,
   three annotations, two or three subjects (User, Group, ServiceAccount), so one
   response is several hundred KiB.  Figure: lists/s from ``wrk -t2 -c8`` for 5 s
   (a C client; its cost per response is small next to the server's).
   Target >= 200/s; upstream kube-apiserver + etcd on this machine kind: 156/s.
2. A paged walk of the same collection: ``limit=100``, 10 pages, following
   ``metadata.continue``; wall time of one whole walk, median of 20 walks on one
   keep-alive connection (Python http.client over TLS; the continue token is pulled out
   of the head of each page with a regex, no JSON parse).  The Python client's own cost
   (TLS decrypt, http.client parsing, ~80 KiB per page) is part of the figure; for
   comparison the same walk is driven by wrk with a Lua script (``-t1 -c1``, one walk
   after another, mean = 10 / requests per second).  Target < 20 ms; upstream 22.5 ms.
3. Watch fan-out: 500 watchers of the namespace, each on its own TLS connection and
   started (``?watch=1&allowWatchBookmarks=true&resourceVersion=RV``) from the
   resourceVersion of a fresh LIST; then 200 merge-patches of distinct objects in the
   namespace at 50/s, each carrying its send time (``time.time()``) in an annotation.
   The watchers live in one child process (an epoll loop over non-blocking sockets with
   ``ssl.MemoryBIO`` TLS; no asyncio, no JSON parse: a regex finds the annotation in each
   event).  Every delivery's latency is measured two ways:
     * kernel: send time -> the kernel's receive timestamp of the bytes on the watcher's
       socket (``SO_TIMESTAMPNS``): the server's part (and the loopback), free of the
       client's own queueing;
     * app: send time -> the client process has decrypted and matched the event; adds
       the time the one-process client takes to get round 500 sockets (it competes with
       the server for the 2 cores).
   Figures: deliveries (expect 500 x 200 = 100,000), p50/p99/max of both latencies,
   watches closed early, the patch round-trip times, CPU used by server and client
   during the updates.  Target p99 < 35 ms; upstream 43 ms.
4. Server resident memory (VmRSS of the twistd process) with 11,000 RoleBindings stored
   (the 1,000 above and 10,000 more in ten other namespaces), after creating them and
   after one full cluster-wide LIST of all of them (so every object's encoded bytes are
   cached).  Target < 150 MB; upstream 600-650 MB (apiserver + etcd).

Figures 1-3 run ``--runs`` times (default 3) and print the median with the spread.
Not a test: it prints figures.  Takes a little over a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import select
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    RBAC, TOKEN, Client, cpu_seconds, free_port, post_all, rss_mib, scratch_dir, start_server,
    stop_server, tls_context, wait_ready, wrk, write_tokens,
)

NS = "bench"
LIST_OBJECTS = 1000
TOTAL_OBJECTS = 11000
WATCHERS = 500
UPDATES = 200
UPDATE_RATE = 50.0
PAGE = 100
WALKS = 20
SENT = "bench.platform.io/sent"
SENT_RE = re.compile(rb'"bench\.platform\.io/sent":"([0-9.]+)"')
CONTINUE_RE = re.compile(rb'"continue":"([^"]*)"')
RV_RE = re.compile(rb'"resourceVersion":"(\d+)"')

WALK_LUA = r"""
local base = "%(path)s?limit=%(limit)d"
local nextpath = base
wrk.headers["Authorization"] = "Bearer %(token)s"
local function escape(s)
  return (string.gsub(s, "[^%%w%%-_%%.~]", function(c)
    return string.format("%%%%%%02X", string.byte(c)) end))
end
function request()
  return wrk.format("GET", nextpath)
end
function response(status, headers, body)
  local c = string.match(string.sub(body, 1, 2048), '"continue":"([^"]*)"')
  if c and c ~= "" then nextpath = base .. "&continue=" .. escape(c)
  else nextpath = base end
end
"""


# -- helpers --------------------------------------------------------------------------------

def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def percentile(values, p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def spread(values, fmt="{:,.1f}") -> str:
    """'median (min-max)' of a run's figures."""
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def rolebinding(name: str, i: int, namespace: str) -> dict:
    team = f"team-{i % 12:02d}"
    subjects = [
        {"kind": "User", "apiGroup": "rbac.authorization.platform.io",
         "name": f"user-{i:05d}@corp.example.com"},
        {"kind": "Group", "apiGroup": "rbac.authorization.platform.io",
         "name": f"{team}-developers"},
    ]
    if i % 2 == 0:
        subjects.append({"kind": "ServiceAccount", "name": f"deployer-{i % 50:02d}",
                         "namespace": namespace})
    return {
        "apiVersion": "rbac.authorization.platform.io/v1", "kind": "RoleBinding",
        "metadata": {
            "name": name,
            "labels": {
                "app.kubernetes.io/name": f"service-{i % 50:02d}",
                "app.kubernetes.io/part-of": "storefront",
                "app.kubernetes.io/managed-by": "platform-operator",
                "platform.io/team": team,
            },
            "annotations": {
                "platform.io/description":
                    f"Grants {team} and its deploy pipeline read access to the "
                    f"resources of service-{i % 50:02d}.",
                "platform.io/owner": f"{team}@corp.example.com",
                "platform.io/ticket": f"OPS-{10000 + i}",
            },
        },
        "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "ClusterRole",
                    "name": ("view", "edit", "admin")[i % 3]},
        "subjects": subjects,
    }


def create_many(port: int, namespace: str, count: int, threads: int = 4) -> int:
    """Create rb-0000.. in ``namespace`` over ``threads`` keep-alive connections."""
    bodies = [rolebinding(f"rb-{i:04d}", i, namespace) for i in range(count)]
    failures = post_all(port, f"{RBAC}/namespaces/{namespace}/rolebindings", bodies, threads)
    if failures:
        print(f"  ! {len(failures)} creates failed, first: {failures[0]}")
    return count - len(failures)


def create_namespace(client: Client, name: str) -> None:
    status, body = client.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    if status not in (201, 409):
        sys.exit(f"namespace {name}: {status} {body[:200]!r}")


# -- 1. LIST ------------------------------------------------------------------------------

def bench_list(port: int, client: Client, runs: int):
    path = f"{RBAC}/namespaces/{NS}/rolebindings"
    status, body = client.call("GET", path)
    items = len(json.loads(body)["items"])
    print(f"LIST of {items:,} RoleBindings: {len(body) / 1024:,.0f} KiB per response "
          f"({len(body) / items:,.0f} bytes per object)")
    rates = []
    for _ in range(runs):
        rate, bad, p99 = wrk(["-c8", "-H", f"Authorization: Bearer {TOKEN}"], 5,
                             f"https://127.0.0.1:{port}{path}")
        rates.append(rate)
        print(f"  run: {rate:,.1f} lists/s (non-2xx: {bad}, p99 {p99})")
    print(f"lists/s at concurrency 8: {spread(rates)}   target >= 200/s; upstream 156/s")


# -- 2. paged walk --------------------------------------------------------------------------

def walk_once(client: Client, path: str):
    """(seconds, pages, items) of one continue-following walk."""
    start = time.perf_counter()
    url = f"{path}?limit={PAGE}"
    pages = size = 0
    while True:
        status, body = client.call("GET", url)
        if status != 200:
            raise RuntimeError(f"page {pages}: {status} {body[:300]!r}")
        pages += 1
        size += len(body)
        token = CONTINUE_RE.search(body, 0, 4096).group(1).decode()
        if not token:
            break
        url = f"{path}?limit={PAGE}&continue={urllib.parse.quote(token, safe='')}"
    return time.perf_counter() - start, pages, size


def bench_walk(port: int, client: Client, runs: int, tmp: str):
    path = f"{RBAC}/namespaces/{NS}/rolebindings"
    medians, client_cpu = [], []
    for _ in range(runs):
        times, cpu = [], []
        for _ in range(WALKS):
            cpu0 = time.thread_time()
            seconds, pages, size = walk_once(client, path)
            cpu.append((time.thread_time() - cpu0) * 1000)
            times.append(seconds * 1000)
        medians.append(statistics.median(times))
        client_cpu.append(statistics.median(cpu))
        print(f"  run: median {medians[-1]:.1f} ms, min {min(times):.1f}, "
              f"max {max(times):.1f} ({pages} pages, {size / 1024:,.0f} KiB per walk; "
              f"client CPU {client_cpu[-1]:.1f} ms per walk)")
    print(f"paged walk (limit={PAGE}, {pages} pages), Python client: "
          f"{spread(medians)} ms   target < 20 ms; upstream 22.5 ms")
    print(f"  of which the Python client's own CPU (TLS, http.client): "
          f"{spread(client_cpu)} ms per walk")
    lua = os.path.join(tmp, "walk.lua")
    with open(lua, "w") as f:
        f.write(WALK_LUA % {"path": path, "limit": PAGE, "token": TOKEN})
    means = []
    for _ in range(runs):
        out = subprocess.run(["wrk", "-t1", "-c1", "-d3s", "--latency", "-s", lua,
                              f"https://127.0.0.1:{port}"],
                             capture_output=True, text=True, check=True).stdout
        rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        if bad:
            print(f"  ! wrk walk: {bad.group(1)} non-2xx responses")
        means.append(pages / rate * 1000)
    print(f"paged walk, wrk (C client, mean of back-to-back walks): {spread(means)} ms")


# -- 3. watch fan-out ---------------------------------------------------------------------

def paced_patches(port: int, count: int, path: str = f"{RBAC}/namespaces/{NS}/rolebindings"):
    """
    ``count`` merge-patches of rb-0000.. (in the collection at ``path``) at UPDATE_RATE,
    open loop: each is sent at its scheduled time on one of 8 keep-alive connections,
    whether or not earlier ones have been answered.  Each carries its send time in the
    SENT annotation.  Returns (round trips in ms, failures, seconds taken).
    """
    lanes = 8
    rtts, errors, slow = [], [], []
    clients = [Client(port) for _ in range(lanes)]
    for c in clients:
        c.call("GET", "/readyz")
    start = time.monotonic() + 0.05

    def lane(k: int):
        client = clients[k]
        for i in range(k, count, lanes):
            delay = start + i / UPDATE_RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent = time.time()
            patch = b'{"metadata":{"annotations":{"%s":"%.6f"}}}' % (SENT.encode(), sent)
            status, body = client.call("PATCH", f"{path}/rb-{i:04d}", patch,
                                       "application/merge-patch+json")
            rtts.append((time.time() - sent) * 1000)
            slow.append(((time.time() - sent) * 1000, i, time.monotonic() - start))
            if status != 200:
                errors.append((status, body[:200]))

    threads = [threading.Thread(target=lane, args=(k,)) for k in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    for c in clients:
        c.close()
    slow.sort(reverse=True)
    if slow and slow[0][0] > 50:
        print("  slowest patches (ms, index, seconds into the run): " + ", ".join(
            f"{ms:.0f} #{i} @{at:.2f}s" for ms, i, at in slow[:6]))
    return rtts, errors, elapsed


def fanout_run(port: int, client: Client, server_pid: int, py_spy: str | None,
               write_port: int, gil: bool = True,
               path: str = f"{RBAC}/namespaces/{NS}/rolebindings"):
    status, body = client.call("GET", path)
    rv = RV_RE.search(body, 0, 4096).group(1).decode()
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--watch-child", str(port),
         f"{path}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}", str(WATCHERS),
         str(WATCHERS * UPDATES)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = child.stdout.readline().split()
    if not line or line[0] != "ready":
        child.kill()
        sys.exit(f"watch child failed: {line}")
    connect_s = float(line[2])
    time.sleep(0.5)
    spy = None
    if py_spy:
        spy = subprocess.Popen(
            [os.path.join(os.path.dirname(sys.executable), "py-spy"), "record", "-p",
             str(server_pid), *(["--gil"] if gil else []), "-r", "250", "-f", "raw",
             "-o", py_spy, "-d", str(int(UPDATES / UPDATE_RATE) + 2)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
    cpu0 = cpu_seconds(server_pid)
    split0 = cpu_split(server_pid)
    rtts, errors, elapsed = paced_patches(write_port, UPDATES, path)
    child.stdin.write("stop\n")
    child.stdin.flush()
    result = json.loads(child.stdout.readline())
    cpu = cpu_seconds(server_pid) - cpu0
    user, system = (b - a for a, b in zip(split0, cpu_split(server_pid)))
    child.wait(30)
    if spy is not None:
        spy.wait(30)
    result.update(rtt_p50=percentile(rtts, 50), rtt_p99=percentile(rtts, 99),
                  rtt_max=max(rtts), patch_errors=len(errors), rate=UPDATES / elapsed,
                  server_cpu=cpu / elapsed, connect_s=connect_s, server_user=user,
                  server_system=system)
    if errors:
        print(f"  ! {len(errors)} patches failed, first: {errors[0]}")
    return result


def cpu_split(pid: int) -> tuple:
    """The process's (user, system) CPU seconds so far (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def bench_fanout(port: int, client: Client, server_pid: int, runs: int, py_spy,
                 write_port: int | None = None):
    """
    The fan-out runs; the watchers are on ``port``, the patches go to ``write_port``
    (another replica of the same store: the events reach the watchers through it), by
    default the same server.
    """
    write_port = write_port or port
    rtts, errors, elapsed = paced_patches(write_port, UPDATES // 2)
    print(f"patch round trip with no watchers ({UPDATES // 2} at {UPDATE_RATE:.0f}/s): "
          f"p50 {percentile(rtts, 50):.1f} ms, p99 {percentile(rtts, 99):.1f} ms, "
          f"max {max(rtts):.1f} ms; failures {len(errors)}")
    results = []
    for run in range(runs):
        before = rss_mib(server_pid)
        r = fanout_run(port, client, server_pid, py_spy if run == 0 else None, write_port)
        results.append(r)
        print(f"  run: {r['deliveries']:,}/{r['expected']:,} deliveries, "
              f"{r['watching']}/{WATCHERS} watching, closed early {r['closed']}, "
              f"error events {r['error_events']}, bad status {r['bad_status']}, "
              f"per-watcher {r['per_min']}-{r['per_max']}; "
              f"latency kernel p50 {r['k_p50']:.1f} p99 {r['k_p99']:.1f} "
              f"max {r['k_max']:.1f} ms, app p50 {r['a_p50']:.1f} p99 {r['a_p99']:.1f} "
              f"max {r['a_max']:.1f} ms; patch rtt p50 {r['rtt_p50']:.1f} "
              f"p99 {r['rtt_p99']:.1f} max {r['rtt_max']:.1f} ms; "
              f"{r['rate']:.1f} updates/s; CPU server {r['server_cpu'] * 100:.0f}% "
              f"client {r['client_cpu'] * 100:.0f}%; "
              f"{WATCHERS} TLS watches opened in {r['connect_s']:.1f} s; "
              f"server RSS {before:.0f} -> {rss_mib(server_pid):.0f} MiB")

    def col(key):
        return [r[key] for r in results]
    print(f"watch fan-out, {WATCHERS} watchers x {UPDATES} updates at "
          f"{UPDATE_RATE:.0f}/s: deliveries {spread(col('deliveries'), '{:,.0f}')} "
          f"of {WATCHERS * UPDATES:,}")
    print(f"  write-to-arrival (kernel receive timestamp): p50 {spread(col('k_p50'))} ms, "
          f"p99 {spread(col('k_p99'))} ms, max {spread(col('k_max'))} ms   "
          f"target p99 < 35 ms; upstream 43 ms")
    print(f"  write-to-arrival (seen by the client process): p50 {spread(col('a_p50'))} "
          f"ms, p99 {spread(col('a_p99'))} ms, max {spread(col('a_max'))} ms")
    print(f"  patch round trip: p50 {spread(col('rtt_p50'))} ms, "
          f"p99 {spread(col('rtt_p99'))} ms")


# -- the watch client (child process) -------------------------------------------------------

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


class Watch:
    __slots__ = ("sock", "tls", "inbio", "outbio", "buf", "head", "count", "closed")


def watch_child(port: int, path: str, n: int, expected: int) -> None:
    raise_nofile()
    context = tls_context()
    request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               f"Authorization: Bearer {TOKEN}\r\nAccept: application/json\r\n\r\n").encode()
    watches = {}
    epoll = select.epoll()
    start = time.monotonic()
    for _ in range(n):
        w = Watch()
        w.sock = socket.create_connection(("127.0.0.1", port))
        w.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        w.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        w.inbio, w.outbio = ssl.MemoryBIO(), ssl.MemoryBIO()
        w.tls = context.wrap_bio(w.inbio, w.outbio)
        while True:
            try:
                w.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                w.sock.sendall(w.outbio.read())
                w.inbio.write(w.sock.recv(65536))
        w.tls.write(request)
        w.sock.sendall(w.outbio.read())
        w.sock.setblocking(False)
        w.buf = b""
        w.head = False
        w.count = 0
        w.closed = False
        watches[w.sock.fileno()] = w
        epoll.register(w.sock.fileno(), select.EPOLLIN)
    epoll.register(sys.stdin.fileno(), select.EPOLLIN)
    kernel, app = [], []
    bad_status = error_events = closed = watching = total = 0
    ancsize = socket.CMSG_SPACE(16)
    deadline = None
    ready_sent = False
    cpu0 = None
    while True:
        now = time.monotonic()
        if deadline is not None and (now > deadline or total >= expected):
            break
        for fd, _ in epoll.poll(0.05):
            if fd == sys.stdin.fileno():
                sys.stdin.readline()
                deadline = time.monotonic() + 5.0
                epoll.unregister(fd)
                continue
            w = watches[fd]
            try:
                data, anc, _, _ = w.sock.recvmsg(262144, ancsize)
            except BlockingIOError:
                continue
            t_app = time.time()
            t_kernel = t_app
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = int.from_bytes(raw[:8], "little"), \
                        int.from_bytes(raw[8:16], "little")
                    t_kernel = sec + nsec / 1e9
            if data:
                w.inbio.write(data)
            else:
                w.inbio.write_eof()
            chunks = []
            while True:
                try:
                    chunk = w.tls.read(262144)
                except (ssl.SSLWantReadError, ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            buf = w.buf + b"".join(chunks)
            if not w.head:
                end = buf.find(b"\r\n\r\n")
                if end >= 0:
                    w.head = True
                    if buf.startswith(b"HTTP/1.1 200"):
                        watching += 1
                    else:
                        bad_status += 1
                    buf = buf[end + 4:]
            last = buf.rfind(b"\n")
            if last >= 0:
                region, buf = buf[:last + 1], buf[last + 1:]
                for m in SENT_RE.finditer(region):
                    sent = float(m.group(1))
                    kernel.append(t_kernel - sent)
                    app.append(t_app - sent)
                    w.count += 1
                    total += 1
                if b'"type":"ERROR"' in region:
                    error_events += 1
                if region.endswith(b"\r\n0\r\n\r\n") or region == b"0\r\n\r\n":
                    w.closed = True
            w.buf = buf
            if not data and not w.closed:
                w.closed = True
            if w.closed:
                closed += 1
                epoll.unregister(fd)
        if not ready_sent and watching + bad_status + closed >= n:
            print(f"ready {watching} {time.monotonic() - start:.2f}", flush=True)
            ready_sent = True
            cpu0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.monotonic()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    busy = (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / \
        max(1e-9, time.monotonic() - t0 - (5.0 if total < expected else 0))
    counts = [w.count for w in watches.values()]
    print(json.dumps({
        "deliveries": total, "expected": expected, "watching": watching,
        "bad_status": bad_status, "closed": closed, "error_events": error_events,
        "per_min": min(counts), "per_max": max(counts), "client_cpu": busy,
        "k_p50": percentile(kernel, 50) * 1000, "k_p99": percentile(kernel, 99) * 1000,
        "k_max": max(kernel, default=float("nan")) * 1000,
        "a_p50": percentile(app, 50) * 1000, "a_p99": percentile(app, 99) * 1000,
        "a_max": max(app, default=float("nan")) * 1000,
    }), flush=True)
    for w in watches.values():
        w.sock.close()


# -- 4. memory --------------------------------------------------------------------------

def bench_memory(port: int, client: Client, pid: int, baseline: float):
    namespaces = (TOTAL_OBJECTS - LIST_OBJECTS) // 1000
    start = time.monotonic()
    created = 0
    for k in range(namespaces):
        create_namespace(client, f"bulk-{k}")
        created += create_many(port, f"bulk-{k}", 1000)
    print(f"created {created:,} more RoleBindings in {namespaces} namespaces in "
          f"{time.monotonic() - start:.1f} s")
    after_create = rss_mib(pid)
    start = time.perf_counter()
    status, body = client.call("GET", f"{RBAC}/rolebindings")
    took = time.perf_counter() - start
    items = len(json.loads(body)["items"])
    after_list = rss_mib(pid)
    print(f"full LIST: {items:,} RoleBindings, {len(body) / 2**20:.1f} MiB in "
          f"{took * 1000:.0f} ms")
    del body
    for _ in range(2):
        client.call("GET", f"{RBAC}/rolebindings")
    after_lists = rss_mib(pid)
    print(f"server RSS with {items:,} RoleBindings: {after_create:.0f} MiB after creating, "
          f"{after_list:.0f} MiB after one full LIST   target < 150 MB; upstream 600-650 MB")
    print(f"  (RSS empty after start {baseline:.0f} MiB; after 3 full LISTs "
          f"{after_lists:.0f} MiB)")


def main():
    global WATCHERS, UPDATE_RATE
    if len(sys.argv) > 1 and sys.argv[1] == "--watch-child":
        watch_child(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--py-spy", metavar="OUT",
                        help="record the server with py-spy (raw, --gil) during the first "
                             "fan-out's updates")
    parser.add_argument("--only", choices=("list", "walk", "fanout", "memory"),
                        action="append", help="run only these parts (repeatable)")
    parser.add_argument("--watchers", type=int, default=WATCHERS)
    parser.add_argument("--rate", type=float, default=UPDATE_RATE, help="updates/s")
    parser.add_argument("--keep-log", metavar="FILE", help="copy the server's log here")
    opts = parser.parse_args()
    WATCHERS, UPDATE_RATE = opts.watchers, opts.rate
    parts = set(opts.only or ("list", "walk", "fanout", "memory"))
    if not shutil.which("wrk"):
        sys.exit("bench_lists_watches needs wrk (apt-get install wrk)")
    nofile = raise_nofile()
    if nofile < WATCHERS * 2 + 100:
        sys.exit(f"RLIMIT_NOFILE {nofile} is too low for {WATCHERS} watchers")
    tmp = scratch_dir()
    tokens = write_tokens(tmp)
    port = free_port()
    log = open(os.path.join(tmp, "server.log"), "w+")
    server = start_server(os.path.join(tmp, "data"), port, tokens, log)
    client = None
    try:
        if not wait_ready(server, port, tls_context()):
            sys.exit("platformd exited")
        baseline = rss_mib(server.pid)
        client = Client(port)
        create_namespace(client, NS)
        start = time.monotonic()
        create_many(port, NS, LIST_OBJECTS)
        print(f"created {LIST_OBJECTS:,} RoleBindings in {NS!r} in "
              f"{time.monotonic() - start:.1f} s")
        if "list" in parts:
            bench_list(port, client, opts.runs)
        if "walk" in parts:
            bench_walk(port, client, opts.runs, tmp)
        if "fanout" in parts:
            bench_fanout(port, client, server.pid, opts.runs, opts.py_spy)
        if "memory" in parts:
            bench_memory(port, client, server.pid, baseline)
        if server.poll() is not None:
            print(f"! server exited with {server.returncode}")
    finally:
        if client is not None:
            client.close()
        stop_server(server)
        log.seek(0)
        text = log.read()
        log.close()
        notes = [line for line in text.splitlines()
                 if re.search(r"Traceback|Unhandled|Error|fell \d+ bytes behind", line)]
        print(f"server log: {len(text.splitlines())} lines, {len(notes)} of note")
        for line in notes[:10]:
            print(f"  {line[:300]}")
        if opts.keep_log:
            shutil.copy(os.path.join(tmp, "server.log"), opts.keep_log)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
