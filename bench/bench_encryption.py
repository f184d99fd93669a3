"""
Encryption at rest's cost over HTTP (issue 15): creates/s and GETs/s of Secrets with an
aesgcm EncryptionConfiguration against identity.  Reads are served from the watch
cache's plaintext, so GETs should not move; creates pay one AES-GCM seal in the SQLite
writer thread.  Server on CPU 0, wrk (one thread) on CPU 1, the modes alternating.

    python bench/bench_encryption.py [--seconds 5] [--rounds 3]

Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import subprocess
import sys
import tempfile

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import TOKEN, free_port, post_all, stop_server, tls_context, wait_ready  # noqa: E402

SECRETS = "/api/v1/namespaces/default/secrets"
CONFIG = """apiVersion: apiserver.config.platform.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - {provider}
"""
AESGCM = "aesgcm: {keys: [{name: k1, secret: " + base64.b64encode(os.urandom(32)).decode() + "}]}"

CREATE_LUA = r"""
local counter = 0
function request()
  counter = counter + 1
  local body = string.format('{"metadata":{"name":"s-%%d"},"stringData":{"password":"hunter2"}}',
                             counter)
  return wrk.format("POST", "%(path)s", {["Content-Type"]="application/json",
    ["Authorization"]="Bearer %(token)s"}, body)
end
"""


def wrk(args, seconds: int, url: str) -> float:
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", f"-d{seconds}s", *args, url],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def measure(provider: str, seconds: int) -> tuple:
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write(f'{TOKEN},bench,1,"system:masters"\n')
        config = os.path.join(tmp, "encryption.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.format(provider=provider))
        port = free_port()
        twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
        server = subprocess.Popen(
            ["taskset", "-c", "0", twistd, "-n", "--pidfile=", "platformd", "--data-dir",
             os.path.join(tmp, "data"), "--secure-port", str(port), "--token-auth-file",
             tokens, "--encryption-provider-config", config],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            if not wait_ready(server, port, tls_context()):
                sys.exit(f"platformd ({provider}) did not start")
            failures = post_all(port, SECRETS, [{"metadata": {"name": "read-me"},
                                                 "stringData": {"k": "v"}}], threads=1)
            if failures:
                sys.exit(f"could not create the Secret: {failures}")
            base = f"https://127.0.0.1:{port}"
            lua = os.path.join(tmp, "create.lua")
            with open(lua, "w") as f:
                f.write(CREATE_LUA % {"path": SECRETS, "token": TOKEN})
            create = wrk(["-c16", "-s", lua], seconds, base)
            get = wrk(["-c32", "-H", f"Authorization: Bearer {TOKEN}"], seconds,
                      f"{base}{SECRETS}/read-me")
        finally:
            stop_server(server)
    return create, get


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    results: dict = {"identity: {}": [], AESGCM: []}
    for _ in range(opts.rounds):
        for provider in results:
            results[provider].append(measure(provider, opts.seconds))
    for provider, runs in results.items():
        name = provider.split(":")[0]
        print(f"{name:9} creates/s " + " ".join(f"{c:,.0f}" for c, _ in runs)
              + "   GETs/s " + " ".join(f"{g:,.0f}" for _, g in runs))


if __name__ == "__main__":
    main()
