"""
Where a create's CPU goes, stage by stage (issue 28, target 1): the server under the
create benchmark of bench_api.py (RoleBindings, 16 in flight, every default on) recorded
by py-spy (``--format raw --threads``, idle samples left out), each sample given to a
stage by the frames it passes through, then scaled by the server's CPU per create.

    python bench/profile_stages.py [--tree DIR] [--seconds 20] [--rate 250]
    python bench/profile_stages.py --raw FILE --cpu-us 577     # an existing recording
    python bench/profile_stages.py --gil ...   # only samples holding the GIL

A sample is wall time, not CPU time: py-spy's idle detection leaves out a thread asleep
in a wait it knows, not one blocked in a system call (a socket send, the writer's fsync)
or runnable but not running (the reactor preempted by the writer thread it has just
woken: 106 µs of wall time per hand-off against 7.3 µs of CPU, measured with
``perf_counter``/``thread_time``).  ``--gil`` leaves out the calls that release the GIL;
per-thread CPU from ``/proc/<pid>/task`` is the check on either.

Method: a sample in the SQLite writer thread is the commit's; otherwise the innermost
frame matching one of RULES decides (so a JSON encode called by the response writer is
encoding, the response write called from the commit's acknowledgement is HTTP/TLS),
except that plain handler code (REST) gives way to a stage further out short of HTTP
and TLS (a key built for NamespaceLifecycle's lookup is admission's);
a read of the watch cache or an informer's lister is the stage of its caller
(admission, the RBAC escalation check) unless it is reached from the watch fan-out
(Watchers.publish, WatchCache._on_event); a stack with no matching frame is the
reactor's (epoll, timers, Deferred plumbing, logging context).  The share of samples
times the CPU per create gives µs per create: py-spy's idle detection is a heuristic,
so treat figures under ~1 % (a few µs) as noise; a garbage collection lands on
whichever frame allocated when it ran (one full collection was 0.4 s of a 15 s run).  Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REST = "handler and store, the rest (writes.py, store.py, app.py, request.py, ids, times)"
FANOUT = "watch fan-out (watchers, watch cache, informers and their handlers: RBAC index)"
OVERRIDES = [  # any frame of the stack decides first, in this order
    ("_encode_for_storage", "commit: encoding for storage"),
]
RULES = [  # innermost matching frame decides: (file part, function part or '', stage)
    ("platformd/metrics/", "", "metrics"),
    ("platformd/tracing/", "", "tracing hooks"),
    ("platformd/audit/", "", "audit"),
    ("platformd/storage/mvcc.py", "", FANOUT),
    ("platformd/cache/", "", FANOUT),
    ("platformd/informing.py", "", FANOUT),
    ("platformd/auth/rbac/index.py", "", FANOUT),
    ("platformd/storage/", "", "commit: storage (reactor side)"),
    ("platformd/auth/authenticators.py", "", "authentication"),
    ("platformd/auth/tokencache.py", "", "authentication"),
    ("platformd/api/filters.py", "Authentication.", "authentication"),
    ("platformd/registry/escalation.py", "", "RBAC escalation check (registry)"),
    ("platformd/auth/", "", "authorization"),
    ("platformd/api/filters.py", "Authorization.", "authorization"),
    ("platformd/admission/namespacelifecycle.py", "", "admission: NamespaceLifecycle"),
    ("platformd/admission/serviceaccount.py", "", "admission: ServiceAccount"),
    ("platformd/admission/policy/", "", "admission: ValidatingAdmissionPolicy"),
    ("platformd/admission/webhooks/mutating.py", "", "admission: MutatingAdmissionWebhook"),
    ("platformd/admission/webhooks/validating.py", "", "admission: ValidatingAdmissionWebhook"),
    ("platformd/admission/webhooks/", "", "admission: webhooks' shared lookup"),
    ("platformd/admission/", "", "admission: chain itself"),
    ("platformd/patch/", "", "managed fields"),
    ("platformd/registry/kinds/", "", "validation"),
    ("platformd/registry/resource.py", "validate", "validation"),
    ("platformd/model/meta.py", "", "validation"),
    ("platformd/model/schema.py", "order", "encoding (field order)"),
    ("platformd/model/schema.py", "", "decoding"),
    ("platformd/api/body.py", "", "decoding"),
    ("platformd/api/fieldvalidation.py", "", "decoding"),
    ("platformd/codecs/", "decode", "decoding"),
    ("platformd/codecs/limits.py", "", "decoding"),
    ("platformd/codecs/duplicates.py", "", "decoding"),
    ("platformd/codecs/", "", "encoding"),
    ("platformd/api/responses.py", "", "encoding"),
    ("OpenSSL/", "", "TLS"),
    ("twisted/protocols/tls.py", "", "TLS"),
    ("platformd/edge/tlstransport.py", "", "TLS"),
    ("twisted/web/", "", "HTTP"),
    ("platformd/api/site.py", "", "HTTP"),
    ("platformd/api/http2.py", "", "HTTP"),
    ("twisted/protocols/basic.py", "", "HTTP"),
    ("twisted/protocols/policies.py", "", "HTTP"),
    ("platformd/api/filters.py", "", "other filters (request info, audit ID, deadline, in-flight, readiness, impersonation)"),
    ("platformd/api/deadline.py", "", "other filters (request info, audit ID, deadline, in-flight, readiness, impersonation)"),
    ("platformd/requestinfo.py", "", "other filters (request info, audit ID, deadline, in-flight, readiness, impersonation)"),
    ("platformd/", "", REST),
]
FRAME = re.compile(r"(.*) \((.*):\d+\)$")


def stage_of_frame(func, path):
    for part, fpart, stage in RULES:
        if part in path and fpart in func:
            return stage


def stage_of(frames, thread):
    if "sqlite-writer" in thread:
        return "commit: SQLite writer thread"
    names = [FRAME.match(f).groups() if FRAME.match(f) else (f, "") for f in frames]
    for key, stage in OVERRIDES:
        if any(func == key or func.startswith(key + ".") for func, _ in names):
            return stage
    fallback = None
    for i in range(len(names) - 1, -1, -1):
        func, path = names[i]
        stage = stage_of_frame(func, path)
        if stage is None:
            continue
        if stage == REST:  # plain handler code: unless called by a stage further out
            fallback = fallback or stage
            continue
        if stage in ("HTTP", "TLS") and fallback:
            return fallback
        if stage == FANOUT:  # a read of the cache by a caller: the caller's stage
            for f2, p2 in reversed(names[:i]):
                if "platformd/admission/" in p2 or "platformd/registry/escalation" in p2:
                    return stage_of_frame(f2, p2)
                if "Watchers.publish" in f2 or "_on_event" in f2:
                    break
        return stage
    if fallback:
        return fallback
    return "reactor, Deferreds, logging context (Twisted, not attributed)"


def attribute(path: str) -> tuple:
    counts = collections.Counter()
    total = 0
    for line in open(path):
        stack, n = line.rstrip().rsplit(" ", 1)
        frames = stack.split(";")
        counts[stage_of(frames[1:], frames[0])] += int(n)
        total += int(n)
    return counts, total


def record(tree: str, out: str, seconds: int, rate: int, gil: bool = False) -> float:
    """The create benchmark on a server from ``tree`` under py-spy; CPU µs per create."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_api
    from common import (cpu_seconds, free_port, start_server, stop_server, tls_context,
                        wait_ready, write_tokens)
    tmp = tempfile.mkdtemp(prefix="platformd-prof-")
    tokens = write_tokens(tmp)
    port = free_port()
    server = start_server(os.path.join(tmp, "data"), port, tokens, tree=tree)
    try:
        if not wait_ready(server, port, tls_context()):
            sys.exit("platformd did not start")
        bench_api.run_creates(port, 2, tmp)  # warm up
        spy = subprocess.Popen(
            [os.path.join(os.path.dirname(sys.executable), "py-spy"), "record", "-p",
             str(server.pid), "-d", str(seconds), "-r", str(rate), "--format", "raw",
             "--threads", "--nonblocking", *(["--gil"] if gil else []), "-o", out],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        before = cpu_seconds(server.pid)
        r = bench_api.run_creates(port, seconds - 1, tmp)
        used = cpu_seconds(server.pid) - before
        spy.wait()
        print(f"{r['rate']:,.0f} creates/s, {used / r['requests'] * 1e6:.0f} µs CPU per create")
        return used / r["requests"] * 1e6
    finally:
        stop_server(server)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", default=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rate", type=int, default=250)
    parser.add_argument("--raw", help="attribute this recording instead of making one")
    parser.add_argument("--cpu-us", type=float, help="CPU per create for --raw")
    parser.add_argument("--out", default="/tmp/platformd-creates.raw")
    parser.add_argument("--gil", action="store_true",
                        help="only samples of the thread holding the GIL (py-spy --gil): "
                             "leaves out time blocked in calls that let the GIL go")
    opts = parser.parse_args()
    if opts.raw:
        path, cpu = opts.raw, opts.cpu_us
    else:
        path, cpu = opts.out, record(opts.tree, opts.out, opts.seconds, opts.rate, opts.gil)
    counts, total = attribute(path)
    print(f"{total} samples")
    for stage, n in counts.most_common():
        us = f" {n / total * cpu:5.0f} µs" if cpu else ""
        print(f"{n / total * 100:5.1f} %{us}  {stage}")


if __name__ == "__main__":
    main()
