"""
Authorization's cost over HTTP (issue 13): GETs and creates per second by a non-admin
user who holds one RoleBinding, with 1,000 RoleBindings and 200 Roles loaded, under
``--authorization-mode RBAC`` against ``AlwaysAllow``.  Target: within 10 %.  The server
is pinned to CPU 0 and wrk (one thread) to CPU 1, the runs alternate between the modes,
since this VM varies run to run by more than the effect measured.

    python bench/bench_authz.py [--seconds 5] [--rounds 3]

Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    RBAC, TOKEN, free_port, post_all, stop_server, tls_context, wait_ready,
)

USER_TOKEN = "bench-user-token"
NAMESPACE = "default"

CREATE_LUA = r"""
local counter = 0
function request()
  counter = counter + 1
  local body = string.format('{"metadata":{"name":"cm-%%d"},"data":{"k":"v"}}', counter)
  return wrk.format("POST", "/api/v1/namespaces/%(ns)s/configmaps",
    {["Content-Type"]="application/json", ["Authorization"]="Bearer %(token)s"}, body)
end
"""


def start(tmp: str, port: int, mode: str) -> subprocess.Popen:
    tokens = os.path.join(tmp, "tokens.csv")
    with open(tokens, "w") as f:
        f.write(f'{TOKEN},bench-admin,1,"system:masters"\n{USER_TOKEN},bench-user,2\n')
    twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
    return subprocess.Popen(
        ["taskset", "-c", "0", twistd, "-n", "--pidfile=", "platformd", "--data-dir",
         os.path.join(tmp, "data"), "--secure-port", str(port), "--token-auth-file", tokens,
         "--authorization-mode", mode],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def load(port: int) -> None:
    """200 Roles, 1,000 RoleBindings of other users, and the bench user's own binding."""
    roles = [{"metadata": {"name": f"role-{i}"},
              "rules": [{"apiGroups": [""], "resources": [f"things{i}"], "verbs": ["get"]}]}
             for i in range(200)]
    roles.append({"metadata": {"name": "bench"},
                  "rules": [{"apiGroups": ["", "rbac.authorization.platform.io"],
                             "resources": ["configmaps", "rolebindings"],
                             "verbs": ["get", "list", "create"]}]})
    bindings = [{"metadata": {"name": f"rb-{i}"},
                 "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "Role",
                             "name": f"role-{i % 200}"},
                 "subjects": [{"apiGroup": "rbac.authorization.platform.io", "kind": "User",
                               "name": f"user-{i}"}]} for i in range(1000)]
    bindings.append({"metadata": {"name": "bench"},
                     "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "Role",
                                 "name": "bench"},
                     "subjects": [{"apiGroup": "rbac.authorization.platform.io",
                                   "kind": "User", "name": "bench-user"}]})
    for path, bodies in ((f"{RBAC}/namespaces/{NAMESPACE}/roles", roles),
                         (f"{RBAC}/namespaces/{NAMESPACE}/rolebindings", bindings)):
        failures = post_all(port, path, bodies, threads=8)
        if failures:
            sys.exit(f"loading failed: {failures[:3]}")


def wrk(args, seconds: int, url: str) -> float:
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", f"-d{seconds}s", *args, url],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def measure(mode: str, seconds: int) -> tuple:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = start(tmp, port, mode)
        try:
            if not wait_ready(server, port, tls_context()):
                sys.exit(f"platformd ({mode}) did not start")
            load(port)
            base = f"https://127.0.0.1:{port}"
            get = wrk(["-c32", "-H", f"Authorization: Bearer {USER_TOKEN}"], seconds,
                      f"{base}{RBAC}/namespaces/{NAMESPACE}/rolebindings/bench")
            lua = os.path.join(tmp, "create.lua")
            with open(lua, "w") as f:
                f.write(CREATE_LUA % {"ns": NAMESPACE, "token": USER_TOKEN})
            create = wrk(["-c16", "-s", lua], seconds, base)
        finally:
            stop_server(server)
    return get, create


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    results: dict = {"AlwaysAllow": [], "RBAC": []}
    for _ in range(opts.rounds):
        for mode in results:
            results[mode].append(measure(mode, opts.seconds))
    for mode, runs in results.items():
        gets = " ".join(f"{g:,.0f}" for g, _ in runs)
        creates = " ".join(f"{c:,.0f}" for _, c in runs)
        print(f"{mode:12} GETs/s {gets}   creates/s {creates}")


if __name__ == "__main__":
    main()
