"""
Authentication's cost over HTTP (issue 14): GETs per second with a JWT bearer token (a
service-account token: signature, claims and the service account's lookup, behind the
token cache, warm) against a static token from --token-auth-file; both users are in
system:masters so authorization costs the same.  Target: within 10 %.  Server on CPU 0,
wrk (one thread) on CPU 1, the two alternating.

    python bench/bench_authn.py [--seconds 5] [--rounds 3]

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
import urllib.request

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RBAC, TOKEN, free_port, stop_server, tls_context, wait_ready  # noqa: E402

SA = "/api/v1/namespaces/default/serviceaccounts"


def call(port: int, method: str, path: str, body=None) -> dict:
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}", json.dumps(body).encode() if body is not None else None,
        {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method=method)
    return json.loads(urllib.request.urlopen(request, context=tls_context()).read())


def wrk(token: str, seconds: int, url: str) -> float:
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c32", f"-d{seconds}s", "-H",
                          f"Authorization: Bearer {token}", url],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write(f'{TOKEN},bench-admin,1,"system:masters"\n')
        port = free_port()
        twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
        server = subprocess.Popen(
            ["taskset", "-c", "0", twistd, "-n", "--pidfile=", "platformd", "--data-dir",
             os.path.join(tmp, "data"), "--secure-port", str(port), "--token-auth-file",
             tokens], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            if not wait_ready(server, port, tls_context()):
                sys.exit("platformd did not start")
            call(port, "POST", SA, {"metadata": {"name": "bench"}})
            call(port, "POST", f"{RBAC}/clusterrolebindings", {
                "metadata": {"name": "bench-sa"},
                "roleRef": {"apiGroup": "rbac.authorization.platform.io",
                            "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": "bench",
                              "namespace": "default"}]})
            jwt = call(port, "POST", f"{SA}/bench/token", {})["status"]["token"]
            url = f"https://127.0.0.1:{port}{SA}/bench"
            results: dict = {"static token": [], "JWT (service account)": []}
            for _ in range(opts.rounds):
                results["static token"].append(wrk(TOKEN, opts.seconds, url))
                results["JWT (service account)"].append(wrk(jwt, opts.seconds, url))
        finally:
            stop_server(server)
    for name, rates in results.items():
        print(f"{name:22} GETs/s " + " ".join(f"{r:,.0f}" for r in rates))


if __name__ == "__main__":
    main()
