"""
The long fuzz run (issue 11.6): the suite's generator (``tests/fuzz/requests.py``) for as
many requests as asked, against a scratch platformd on loopback (CBOR gate on), judged
as the suite judges (``tests/fuzz/check.py``): no 5xx, every error a Status in its
encoding, the server serving afterwards.

    PYTHONPATH=src:. python bench/fuzz.py [--count 20000] [--seed 1] [--etcd]
                                          [--crds 0] [--per-definition 20]

``--crds N`` then runs the CustomResourceDefinition fuzzer (``tests/fuzz/crdrun.py``,
issue 31) for N definitions (0 for none; ``--count 0`` for it alone), each accepted one
with ``--per-definition`` object requests: the same judgement, and no request slower
than ``crdrun.SLOW`` seconds.

``--etcd`` runs the server over a one-member etcd (``tests/etcd/cluster.py``) instead of
SQLite: the same judgement of the etcd3 backend's answers.

Prints the answers by code, the problems (with the request that caused each) and the
time taken; exits 1 if there was any problem.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred, inlineCallbacks

from platformd.options import Options
from platformd.service import daemon
from tests.e2e.harness import Client
from tests.fuzz import check, crdrun, requests


class _Cleanups:
    """What the harness's Client asks of a test case: somewhere to put cleanups."""

    def __init__(self):
        self.calls = []

    def addCleanup(self, f, *args):
        self.calls.append((f, args))


def _report(codes, problems) -> None:
    print("answers by code: " + ", ".join(f"{c}: {n}" for c, n in sorted(
        codes.items(), key=lambda item: str(item[0]))))
    print(f"problems: {len(problems)}")
    for fuzzed, found in problems[:50]:
        print(f"  {found}\n    for {fuzzed.describe()}")


@inlineCallbacks
def main(args):
    data_dir = tempfile.mkdtemp(prefix="platformd-fuzz-")
    options = Options()
    storage = []
    if args.etcd:
        from tests.etcd.cluster import Cluster
        cluster = Cluster.start(1)
        reactor.addSystemEventTrigger("after", "shutdown", cluster.stop)
        storage = ["--storage-backend", "etcd3", "--etcd-servers", cluster.urls[0]]
    options.parseOptions(["--data-dir", data_dir, "--secure-port", "0",
                          "--feature-gates", "CBORServingAndStorage=true", *storage])
    service = daemon(options, reactor)
    service.privilegedStartService()
    service.startService()
    yield service.booted
    cleanups = _Cleanups()
    client = Client(cleanups, f"{data_dir}/pki", service.port.getHost().port)
    try:
        started = time.monotonic()
        codes, problems = yield check.run(client, requests.generate(args.seed, args.count))
        elapsed = time.monotonic() - started
        alive = yield client.get("/api/v1/namespaces")
        print(f"{args.count} requests, seed {args.seed}, {elapsed:.1f} s "
              f"({args.count / max(elapsed, 1e-9):.0f}/s); server serving afterwards: "
              f"{alive.code == 200}")
        _report(codes, problems)
        if args.crds:
            started = time.monotonic()
            crds = yield crdrun.run(client, args.seed, args.crds, args.per_definition)
            elapsed = time.monotonic() - started
            alive = yield client.get("/api/v1/namespaces")
            print(f"{crds.definitions} definitions ({crds.accepted} accepted, {crds.served} "
                  f"served), {crds.requests} requests, seed {args.seed}, {elapsed:.1f} s, "
                  f"slowest answer {crds.slowest:.2f} s; serving afterwards: {alive.code == 200}")
            _report(crds.codes, crds.problems)
            problems = problems + crds.problems
    finally:
        for f, fargs in cleanups.calls:
            yield f(*fargs)
        yield service.stopService()  # also when the run fails: its threads end
    return 1 if problems or alive.code != 200 else 0


def run():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--etcd", action="store_true", help="over a one-member etcd")
    parser.add_argument("--crds", type=int, default=0, help="definitions to fuzz")
    parser.add_argument("--per-definition", type=int, default=20,
                        help="object requests per accepted definition")
    args = parser.parse_args()
    outcome = []

    def finished(result):
        outcome.append(result)
        reactor.stop()

    def failed(failure):
        failure.printTraceback()
        outcome.append(2)
        reactor.stop()

    reactor.callWhenRunning(lambda: ensureDeferred(main(args)).addCallbacks(finished, failed))
    reactor.run()
    sys.exit(outcome[0] if outcome else 2)


if __name__ == "__main__":
    run()
