"""
The cost of metrics (issue 16): GETs of one object per second (concurrency 32) and
RoleBinding creates per second (concurrency 16) against this tree and a baseline tree
without metrics (a checkout of the commit before them), servers alternating, each on
CPU 0 with wrk on CPU 1.  Target: within 5 %.  Besides the rates it prints the server's
CPU time per request (utime + stime from /proc over the run, divided by the requests
served), which a machine busy with other work blurs much less than the rates.  Also
times a scrape of /metrics.

    git archive <commit-before-metrics> | tar -x -C /tmp/baseline
    python bench/bench_metrics.py --baseline /tmp/baseline [--seconds 5] [--rounds 3]
    python bench/bench_metrics.py --micro

``--micro`` times, in process, what metrics add to one GET (the request's labels and
three series, authentication's and authorization's attempts and durations): a figure
that a busy machine does not blur as it does requests per second.

Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_api import create_lua  # noqa: E402
from common import (  # noqa: E402
    RBAC, TOKEN, cpu_seconds, free_port, stop_server, tls_context, wait_ready,
)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CM = "/api/v1/namespaces/default/configmaps"


def start(tree: str, tmp: str, tokens: str):
    port = free_port()
    twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
    server = subprocess.Popen(
        ["taskset", "-c", "0", twistd, "-n", "--pidfile=", "platformd", "--data-dir",
         tempfile.mkdtemp(dir=tmp), "--secure-port", str(port), "--token-auth-file", tokens],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tree,
        env={**os.environ, "PYTHONPATH": tree})
    if not wait_ready(server, port, tls_context()):
        sys.exit(f"platformd ({tree}) did not start")
    return server, port


def call(port: int, method: str, path: str, body=None) -> bytes:
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}",
        json.dumps(body).encode() if body is not None else None,
        {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method=method)
    return urllib.request.urlopen(request, context=tls_context()).read()


def wrk(args, seconds: int, url: str, pid: int) -> tuple:
    """(requests/s, server CPU µs per request)."""
    before = cpu_seconds(pid)
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", f"-d{seconds}s", "-H",
                          f"Authorization: Bearer {TOKEN}", *args, url],
                         capture_output=True, text=True, check=True).stdout
    used = cpu_seconds(pid) - before
    served = int(re.search(r"(\d+) requests in", out).group(1))
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), used / served * 1e6


def measure(tree: str, tmp: str, tokens: str, seconds: int, script: str) -> tuple:
    server, port = start(tree, tmp, tokens)
    try:
        call(port, "POST", CM, {"metadata": {"name": "bench"}})
        gets = wrk(["-c32"], seconds, f"https://127.0.0.1:{port}{CM}/bench", server.pid)
        creates = wrk(["-c16", "-s", script], seconds,
                      f"https://127.0.0.1:{port}{RBAC}/rolebindings", server.pid)
        scrape = None
        if tree == HERE:
            started = time.perf_counter()
            call(port, "GET", "/metrics")
            scrape = time.perf_counter() - started
        return gets, creates, scrape
    finally:
        stop_server(server)


def micro(count: int = 200_000) -> None:
    from twisted.web.test.requesthelper import DummyRequest

    from platformd.api.filters import Authentication, Authorization
    from platformd.metrics.apiserver import APIServerMetrics
    from platformd.metrics.requests import RequestMetrics
    from platformd.requestinfo import parse

    metrics = APIServerMetrics(process=False)
    recorder = RequestMetrics(metrics)
    authn, authz = Authentication(None, metrics), Authorization(None, metrics)
    request = DummyRequest([b"api", b"v1", b"namespaces", b"default", b"configmaps", b"a"])
    request.uri = b"/api/v1/namespaces/default/configmaps/a"
    request.code = 200
    info = parse(b"GET", "/api/v1/namespaces/default/configmaps/a", False)
    started = time.process_time()
    for _ in range(count):
        begun = time.perf_counter()
        authn._measure("success", begun)
        metrics.authenticated_users.inc(("other",))
        authz._measure("allowed", begun)
        recorder.record(request, recorder.labels(request, info), time.perf_counter() - begun,
                        812)
    per = (time.process_time() - started) / count * 1e6
    print(f"metrics recorded for one GET: {per:.1f} µs of CPU")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--micro", action="store_true", help="only the in-process timing")
    parser.add_argument("--baseline", help="a source tree without metrics")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    if opts.micro:
        micro()
        return
    if not opts.baseline:
        parser.error("--baseline is required (or --micro)")
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write(f'{TOKEN},bench-admin,1,"system:masters"\n')
        script = os.path.join(tmp, "create.lua")
        with open(script, "w") as f:
            f.write(create_lua())
        results: dict = {"baseline": [], "metrics": []}
        for _ in range(opts.rounds):
            results["baseline"].append(measure(opts.baseline, tmp, tokens, opts.seconds, script))
            results["metrics"].append(measure(HERE, tmp, tokens, opts.seconds, script))
    for name, rounds in results.items():
        print(f"{name:9} GETs/s " + " · ".join(f"{g[0]:,.0f}" for g, _, _ in rounds)
              + " (CPU µs each " + " · ".join(f"{g[1]:.0f}" for g, _, _ in rounds)
              + ")   creates/s " + " · ".join(f"{c[0]:,.0f}" for _, c, _ in rounds)
              + " (CPU µs each " + " · ".join(f"{c[1]:.0f}" for _, c, _ in rounds) + ")")
    scrapes = [s for _, _, s in results["metrics"] if s is not None]
    print(f"one /metrics scrape after the load: {min(scrapes) * 1000:.1f} ms (best)")


if __name__ == "__main__":
    main()
