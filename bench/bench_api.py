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
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

TOKEN = "bench-token"
RBAC = "/apis/rbac.authorization.platform.io/v1"

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
    '"metadata":{"name":"rb-%%d-%%d"},"roleRef":{"apiGroup":"rbac.authorization.platform.io",' ..
    '"kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"alice"}]}',
    tid, counter)
  return wrk.format("POST", "%(path)s", {["Content-Type"]="application/json",
    ["Authorization"]="Bearer %(token)s"}, body)
end
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready(port: int, context) -> bool:
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context,
                                    timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def wrk(args, seconds, url):
    out = subprocess.run(["wrk", "-t2", f"-d{seconds}s", "--latency", *args, url],
                         capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.MULTILINE)
    return rate, int(bad.group(1)) if bad else 0, p99.group(1) if p99 else "?"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=10)
    opts = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("bench_api needs wrk (apt-get install wrk)")
    tmp = tempfile.mkdtemp(prefix="platformd-bench-")
    tokens = os.path.join(tmp, "tokens.csv")
    with open(tokens, "w") as f:
        f.write(f'{TOKEN},bench,1,"system:masters"\n')
    port = free_port()
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
    start = time.monotonic()
    server = subprocess.Popen(
        [twistd, "-n", "--pidfile=", "platformd", "--data-dir", os.path.join(tmp, "data"),
         "--secure-port", str(port), "--token-auth-file", tokens],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not ready(port, context):
            if server.poll() is not None:
                sys.exit("platformd exited")
            time.sleep(0.005)
        startup = time.monotonic() - start
        print(f"start to /readyz 200: {startup * 1000:.0f} ms (first start, PKI generated)")

        lua = os.path.join(tmp, "create.lua")
        with open(lua, "w") as f:
            f.write(CREATE_LUA % {"path": f"{RBAC}/namespaces/default/rolebindings",
                                  "token": TOKEN})
        base = f"https://127.0.0.1:{port}"
        rate, bad, p99 = wrk(["-c16", "-s", lua], opts.seconds, base)
        print(f"creates/s at concurrency 16: {rate:,.0f} (non-2xx: {bad}, p99 {p99})")

        body = json.dumps({"metadata": {"name": "target"}, "roleRef": {
            "kind": "ClusterRole", "name": "view"}}).encode()
        request = urllib.request.Request(f"{base}{RBAC}/namespaces/default/rolebindings",
                                         body, {"Content-Type": "application/json",
                                                "Authorization": f"Bearer {TOKEN}"})
        urllib.request.urlopen(request, context=context).read()
        rate, bad, p99 = wrk(["-c32", "-H", f"Authorization: Bearer {TOKEN}"], opts.seconds,
                             f"{base}{RBAC}/namespaces/default/rolebindings/target")
        print(f"GETs/s at concurrency 32: {rate:,.0f} (non-2xx: {bad}, p99 {p99})")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)
        server2_start = time.monotonic()
        server2 = subprocess.Popen(
            [twistd, "-n", "--pidfile=", "platformd", "--data-dir", os.path.join(tmp, "data"),
             "--secure-port", str(port), "--token-auth-file", tokens],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not ready(port, context) and server2.poll() is None:
            time.sleep(0.005)
        print(f"restart to /readyz 200 (data present): "
              f"{(time.monotonic() - server2_start) * 1000:.0f} ms")
        server2.send_signal(signal.SIGTERM)
        server2.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
