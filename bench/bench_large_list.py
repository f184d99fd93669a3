"""
Large-list memory benchmark (issue 5): the server's peak resident memory while it serves
one LIST of ~100 MB.

    PYTHONPATH=src:. python bench/bench_large_list.py [--mib 100] [--object-kib 400]
        [--threads 4] [--slow-chunk 65536] [--slow-pause 0.005] [--cbor]

A scratch platformd (``twistd -n platformd``, fresh data directory, HTTPS) gets ``--mib``
MiB of ConfigMaps in one namespace, each with ``--object-kib`` KiB of ``data`` (random
base64 text in 64 KiB values, so gzip has real work; the request body limit is 3 MiB),
created over ``--threads`` keep-alive connections.  Then one full LIST per variant, on
its own connection:

* encodings JSON and Protobuf (and CBOR with ``--cbor``, which starts the server with
  ``--feature-gates CBORServingAndStorage=true``), each without and with
  ``Accept-Encoding: gzip``;
* a fast reader (as fast as Python's ``http.client`` decrypts and reads) and a slow one
  (``--slow-chunk`` bytes, then a ``--slow-pause`` s sleep, repeated): the server may
  only produce as fast as the client takes, so the slow reader shows backpressure;
* the first list in an encoding is *cold*: it encodes each object once in that encoding
  and keeps the bytes on the cached object (a lasting cost, shown as "kept"); the ones
  after it are warm.

Before each LIST the peak is reset (``5`` > ``/proc/PID/clear_refs`` sets VmHWM to the
current VmRSS); after it the figures are VmRSS before, VmHWM (the peak during the LIST),
the peak above before, that as a share of the stored data (the JSON bytes of all the
objects, i.e. the JSON list's size), and VmRSS after minus before (what stays: cached
encodings).  Target: the peak above before stays within a small multiple of the stored
data (< 1.5x), since lists are written item by item as the transport takes them.
Not a test: it prints figures.  Takes about a minute.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    TOKEN, Client, free_port, post_all, proc_status, reset_peak, scratch_dir, start_server,
    stop_server, tls_context, wait_ready, write_tokens,
)

CM = "/api/v1/namespaces/default/configmaps"
VALUE = 64 * 1024
ENCODINGS = {"JSON": "application/json",
             "Protobuf": "application/vnd.platform.protobuf",
             "CBOR": "application/cbor"}
MIB = 1024 * 1024


def configmap(index: int, size: int) -> dict:
    values = {}
    for k in range(max(1, size // VALUE)):
        values[f"part-{k:03d}"] = base64.b64encode(os.urandom(VALUE * 3 // 4)).decode()
    return {"metadata": {"name": f"large-{index:05d}", "labels": {"bench": "large-list"}},
            "data": values}


def create_all(port: int, count: int, size: int, threads: int) -> None:
    failures = post_all(port, CM, [configmap(i, size) for i in range(count)], threads,
                        timeout=120)
    if failures:
        sys.exit(f"{len(failures)} creates failed, first: {failures[0]}")


def read_list(port: int, accept: str, gzip: bool, chunk: int, pause: float):
    """One LIST read ``chunk`` bytes at a time; (status, body bytes, seconds)."""
    client = Client(port, timeout=300)
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": accept}
    if gzip:
        headers["Accept-Encoding"] = "gzip"
    start = time.perf_counter()
    client.conn.request("GET", CM, headers=headers)
    response = client.conn.getresponse()
    received = 0
    while True:
        data = response.read(chunk)
        if not data:
            break
        received += len(data)
        if pause:
            time.sleep(pause)
    seconds = time.perf_counter() - start
    client.close()
    if gzip and response.getheader("Content-Encoding") != "gzip":
        sys.exit(f"{accept}: asked for gzip, got {response.getheader('Content-Encoding')}")
    return response.status, received, seconds


def measure(pid: int, port: int, accept: str, gzip: bool, chunk: int, pause: float):
    """(status, bytes, seconds, RSS before, peak, RSS after), sizes in KiB."""
    reset_peak(pid)
    before = proc_status(pid)["VmRSS"]
    status, received, seconds = read_list(port, accept, gzip, chunk, pause)
    figures = proc_status(pid)
    return status, received, seconds, before, figures["VmHWM"], figures["VmRSS"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=100, help="MiB of objects to store")
    parser.add_argument("--object-kib", type=int, default=400)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--slow-chunk", type=int, default=64 * 1024)
    parser.add_argument("--slow-pause", type=float, default=0.005)
    parser.add_argument("--cbor", action="store_true", help="measure CBOR too")
    opts = parser.parse_args()
    count = opts.mib * 1024 // opts.object_kib
    encodings = ["JSON", "Protobuf"] + (["CBOR"] if opts.cbor else [])
    tmp = scratch_dir()
    port = free_port()
    extra = ("--feature-gates", "CBORServingAndStorage=true") if opts.cbor else ()
    server = start_server(os.path.join(tmp, "data"), port, write_tokens(tmp), extra=extra)
    pid = server.pid
    try:
        if not wait_ready(server, port, tls_context()):
            sys.exit("platformd exited")
        empty = proc_status(pid)["VmRSS"]
        start = time.monotonic()
        create_all(port, count, opts.object_kib * 1024, opts.threads)
        created = proc_status(pid)["VmRSS"]
        print(f"created {count} ConfigMaps of {opts.object_kib} KiB in "
              f"{time.monotonic() - start:.1f} s; server RSS {empty / 1024:.0f} MiB empty, "
              f"{created / 1024:.0f} MiB with the objects")
        fast = (1024 * 1024, 0.0)
        slow = (opts.slow_chunk, opts.slow_pause)
        variants = []
        for name in encodings:
            variants += [(name, "cold", False, fast), (name, "warm", False, fast),
                         (name, "slow reader", False, slow), (name, "gzip", True, fast),
                         (name, "gzip, slow reader", True, slow)]
        stored = None
        rows = []
        for name, label, gzip, (chunk, pause) in variants:
            status, received, seconds, before, peak, after = measure(
                pid, port, ENCODINGS[name], gzip, chunk, pause)
            if status != 200:
                sys.exit(f"{name} {label}: {status}")
            if stored is None:
                stored = received  # the JSON list: every object's JSON bytes
            rows.append((f"{name}, {label}", received, seconds, before, peak, after))
        print(f"stored data: {stored / MIB:.1f} MiB (the objects' JSON bytes)")
        print(f"{'LIST':28}{'body MiB':>9}{'s':>6}{'before':>8}{'peak':>8}"
              f"{'peak-before':>13}{'/ stored':>10}{'kept':>7}   (MiB)")
        for label, received, seconds, before, peak, after in rows:
            print(f"{label:28}{received / MIB:9.1f}{seconds:6.1f}{before / 1024:8.0f}"
                  f"{peak / 1024:8.0f}{(peak - before) / 1024:13.1f}"
                  f"{(peak - before) * 1024 / stored:10.2f}{(after - before) / 1024:7.0f}")
        if server.poll() is not None:
            print(f"! server exited with {server.returncode}")
    finally:
        stop_server(server)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
