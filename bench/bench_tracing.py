"""
Tracing's cost over HTTP (issue 16): GETs and creates per second with tracing off (no
``--tracing-config-file``), configured but sampling nothing (no ``samplingRatePerMillion``:
every request still makes a non-recording span), and sampling every request (1,000,000
per million) exported to an OTLP collector in this process.  Target: off costs < 2 %
(it is the code path without tracing: no filter, one ``is None`` per storage write).
The server is pinned to CPU 0; wrk (one thread) and the collector to CPU 1; the runs
alternate between the modes, since this VM varies run to run by more than the effect.

    python bench/bench_tracing.py [--seconds 5] [--rounds 3]

Not a test: it prints figures (and the spans the collector received).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import TOKEN, free_port, stop_server, tls_context, wait_ready  # noqa: E402

CREATE_LUA = r"""
local counter = 0
function request()
  counter = counter + 1
  local body = string.format('{"metadata":{"name":"cm-%%d"},"data":{"k":"v"}}', counter)
  return wrk.format("POST", "/api/v1/namespaces/default/configmaps",
    {["Content-Type"]="application/json", ["Authorization"]="Bearer %(token)s"}, body)
end
"""
MODES = {"off": None, "sampling 0": "", "sampling 100%": "samplingRatePerMillion: 1000000\n"}


class Counter(trace_service_pb2_grpc.TraceServiceServicer):
    spans = 0

    def Export(self, request, context):
        Counter.spans += sum(len(s.spans) for r in request.resource_spans
                             for s in r.scope_spans)
        return trace_service_pb2.ExportTraceServiceResponse()


def start(tmp: str, port: int, tracing, collector: int) -> subprocess.Popen:
    tokens = os.path.join(tmp, "tokens.csv")
    with open(tokens, "w") as f:
        f.write(f'{TOKEN},bench-admin,1,"system:masters"\n')
    args = []
    if tracing is not None:
        config = os.path.join(tmp, "tracing.yaml")
        with open(config, "w") as f:
            f.write("apiVersion: apiserver.config.platform.io/v1\nkind: TracingConfiguration\n"
                    f"endpoint: 127.0.0.1:{collector}\n{tracing}")
        args = ["--tracing-config-file", config]
    twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
    return subprocess.Popen(
        ["taskset", "-c", "0", twistd, "-n", "--pidfile=", "platformd", "--data-dir",
         os.path.join(tmp, "data"), "--secure-port", str(port), "--token-auth-file", tokens,
         *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wrk(args, seconds: int, url: str) -> float:
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", f"-d{seconds}s", *args, url],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def measure(tracing, seconds: int, collector: int) -> tuple:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = start(tmp, port, tracing, collector)
        try:
            if not wait_ready(server, port, tls_context()):
                sys.exit("platformd did not start")
            base = f"https://127.0.0.1:{port}"
            get = wrk(["-c32", "-H", f"Authorization: Bearer {TOKEN}"], seconds,
                      f"{base}/api/v1/namespaces/default")
            lua = os.path.join(tmp, "create.lua")
            with open(lua, "w") as f:
                f.write(CREATE_LUA % {"token": TOKEN})
            create = wrk(["-c16", "-s", lua], seconds, base)
        finally:
            stop_server(server)
    return get, create


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    os.sched_setaffinity(0, {1})
    collector = grpc.server(futures.ThreadPoolExecutor(2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Counter(), collector)
    collector_port = collector.add_insecure_port("127.0.0.1:0")
    collector.start()
    results: dict = {mode: [] for mode in MODES}
    for _ in range(opts.rounds):
        for mode, tracing in MODES.items():
            results[mode].append(measure(tracing, opts.seconds, collector_port))
    for mode, runs in results.items():
        gets = " ".join(f"{g:,.0f}" for g, _ in runs)
        creates = " ".join(f"{c:,.0f}" for _, c in runs)
        print(f"{mode:14} GETs/s {gets}   creates/s {creates}")
    print(f"spans received by the collector: {Counter.spans:,}")
    collector.stop(0)


if __name__ == "__main__":
    main()
