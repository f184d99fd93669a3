"""
Events beside other writes (issue 32): does writing 1,000 Events a second slow other
writes down?

One server; RoleBinding creates with wrk (concurrency 16, as ``bench_api``) for
``--seconds``, alternately alone (A) and with a concurrent Event writer (B): a second
wrk posting core ``v1`` Events at a fixed rate (``--events-per-second``, default 1,000:
``--event-connections`` connections, each waiting ``delay()`` between requests, a
random wait so that they arrive independently; ``--bursty``: a fixed one, so that they
come in bursts, ``event_writer``).  The
order is A B A B ... (``--runs`` pairs), so a neighbour's load falls on both.

``--rolebinding-rate R`` paces the RoleBinding creates instead (a server with headroom:
does their latency hold?).

Printed per run and as medians: RoleBinding creates/s, p50 and p99, the server's CPU (user +
system, threads included, from /proc) per RoleBinding create (the run's CPU less the
Event writer's share is not separable: B's figure is the whole CPU over the RoleBinding
creates, so it includes the Events'), the Events/s achieved; then B/A of the create
rate.  With ``--event-ttl`` short (``30s``), the runs also carry the expiry's deletes.
Not a test: it prints figures (no timing assertions anywhere).

    python bench/bench_events.py [--seconds 10] [--runs 3] [--events-per-second 1000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_api import create_lua  # noqa: E402
from common import (  # noqa: E402
    RBAC, TOKEN, free_port, in_threads, scratch_dir, start_server, stop_server, tls_context,
    tree_cpu_seconds, wait_ready, wait_workers, write_tokens,
)

EVENT_LUA = r"""
local counter = 0
local id = 0
function setup(thread)
  id = id + 1
  thread:set("tid", id)
end
function delay()
  if %(bursty)s then
    return %(delay_ms)d
  end
  return math.floor(-%(delay_ms)d * math.log(1 - math.random()))
end
function request()
  counter = counter + 1
  local body = string.format(
    '{"apiVersion":"v1","kind":"Event","metadata":{"name":"ev-%(run)s-%%d-%%d"},' ..
    '"involvedObject":{"kind":"Pod","namespace":"default","name":"web-%%d","apiVersion":"v1"},' ..
    '"reason":"Pulling","message":"Pulling image","type":"Normal",' ..
    '"source":{"component":"kubelet","host":"node-1"},' ..
    '"firstTimestamp":"2026-01-01T00:00:00Z","lastTimestamp":"2026-01-01T00:00:00Z","count":1}',
    tid, counter, counter %% 50)
  return wrk.format("POST", "/api/v1/namespaces/default/events",
    {["Content-Type"]="application/json", ["Authorization"]="Bearer %(token)s"}, body)
