"""
API benchmarks (issue 2): time from start to /readyz 200, creates per second at
concurrency 16, single-object GETs per second at concurrency 32; TLS with keep-alive,
the load generator (wrk, a C client: `apt-get install wrk`) on the same machine.

    python bench/bench_api.py [--seconds 10]

Targets: ready < 1 s; >= 2,000 creates/s; >= 4,600 GETs/s. For scale, upstream
kube-apiserver 1.36 + etcd 3.6 on this machine kind: ~1,850 creates/s, ~4,530 GETs/s,
ready after ~2 s. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import urllib.request

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    RBAC, TOKEN, free_port, scratch_dir, start_server, stop_server, tls_context,
    wait_ready, write_tokens, wrk_run,
)

CREATE_LUA = r"""
local counter = 0
local id = 0
function setup(thread)
  id = id + 1
  thread:set("tid", id)
end
function request()
  counter = counter + 1
  local body = string.format(
    '{"apiVersion":"rbac.authorization.platform.io/v1","kind":"RoleBinding",' ..
    '"metadata":{"name":"%(name)s-%%d-%%d"},"roleRef":{"apiGroup":"rbac.authorization.platform.io",' ..
    '"kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"alice"}]}',
    tid, counter)
  return wrk.format("POST", "%(path)s", {["Content-Type"]="application/json",
    ["Authorization"]="Bearer %(token)s"}, body)
end
"""


def create_lua(name: str = "rb", path: str = f"{RBAC}/namespaces/default/rolebindings") -> str:
    """The wrk script creating RoleBindings at ``path`` (default: in ``default``), named
    ``<name>-<thread>-<n>`` (a name of its own per run keeps runs on one server apart)."""
    return CREATE_LUA % {"name": name, "path": path, "token": TOKEN}


def write_create_lua(tmp: str) -> str:
    """The wrk script creating RoleBindings in ``default``; its path."""
    lua = os.path.join(tmp, "create.lua")
    with open(lua, "w") as f:
        f.write(create_lua())
    return lua


def run_creates(port: int, seconds: float, tmp: str) -> dict:
    """RoleBinding creates at concurrency 16 (wrk's figures, see ``common.wrk_run``)."""
    lua = os.path.join(tmp, "create.lua")
    if not os.path.exists(lua):
        write_create_lua(tmp)
    return wrk_run(["-c16", "-s", lua], seconds, f"https://127.0.0.1:{port}")


def prepare_gets(port: int) -> None:
    """The RoleBinding ``target`` that ``run_gets`` reads (created once per server)."""
    body = json.dumps({"metadata": {"name": "target"}, "roleRef": {
        "kind": "ClusterRole", "name": "view"}}).encode()
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{RBAC}/namespaces/default/rolebindings", body,
        {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    urllib.request.urlopen(request, context=tls_context()).read()


def run_gets(port: int, seconds: float, tmp: str) -> dict:
    """Single-object GETs at concurrency 32 (wrk's figures)."""
    return wrk_run(["-c32", "-H", f"Authorization: Bearer {TOKEN}"], seconds,
                   f"https://127.0.0.1:{port}{RBAC}/namespaces/default/rolebindings/target")


def run_events(port: int, seconds: float, tmp: str) -> dict:
    """Core v1 Event creates at concurrency 16, as fast as they go (issue 32: the body
    of ``bench_events.EVENT_LUA``; wrk's figures)."""
    from bench_events import EVENT_LUA  # it imports this module: here, not at the top
    lua = os.path.join(tmp, "events.lua")
    if not os.path.exists(lua):
        with open(lua, "w") as f:
            # A fixed wait of 0 ms: as fast as they go.
            f.write(EVENT_LUA % {"delay_ms": 0, "token": TOKEN, "run": "ab", "bursty": "true"})
    return wrk_run(["-c16", "-s", lua], seconds, f"https://127.0.0.1:{port}")


# What bench/ab.py can run: name -> (prepare(port) or None, run(port, seconds, tmp)).
AB_BENCHMARKS = {
    "creates": (None, run_creates),
    "gets": (prepare_gets, run_gets),
    "events": (None, run_events),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=10)
    opts = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("bench_api needs wrk (apt-get install wrk)")
    tmp = scratch_dir()
    tokens = write_tokens(tmp)
    port = free_port()
    context = tls_context()
    data = os.path.join(tmp, "data")
    start = time.monotonic()
    server = start_server(data, port, tokens)
    try:
        if not wait_ready(server, port, context):
            sys.exit("platformd exited")
        startup = time.monotonic() - start
        print(f"start to /readyz 200: {startup * 1000:.0f} ms (first start, PKI generated)")

        r = run_creates(port, opts.seconds, tmp)
        print(f"creates/s at concurrency 16: {r['rate']:,.0f} (non-2xx: {r['bad']}, "
              f"p99 {r['p99']})")

        prepare_gets(port)
        r = run_gets(port, opts.seconds, tmp)
        print(f"GETs/s at concurrency 32: {r['rate']:,.0f} (non-2xx: {r['bad']}, "
              f"p99 {r['p99']})")
    finally:
        stop_server(server)
        server2_start = time.monotonic()
        server2 = start_server(data, port, tokens)
        wait_ready(server2, port, context)
        print(f"restart to /readyz 200 (data present): "
              f"{(time.monotonic() - server2_start) * 1000:.0f} ms")
        stop_server(server2)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
