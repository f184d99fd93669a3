"""
Watch delivery cost, A/B (issue 28, target 3): server CPU per delivered watch event at
2,000 watchers, a baseline tree (A) against this one (B), alternately in one run.

    python bench/ab_fanout.py --baseline main [--runs 3] [--watchers 2000]
        [--updates 100] [--rate 50] [--tree DIR] [--baseline-dir DIR]

Each run starts a fresh server per tree (``ab.py``'s materialisation and start), creates
the benchmark's RoleBindings, opens ``--watchers`` watches of their namespace on TLS
connections of their own (``bench_lists_watches.py``'s watch child, one process: an
epoll loop over ``ssl.MemoryBIO`` connections), then sends ``--updates`` merge-patches at
``--rate`` a second.  Figure: the server process's CPU (user + system from /proc,
threads included) over the patches, divided by the events the watchers received; the
same patches' CPU with no watcher (measured first, per run) is also subtracted, for the
"net" figure.  CPU per delivery holds even when the watch client saturates its core (the
server then sends the same bytes; only the latencies suffer).  Also printed: deliveries
against those expected (every event to every watcher), the kernel write-to-arrival
p50 and p99.  Not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab  # noqa: E402
import bench_lists_watches as blw  # noqa: E402
from common import (  # noqa: E402
    Client, cpu_seconds, free_port, start_server, stop_server, tls_context, wait_ready,
    write_tokens,
)


def one_run(tree: str, tmp: str, tokens: str, watchers: int, updates: int,
            py_spy: str | None = None) -> dict:
    port = free_port()
    data = tempfile.mkdtemp(dir=tmp)
    server = start_server(data, port, tokens, tree=tree)
    client = None
    try:
        if not wait_ready(server, port, tls_context()):
            sys.exit(f"platformd ({tree}) did not start")
        client = Client(port)
        blw.create_namespace(client, blw.NS)
        blw.create_many(port, blw.NS, max(updates, 100))
        # The patches alone (no watcher), for the net figure.
        before = cpu_seconds(server.pid)
        blw.paced_patches(port, updates)
        alone = cpu_seconds(server.pid) - before
        blw.WATCHERS, blw.UPDATES = watchers, updates
        r = blw.fanout_run(port, client, server.pid, py_spy, port, gil=False)
        elapsed = updates / r["rate"]
        cpu = r["server_cpu"] * elapsed
        deliveries = max(r["deliveries"], 1)
        r.update(cpu=cpu, alone=alone, per=cpu / deliveries * 1e6,
                 net=(cpu - alone) / deliveries * 1e6)
        return r
    finally:
        if client is not None:
            client.close()
        stop_server(server)
        shutil.rmtree(data, ignore_errors=True)


def spread(values: list, fmt: str) -> str:
    return (f"{format(statistics.median(values), fmt)} "
            f"({format(min(values), fmt)}–{format(max(values), fmt)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline")
    parser.add_argument("--baseline-dir")
    parser.add_argument("--tree", default=ab.HERE)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--watchers", type=int, default=2000)
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--only-b", action="store_true", help="no baseline: B alone")
    parser.add_argument("--py-spy", metavar="OUT",
                        help="record B's server with py-spy (raw, every thread, idle left "
                             "out) over the first run's updates")
    opts = parser.parse_args()
    if not opts.only_b and not (opts.baseline or opts.baseline_dir):
        parser.error("--baseline, --baseline-dir or --only-b")
    blw.UPDATE_RATE = opts.rate
    if blw.raise_nofile() < opts.watchers * 2 + 100:
        sys.exit("RLIMIT_NOFILE too low")
    made = None
    sides = [("B", opts.tree)]
    if not opts.only_b:
        if opts.baseline_dir:
            tree_a = opts.baseline_dir
        else:
            made = tree_a = ab.materialise(opts.baseline)
        sides.insert(0, ("A", tree_a))
    tmp = tempfile.mkdtemp(prefix="platformd-abfan-")
    tokens = write_tokens(tmp)
    results: dict = {side: [] for side, _ in sides}
    print(f"{' '.join(f'{s}: {t}' for s, t in sides)}; {opts.runs} runs, "
          f"{opts.watchers} watchers x {opts.updates} updates at {opts.rate:g}/s; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    try:
        for i in range(opts.runs):
            for side, tree in sides:
                r = one_run(tree, tmp, tokens, opts.watchers, opts.updates,
                            opts.py_spy if side == "B" and i == 0 else None)
                results[side].append(r)
                print(f"run {i + 1} {side}: {r['deliveries']:,}/{r['expected']:,} delivered, "
                      f"closed early {r['closed']}, per-watcher {r['per_min']}-{r['per_max']}; "
                      f"server CPU {r['cpu']:.2f} s (user {r['server_user']:.2f}, system "
                      f"{r['server_system']:.2f}; {r['alone']:.2f} s without watchers): "
                      f"{r['per']:.2f} µs/delivery, net {r['net']:.2f}; "
                      f"{r['rate']:.1f} updates/s; kernel p50 {r['k_p50']:.1f} "
                      f"p99 {r['k_p99']:.1f} ms; client CPU {r['client_cpu'] * 100:.0f}%; "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
        for side, _ in sides:
            runs = results[side]
            print(f"{side}: µs/delivery {spread([r['per'] for r in runs], '.2f')}, net "
                  f"{spread([r['net'] for r in runs], '.2f')}; deliveries "
                  f"{sum(r['deliveries'] for r in runs):,}/{sum(r['expected'] for r in runs):,}; "
                  f"kernel p99 {spread([r['k_p99'] for r in runs], '.1f')} ms")
        if len(sides) == 2:
            pairs = list(zip(results["A"], results["B"]))
            print(f"B/A: µs/delivery {spread([b['per'] / a['per'] for a, b in pairs], '.3f')}, "
                  f"net {spread([b['net'] / a['net'] for a, b in pairs], '.3f')}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if made:
            shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    main()