end
"""


def creates(port: int, seconds: float, tmp: str, run: str, rate: float = 0) -> dict:
    """
    ``bench_api``'s RoleBinding creates (concurrency 16), named for this run: as fast as
    they go, or (``rate``) paced to about that many a second (each connection waits
    between requests), with the median latency too.
    """
    lua = os.path.join(tmp, f"create-{run}.lua")
    script = create_lua(f"rb-{run}")
    if rate:
        script += f"function delay()\n  return {max(1, round(16 * 1000 / rate) - 5)}\nend\n"
    with open(lua, "w") as f:
        f.write(script)
    out = subprocess.run(["wrk", "-t2", "-c16", f"-d{seconds:g}s", "--latency", "-s", lua,
                          f"https://127.0.0.1:{port}"], capture_output=True, text=True,
                         check=True).stdout
    figure = re.search(r"Requests/sec:\s+([\d.]+)", out)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.MULTILINE)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.MULTILINE)
    return {"rate": float(figure.group(1)),
            "requests": int(re.search(r"(\d+) requests in", out).group(1)),
            "bad": int(bad.group(1)) if bad else 0,
            "p50": p50.group(1) if p50 else "?", "p99": p99.group(1) if p99 else "?"}


def paced_creates(port: int, seconds: float, run: str, rate: float, threads: int = 4) -> dict:
    """
    RoleBinding creates at an even ``rate`` (``--paced``): ``threads`` keep-alive
    connections, each sending at its own fixed times (staggered, so the requests do not
    come in bursts as wrk's paced connections do).  Open loop: a request's latency runs
    from when it was due, so one sent late because the previous answer was slow counts
    the wait (no coordinated omission).
    """
    interval = threads / rate
    start = time.monotonic() + 0.1
    latencies: list = []
    bad = [0]

    def client(index: int) -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=tls_context(),
                                           timeout=30)
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
        n = 0
        while True:
            due = start + (n + index / threads) * interval
            if due > start + seconds:
                break
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            body = json.dumps({"metadata": {"name": f"paced-{run}-{index}-{n}"}, "roleRef": {
                "apiGroup": "rbac.authorization.platform.io", "kind": "ClusterRole",
                "name": "view"}, "subjects": [{"kind": "User", "name": "u"}]})
            conn.request("POST", f"{RBAC}/namespaces/default/rolebindings", body, headers)
            response = conn.getresponse()
            response.read()
            latencies.append(time.monotonic() - due)
            if response.status != 201:
                bad[0] += 1
            n += 1
        conn.close()

    in_threads(client, threads)
    latencies.sort()

    def at(q: float) -> str:
        return f"{latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000:.2f}ms"
    return {"rate": len(latencies) / seconds, "requests": len(latencies), "bad": bad[0],
            "p50": at(0.5), "p90": at(0.9), "p99": at(0.99)}


def event_writer(port: int, seconds: float, tmp: str, rate: float, connections: int,
                 run: str, bursty: bool = False):
    """
    A background wrk posting Events at about ``rate``/s; its Popen.

    Each connection sends, waits, sends again: rate ~ connections / (wait + the
    request's time).  The wait is drawn from an exponential distribution, so the
    connections send independently of each other (Poisson arrivals, as from many
    separate nodes), and the request's time is taken as 5 ms.  ``bursty``: a fixed wait
    instead, the request's time taken as 20 ms.  The connections then stay in step:
    group commit answers a burst's Events together, so each connection's next request
    comes at the same moment, and the Events arrive in bursts of up to
    ``connections``, which is the harder case.  Under a slower server the rate falls
    short (the achieved rate is printed).
    """
    lua = os.path.join(tmp, f"events-{run}.lua")
    delay_ms = max(1, round(connections * 1000 / rate) - (20 if bursty else 5))
    with open(lua, "w") as f:
        f.write(EVENT_LUA % {"delay_ms": delay_ms, "token": TOKEN, "run": run,
                             "bursty": "true" if bursty else "false"})
    return subprocess.Popen(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", lua,
         f"https://127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def writer_figures(process) -> dict:
    out, _ = process.communicate()
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rate": float(rate.group(1)) if rate else 0.0,
            "bad": int(bad.group(1)) if bad else 0}


def one_run(server, port, seconds, tmp, with_events, opts, run: str) -> dict:
    writer = None
    if with_events:
        writer = event_writer(port, seconds + 2, tmp, opts.events_per_second,
                              opts.event_connections, run, opts.bursty)
        time.sleep(1)  # the writer is at its pace before the creates start
    before = tree_cpu_seconds(server.pid)
    figures = (paced_creates(port, seconds, run, opts.paced) if opts.paced
               else creates(port, seconds, tmp, run, opts.rolebinding_rate))
    cpu = tree_cpu_seconds(server.pid) - before
    figures["cpu_ms"] = cpu * 1000 / max(1, figures["requests"])
    figures["events"] = writer_figures(writer) if writer else None
    return figures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--events-per-second", type=float, default=1000)
    parser.add_argument("--event-connections", type=int, default=64)
    parser.add_argument("--event-ttl", default="1h")
    parser.add_argument("--bursty", action="store_true",
                        help="Events in bursts (fixed waits: the connections stay in "
                             "step) instead of independent arrivals")
    parser.add_argument("--workers", type=int, default=1,
                        help="the server's --workers (its CPU is every worker's)")
    parser.add_argument("--paced", type=float, default=0,
                        help="RoleBinding creates at this even rate from an open-loop "
                             "client instead of wrk (latency from when each was due)")
    parser.add_argument("--rolebinding-rate", type=float, default=0,
                        help="pace the RoleBinding creates to about this many a second "
                             "(default: as fast as they go)")
    opts = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("bench_events needs wrk (apt-get install wrk)")
    tmp = scratch_dir()
    tokens = write_tokens(tmp)
    port = free_port()
    # This checkout's code (not whatever platformd the environment installed).
    tree = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    server = start_server(os.path.join(tmp, "data"), port, tokens,
                          extra=("--event-ttl", opts.event_ttl,
                                 "--workers", str(opts.workers)), tree=tree)
    results = {"A": [], "B": []}
    try:
        if not wait_ready(server, port, tls_context()):
            sys.exit("platformd exited")
        wait_workers(server.pid, opts.workers)
        creates(port, 2, tmp, "warm")
        for i in range(opts.runs):
            for label in ("A", "B"):
                r = one_run(server, port, opts.seconds, tmp, label == "B", opts,
                            f"{label.lower()}{i}")
                results[label].append(r)
                events = r["events"]
                print(f"run {i + 1} {label}: RoleBinding creates/s {r['rate']:,.0f} "
                      f"(non-2xx {r['bad']}, p50 {r['p50']}, p99 {r['p99']}), server CPU "
                      f"{r['cpu_ms']:.3f} ms/create"
                      + (f", Events/s {events['rate']:,.0f} (non-2xx {events['bad']})"
                         if events else ""), flush=True)
    finally:
        stop_server(server)
        shutil.rmtree(tmp, ignore_errors=True)

    def median(label, key):
        return statistics.median(r[key] for r in results[label])
    print(f"A (alone):       {median('A', 'rate'):,.0f} creates/s, "
          f"{median('A', 'cpu_ms'):.3f} ms CPU/create")
    print(f"B (with Events): {median('B', 'rate'):,.0f} creates/s, "
          f"{median('B', 'cpu_ms'):.3f} ms CPU/create, "
          f"{statistics.median(r['events']['rate'] for r in results['B']):,.0f} Events/s")
    ratios = [b["rate"] / a["rate"] for a, b in zip(results["A"], results["B"])]
    print(f"B/A create rate: median {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f})")
    for key in ("p50", "p90", "p99") if opts.paced else ("p50", "p99"):
        pairs = [(milliseconds(a[key]), milliseconds(b[key]))
                 for a, b in zip(results["A"], results["B"])]
        ratios = [b / a for a, b in pairs]
        print(f"B/A create latency {key}: median {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f}-{max(ratios):.3f}; A median "
              f"{statistics.median(a for a, _ in pairs):.2f} ms, B "
              f"{statistics.median(b for _, b in pairs):.2f} ms)")


def milliseconds(text: str) -> float:
    """wrk's latency ("812.00us", "5.78ms", "1.02s") in milliseconds."""
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


if __name__ == "__main__":
    main()
