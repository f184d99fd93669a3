"""
Encodings benchmark (issue 5): GET of one object and LIST of 1,000 RoleBindings in
JSON, Protobuf and CBOR, requests/s side by side; TLS with keep-alive, wrk (a C client:
`apt-get install wrk`) on the same machine, the server started with
`--feature-gates CBORServingAndStorage=true`.

    python bench/bench_encodings.py [--seconds 5] [--runs 3]

Each (request, encoding) is measured ``--runs`` times, interleaved, so the spread
between runs (other load on the machine) shows next to the median. Not a test: it
prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    RBAC, TOKEN, free_port, scratch_dir, start_server, stop_server, tls_context,
    wait_ready, wrk, write_tokens,
)

OBJECTS = 1000
ENCODINGS = (("JSON", "application/json"),
             ("Protobuf", "application/vnd.platform.protobuf"),
             ("CBOR", "application/cbor"))
RB = f"{RBAC}/namespaces/default/rolebindings"


def create(base: str, context, index: int) -> None:
    body = json.dumps({"metadata": {"name": f"rb-{index:04d}", "labels": {"app": "bench"}},
                       "roleRef": {"kind": "ClusterRole", "name": "view"},
                       "subjects": [{"kind": "User", "name": f"user-{index}"},
                                    {"kind": "Group", "name": "devs"}]}).encode()
    request = urllib.request.Request(f"{base}{RB}", body, {
        "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    urllib.request.urlopen(request, context=context).read()


def size_of(base: str, context, path: str, accept: str) -> int:
    request = urllib.request.Request(f"{base}{path}", headers={
        "Accept": accept, "Authorization": f"Bearer {TOKEN}"})
    return len(urllib.request.urlopen(request, context=context).read())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("bench_encodings needs wrk (apt-get install wrk)")
    tmp = scratch_dir()
    port = free_port()
    context = tls_context()
    server = start_server(os.path.join(tmp, "data"), port, write_tokens(tmp),
                          extra=("--feature-gates", "CBORServingAndStorage=true"))
    base = f"https://127.0.0.1:{port}"
    try:
        if not wait_ready(server, port, context):
            sys.exit("platformd exited")
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: create(base, context, i), range(OBJECTS)))
        requests = (("GET", f"{RB}/rb-0500", "-c32"), ("LIST", RB, "-c8"))
        rates = {}
        for _run in range(opts.runs):
            for label, path, connections in requests:
                for name, accept in ENCODINGS:
                    rate, bad, _p99 = wrk([connections, "-H", f"Authorization: Bearer {TOKEN}",
                                           "-H", f"Accept: {accept}"], opts.seconds,
                                          base + path)
                    if bad:
                        sys.exit(f"{label} {name}: {bad} non-2xx responses")
                    rates.setdefault((label, name), []).append(rate)
        print(f"requests/s, median of {opts.runs} runs of {opts.seconds} s "
              f"(min-max); {OBJECTS} RoleBindings")
        print(f"{'':6}" + "".join(f"{name:>28}" for name, _ in ENCODINGS))
        for label, path, connections in requests:
            cells = []
            for name, accept in ENCODINGS:
                values = rates[(label, name)]
                cells.append(f"{statistics.median(values):,.0f} ({min(values):,.0f}-"
                             f"{max(values):,.0f})")
            print(f"{label:6}" + "".join(f"{c:>28}" for c in cells) + f"   [{connections}]")
        print("body bytes: " + ", ".join(
            f"{label} {name} {size_of(base, context, path, accept):,}"
            for label, path, _ in requests for name, accept in ENCODINGS))
    finally:
        stop_server(server)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
