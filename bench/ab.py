"""
A/B runs (issue 28): a benchmark's server from two trees, alternately, in one run —
a named baseline commit (A) and the working tree (B) — with the same load generator
(wrk) and the same client code (this tree's), so that a neighbour's load falls on both.

    python bench/ab.py --baseline dff2bdc [--runs 3] [--keep] [--etcd [--tls] [--pin]]
                       [--b-flag=--shared-data-dir ...]
                       -- [bench_api] [--seconds 5] [creates] [gets] [events]

The baseline is materialised with ``git archive`` into a temporary directory outside
the checkout (``--keep`` leaves it there; ``--baseline-dir`` uses one already made);
each server runs with that tree's package root first on PYTHONPATH and as its working
directory (``<tree>/src`` since the src/ layout of b0ec942, the tree itself before).
Each run starts a fresh server (its own data directory) per tree, runs every chosen
benchmark on it and stops it; the order is A B A B ...

``--etcd`` stores in a 3-member etcd cluster (fsync on, as ``bench_etcd.py``'s),
started once for the whole run, each server under an etcd prefix of its own;
``--tls`` serves the members' clients over TLS; ``--pin`` keeps the servers on CPU 0
and everything else (the members, wrk) on CPU 1, as ``bench_etcd.py --pin``.
``--b-flag`` gives B's servers a flag A's do not get: with ``--baseline-dir`` naming
this same tree, a feature's cost in one tree (``--b-flag=--shared-data-dir``).

Printed per benchmark and tree: the median operations/s and the median server CPU
(user + system over the benchmark, threads included, from /proc) per operation, each
with its range; then B/A: the median of the per-run ratios, with their range.  CPU per
operation blurs much less than the rate when other work shares the machine.  Not a
test: it prints figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    free_port, package_root, start_server, stop_server, tls_context, tree_cpu_seconds,
    wait_ready, wait_workers, write_tokens,
)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES = ("bench_api",)


def split_argv(argv: list) -> tuple:
    """(ab.py's arguments, the benchmark's) around the first ``--``."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def parse(argv: list) -> argparse.Namespace:
    mine, theirs = split_argv(argv)
    parser = argparse.ArgumentParser(
        description="a benchmark on a baseline commit (A) and the working tree (B), "
                    "alternately")
    parser.add_argument("--baseline", help="commit (anything git rev-parse takes)")
    parser.add_argument("--baseline-dir", help="an already materialised baseline tree")
    parser.add_argument("--tree", default=HERE, help="tree B (default: this checkout)")
    parser.add_argument("--runs", type=int, default=3, help="alternations (default 3)")
    parser.add_argument("--keep", action="store_true",
                        help="leave the materialised baseline in place")
    parser.add_argument("--etcd", action="store_true",
                        help="the servers store in a 3-member etcd cluster")
    parser.add_argument("--tls", action="store_true", help="with --etcd: its clients over TLS")
    parser.add_argument("--pin", action="store_true",
                        help="with --etcd: servers on CPU 0, the rest on CPU 1")
    parser.add_argument("--b-flag", action="append", default=[], metavar="FLAG",
                        help="a flag of B's servers only (repeatable): with --baseline-dir "
                             "of the same tree, one tree with and without it")
    opts = parser.parse_args(mine)
    if not opts.baseline and not opts.baseline_dir:
        parser.error("--baseline or --baseline-dir is required")
    if opts.runs < 1:
        parser.error("--runs must be at least 1")
    if (opts.tls or opts.pin) and not opts.etcd:
        parser.error("--tls and --pin go with --etcd")

    suite = "bench_api"
    if theirs and theirs[0] in SUITES:
        suite, theirs = theirs[0], theirs[1:]
    bench = argparse.ArgumentParser(prog=f"ab.py ... -- [{suite}]")
    bench.add_argument("--seconds", type=float, default=5)
    bench.add_argument("names", nargs="*", default=[])
    opts.bench = bench.parse_args(theirs)
    opts.bench.suite = suite
    import bench_api
    known = bench_api.AB_BENCHMARKS
    opts.bench.names = opts.bench.names or list(known)
    unknown = [n for n in opts.bench.names if n not in known]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {sorted(known)}")
    return opts


def resolve(commit: str, repo: str = HERE) -> str:
    return subprocess.run(["git", "-C", repo, "rev-parse", "--verify", f"{commit}^{{commit}}"],
                          capture_output=True, text=True, check=True).stdout.strip()


