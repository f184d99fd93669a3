"""
The audit log's cost over HTTP (issue 16): ConfigMap creates per second with no audit
policy, with every request audited at Metadata, and at RequestResponse (both objects in
every event), each written by the writer thread to a file in the default ``blocking``
mode.  A fresh daemon per configuration.

    python bench/bench_audit.py [--creates 2000] [--threads 8] [--rounds 2]

Not a test: it prints figures (and the log's size per create).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    free_port, post_all, start_server, stop_server, tls_context, wait_ready, write_tokens,
)

POLICY = "apiVersion: audit.platform.io/v1\nkind: Policy\nrules:\n- level: {level}\n"


def creates_per_second(port: int, count: int, threads: int, round_: int) -> float:
    bodies = [{"metadata": {"name": f"cm-{round_}-{i}"}, "data": {"k": "v" * 200}}
              for i in range(count)]
    started = time.perf_counter()
    failures = post_all(port, "/api/v1/namespaces/default/configmaps", bodies, threads)
    elapsed = time.perf_counter() - started
    if failures:
        sys.exit(f"{len(failures)} creates failed, first: {failures[0]}")
    return count / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--creates", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    opts = parser.parse_args()
    for level in ("none", "Metadata", "RequestResponse"):
        with tempfile.TemporaryDirectory() as tmp:
            extra: list = []
            log = os.path.join(tmp, "audit.log")
            if level != "none":
                policy = os.path.join(tmp, "policy.yaml")
                with open(policy, "w") as f:
                    f.write(POLICY.format(level=level))
                extra = ["--audit-policy-file", policy, "--audit-log-path", log]
            port = free_port()
            server = start_server(os.path.join(tmp, "data"), port, write_tokens(tmp),
                                  extra=extra)
            try:
                if not wait_ready(server, port, tls_context()):
                    sys.exit("platformd did not start")
                rates = [creates_per_second(port, opts.creates, opts.threads, r)
                         for r in range(opts.rounds)]
            finally:
                stop_server(server)
            size = os.path.getsize(log) if os.path.exists(log) else 0
            print(f"audit {level:16} creates/s " + " ".join(f"{r:,.0f}" for r in rates)
                  + (f"   log bytes per create {size / (opts.creates * opts.rounds):,.0f}"
                     if size else ""))


if __name__ == "__main__":
    main()
