"""
HTTP/1.1 against HTTP/2 on the same server, measured with h2load (Debian
``nghttp2-client``): one object GET and a 100-item list, over 10 keep-alive HTTP/1.1
connections (and 1, as a client that does not open more would), and over HTTP/2 as 10
connections of 1 stream and 1 connection of 10 streams (client-go's way: one connection
for everything).  Prints requests/s per case.

    PYTHONPATH=src:. /tmp/ci-check/.tox/py/bin/python bench/bench_http2.py [seconds]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from bench.common import (
    TOKEN, free_port, post_all, scratch_dir, start_server, stop_server, tls_context,
    wait_ready, write_tokens,
)

PATH = "/api/v1/namespaces/default/configmaps"


def h2load(url: str, seconds: int, h1: bool, clients: int, streams: int) -> tuple:
    """(requests/s, failed) of h2load over ``seconds``."""
    args = ["h2load", "-D", str(seconds), "-c", str(clients), "-m", str(streams),
            "-H", f"Authorization: Bearer {TOKEN}", "-H", "Accept: application/json"]
    if h1:
        args.append("--h1")
    out = subprocess.run([*args, url], capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
    failed = int(re.search(r"(\d+) failed", out).group(1))
    protocol = re.search(r"Application protocol: (\S+)", out).group(1)
    return rate, failed, protocol


def main() -> None:
    if shutil.which("h2load") is None:
        sys.exit("h2load is not installed (Debian: nghttp2-client)")
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tmp = scratch_dir()
    port = free_port()
    server = start_server(os.path.join(tmp, "data"), port, write_tokens(tmp),
                          extra=("--enable-http2-serving",))
    try:
        if not wait_ready(server, port, tls_context()):
            sys.exit("the server did not start")
        failures = post_all(port, PATH, [{"metadata": {"name": f"cm-{i}"},
                                          "data": {"k": "v" * 200}} for i in range(100)], 4)
        assert not failures, failures[:3]
        base = f"https://127.0.0.1:{port}{PATH}"
        for label, url in (("GET one", base + "/cm-1"), ("LIST 100", base)):
            for name, h1, clients, streams in (("HTTP/1.1, 1 connection", True, 1, 1),
                                               ("HTTP/1.1, 10 connections", True, 10, 1),
                                               ("HTTP/2, 10 connections", False, 10, 1),
                                               ("HTTP/2, 1 connection x 10 streams",
                                                False, 1, 10)):
                rate, failed, protocol = h2load(url, seconds, h1, clients, streams)
                print(f"{label:9} {name:36} {rate:8.0f} req/s  failed {failed}  ({protocol})")
    finally:
        stop_server(server)


if __name__ == "__main__":
    main()