def materialise(commit: str, repo: str = HERE) -> str:
    """``commit``'s tree extracted (git archive) into a new temporary directory."""
    sha = resolve(commit, repo)
    target = tempfile.mkdtemp(prefix=f"platformd-ab-{sha[:10]}-")
    archive = subprocess.Popen(["git", "-C", repo, "archive", sha], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", target], stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait() != 0:
        shutil.rmtree(target, ignore_errors=True)
        raise RuntimeError(f"git archive {sha} failed")
    if not os.path.isdir(os.path.join(package_root(target), "platformd")):
        shutil.rmtree(target, ignore_errors=True)
        raise RuntimeError(f"{sha} has no platformd package")
    return target


def one_run(tree: str, names: list, seconds: float, tmp: str, tokens: str,
            extra: list = (), cpus=None) -> dict:
    """A fresh server from ``tree`` with ``extra`` flags (on ``cpus``, if given); per
    benchmark (ops/s, CPU µs per op, non-2xx)."""
    import bench_api
    port = free_port()
    data = tempfile.mkdtemp(dir=tmp)
    server = start_server(data, port, tokens, extra=extra, tree=tree)
    try:
        if not wait_ready(server, port, tls_context()):
            sys.exit(f"platformd ({tree}) did not start")
        wait_workers(server.pid, _workers(extra))
        if cpus is not None:
            from bench_etcd import pin
            pin(server.pid, cpus)
        figures = {}
        for name in names:
            prepare, run = bench_api.AB_BENCHMARKS[name]
            if prepare is not None:
                prepare(port)
            before = tree_cpu_seconds(server.pid)
            r = run(port, seconds, tmp)
            used = tree_cpu_seconds(server.pid) - before
            figures[name] = (r["rate"], used / max(r["requests"], 1) * 1e6, r["bad"])
        return figures
    finally:
        stop_server(server)
        shutil.rmtree(data, ignore_errors=True)


def _workers(flags) -> int:
    """The ``--workers`` among ``flags`` (1 without it): their CPU is the server's too."""
    flags = list(flags)
    for i, flag in enumerate(flags):
        if flag.startswith("--workers="):
            return int(flag.split("=", 1)[1])
        if flag == "--workers" and i + 1 < len(flags):
            return int(flags[i + 1])
    return 1


def spread(values: list, fmt: str) -> str:
    return (f"{format(statistics.median(values), fmt)} "
            f"({format(min(values), fmt)}–{format(max(values), fmt)})")


def report(names: list, results: dict, labels: dict) -> None:
    for name in names:
        print(f"\n{name}:")
        for side in "AB":
            runs = [r[name] for r in results[side]]
            bad = sum(r[2] for r in runs)
            print(f"  {side} {labels[side]}: ops/s {spread([r[0] for r in runs], ',.0f')}; "
                  f"CPU/op {spread([r[1] for r in runs], ',.0f')} µs"
                  + (f"; non-2xx {bad}" if bad else ""))
        pairs = list(zip(results["A"], results["B"]))
        rate = [b[name][0] / a[name][0] for a, b in pairs]
        cpu = [b[name][1] / a[name][1] for a, b in pairs]
        print(f"  B/A: ops/s {spread(rate, '.3f')}; CPU/op {spread(cpu, '.3f')}")


def main(argv=None):
    opts = parse(sys.argv[1:] if argv is None else argv)
    if not shutil.which("wrk"):
        sys.exit("ab.py needs wrk (apt-get install wrk)")
    made = None
    if opts.baseline_dir:
        tree_a, label_a = opts.baseline_dir, opts.baseline_dir
    else:
        made = tree_a = materialise(opts.baseline)
        label_a = resolve(opts.baseline)[:10]
    labels = {"A": label_a, "B": opts.tree + (" (working tree)" if opts.tree == HERE else "")}
    tmp = tempfile.mkdtemp(prefix="platformd-ab-run-")
    tokens = write_tokens(tmp)
    results = {"A": [], "B": []}
    cluster, cpus = None, None
    if opts.etcd:
        from bench_etcd import Cluster, etcd_flags
        if opts.pin:
            cpus = {0}
            os.sched_setaffinity(0, {1})  # the members and wrk, started from here, inherit it
        cluster = Cluster.start(3, fsync=True, tls=opts.tls)
    print(f"A: {tree_a} ({label_a}); B: {opts.tree}; {opts.runs} runs of "
          f"{', '.join(opts.bench.names)} at {opts.bench.seconds:g} s, A B A B ..."
          + (f" over etcd{' (TLS)' if opts.tls else ''}{', pinned' if opts.pin else ''}"
             if opts.etcd else ""))
    try:
        for i in range(opts.runs):
            for side, tree in (("A", tree_a), ("B", opts.tree)):
                extra = [] if cluster is None else \
                    etcd_flags(cluster) + ["--etcd-prefix", f"/ab-{i}-{side}"]
                extra += opts.b_flag if side == "B" else []
                figures = one_run(tree, opts.bench.names, opts.bench.seconds, tmp, tokens,
                                  extra, cpus)
                results[side].append(figures)
                print(f"run {i + 1} {side}: " + "; ".join(
                    f"{n} {r[0]:,.0f}/s {r[1]:,.0f} µs/op" for n, r in figures.items()),
                    flush=True)
        report(opts.bench.names, results, labels)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        if made and not opts.keep:
            shutil.rmtree(made, ignore_errors=True)
        elif made:
            print(f"baseline kept in {made}")


if __name__ == "__main__":
    main()
