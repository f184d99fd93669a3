"""
What cluster IP (and node port) allocation adds to a Service create (issue 32: under
0.2 ms).  One scratch platformd (SQLite, ``--service-cluster-ip-range 10.96.0.0/20``),
one keep-alive HTTPS client posting Services one after another; the server's CPU
(user + system of the whole process, its storage thread included, ``/proc/PID/stat``)
per create, for three bodies that differ only in what is allocated:

* ``headless``: ``clusterIP: None`` with a selector: no allocation (the baseline);
* ``clusterip``: an address from the range (one compare-and-swap write of the bitmap);
* ``nodeport``: an address and a node port (two writes).

The kinds are interleaved in rounds and the median of the rounds is taken, so a noisy
neighbour on the shared machine weighs on all three alike.  Then, in process, the
allocation alone (``Allocators.allocate_create`` + ``release`` over ``MemoryStorage``):
the Python work without the storage's.

    PYTHONPATH=src:. python bench/bench_services.py [--per-round 300] [--rounds 5] [--etcd]
        [--threads N] [--baseline-tree DIR [--runs N]]

Over SQLite (one server) the bitmaps are decided in memory and written behind; over
etcd (``--etcd``: a one-member cluster, replicas' shared storage) an allocation is
written with its Service in one transaction (issue 32; before, each was a
compare-and-swap write of its own).  ``--baseline-tree`` (a checkout, e.g. from ``git
archive``) runs that tree's server and this one's alternately, ``--runs`` times each,
over the one cluster, and prints both trees' medians: an A/B within one session.  The
round-by-round figure is the median, over every round of every run, of that round's
allocating creates less its headless ones (a neighbour's load weighs on both).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    Client, cpu_seconds, free_port, post_all, scratch_dir, start_server, stop_server,
    tls_context, wait_ready, write_tokens,
)

SERVICES = "/api/v1/namespaces/default/services"
#: Each server run's own etcd prefix (its Services' names repeat).
_RUNS = itertools.count()


def body(kind: str, name: str) -> dict:
    spec: dict = {"ports": [{"port": 80, "targetPort": 8080}], "selector": {"app": name}}
    if kind == "headless":
        spec["clusterIP"] = "None"
    elif kind == "nodeport":
        spec["type"] = "NodePort"
    return {"metadata": {"name": name}, "spec": spec}


def server_figures(per_round: int, rounds: int, etcd_urls=None, threads: int = 1,
                   tree=None) -> dict:
    tmp = scratch_dir()
    port = free_port()
    extra: tuple = ("--service-cluster-ip-range", "10.96.0.0/20")
    if etcd_urls:
        extra += ("--storage-backend", "etcd3", "--etcd-servers", ",".join(etcd_urls),
                  "--etcd-prefix", f"/bench{os.getpid()}-{next(_RUNS)}")
    server = start_server(os.path.join(tmp, "data"), port, write_tokens(tmp), extra=extra,
                          tree=tree)
    try:
        if not wait_ready(server, port, tls_context()):
            raise SystemExit("the server did not start")
        client = Client(port)
        # Warm up every path once.
        for kind in ("headless", "clusterip", "nodeport"):
            for n in range(50):
                status, data = client.call("POST", SERVICES, body(kind, f"warm-{kind}-{n}"))
                assert status == 201, data
        per_create: dict = {"headless": [], "clusterip": [], "nodeport": []}
        for r in range(rounds):
            for kind in per_create:
                before = cpu_seconds(server.pid)
                bodies = [body(kind, f"{kind}-{r}-{n}") for n in range(per_round)]
                if threads == 1:
                    for one in bodies:
                        status, data = client.call("POST", SERVICES, one)
                        assert status == 201, data
                else:
                    failures = post_all(port, SERVICES, bodies, threads)
                    assert not failures, failures[:1]
                per_create[kind].append((cpu_seconds(server.pid) - before) / per_round)
        client.close()
        figures: dict = {kind: statistics.median(values) for kind, values in per_create.items()}
        # Each round's allocating kinds less its headless creates: the load of that
        # round weighs on both sides of each difference.
        for kind in ("clusterip", "nodeport"):
            figures[f"{kind} paired"] = [a - h for a, h in zip(per_create[kind],
                                                                per_create["headless"])]
        return figures
    finally:
        stop_server(server)


def in_process(count: int) -> dict:
    from twisted.internet.task import Clock

    from platformd.registry.serviceallocation import Allocators
    from platformd.storage.memory import MemoryStorage
    from platformd.util.servicenetwork import ServiceNetwork

    storage = MemoryStorage(Clock())
    allocators = Allocators(storage, ServiceNetwork.parse("10.96.0.0/20"))
    done: list = []
    allocators.repair([], {}).addBoth(done.append)
    assert done == [None], done
    figures = {}
    for kind in ("clusterip", "nodeport"):
        # Within the default node port range (2768 ports).
        objects = [body(kind, f"{kind}-{n}") for n in range(min(count, 2000))]
        for obj in objects:
            obj["metadata"]["namespace"] = "default"
            obj["spec"].update(type=obj["spec"].get("type", "ClusterIP"),
                               sessionAffinity="None", internalTrafficPolicy="Cluster")
        start = time.process_time()
        for obj in objects:
            allocators.allocate_create(obj, False).addBoth(done.append)
        allocated = time.process_time() - start
        for obj in objects:
            allocators.release(obj)
        figures[kind] = allocated / len(objects)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-round", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="clients posting at once (default: one after another)")
    parser.add_argument("--etcd", action="store_true",
                        help="over a one-member etcd (tests/etcd/cluster.py) instead of SQLite")
    parser.add_argument("--baseline-tree",
                        help="a checkout whose server runs alternately with this one's")
    parser.add_argument("--runs", type=int, default=1,
                        help="server runs per tree (default 1)")
    args = parser.parse_args()
    cluster = None
    if args.etcd:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from tests.etcd.cluster import Cluster
        cluster = Cluster.start(1)
    trees = {"this tree": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    if args.baseline_tree:
        trees = {f"baseline {args.baseline_tree}": args.baseline_tree, **trees}
    runs: dict = {name: [] for name in trees}
    try:
        for _run in range(args.runs):
            for name, tree in trees.items():
                runs[name].append(server_figures(
                    args.per_round, args.rounds,
                    cluster.urls if cluster is not None else None, args.threads, tree))
    finally:
        if cluster is not None:
            cluster.stop()
    for name, figures in runs.items():
        served = {kind: statistics.median(run[kind] for run in figures)
                  for kind in ("headless", "clusterip", "nodeport")}
        print(f"{name}: server CPU per Service create over "
              f"{'etcd' if args.etcd else 'SQLite'}, {args.threads} client(s) (median of "
              f"{args.runs} x {args.rounds} rounds' medians of {args.per_round}):")
        for kind, seconds in served.items():
            print(f"  {kind:10s} {seconds * 1000:.3f} ms  (runs: "
                  f"{', '.join(f'{run[kind] * 1000:.3f}' for run in figures)})")
        print(f"  allocation adds: address "
              f"{(served['clusterip'] - served['headless']) * 1000:+.3f} ms, address + node "
              f"port {(served['nodeport'] - served['headless']) * 1000:+.3f} ms")
        for kind, what in (("clusterip", "address"), ("nodeport", "address + node port")):
            rounds = sorted(d for run in figures for d in run[f"{kind} paired"])
            print(f"  {what}, round by round: median {statistics.median(rounds) * 1000:+.3f}"
                  f" ms of {len(rounds)} rounds ({rounds[0] * 1000:+.3f} to "
                  f"{rounds[-1] * 1000:+.3f})")
    alone = in_process(5000)
    print("allocation alone, in process (MemoryStorage, per create):")
    for kind, seconds in alone.items():
        print(f"  {kind:10s} {seconds * 1000:.3f} ms")


if __name__ == "__main__":
    main()
