"""
Running the HTTP suites through two servers over one store (``tests/etcd/test_acceptance.py``
over etcd, ``tests/e2e/test_shared_data_dir.py`` over one shared SQLite data directory):
a client that sends each request to the other server in turn, the tests left to one
server and why, and the subclassing of a suite module's test cases.
"""

from __future__ import annotations

import itertools

from twisted.internet.defer import gatherResults, inlineCallbacks
from twisted.trial.unittest import SkipTest, TestCase

from tests.e2e.harness import Client


class BalancedClient(Client):
    """A client whose requests (and watches) go to each of ``ports`` in turn."""

    def __init__(self, testcase, pki_dir: str, ports: list):
        super().__init__(testcase, pki_dir, ports[0])
        self._bases = itertools.cycle([f"https://127.0.0.1:{port}" for port in ports])

    @property
    def base(self) -> str:
        return next(self._bases)

    @base.setter
    def base(self, value: str) -> None:
        pass  # set by Client.__init__; the turn decides


#: Tests that reach into their server's own objects (its cache's history, its watch
#: streams, its authorizer), so through two servers they would check one server while
#: the requests go to both; why each is left to the one-server run.
ONE_SERVER = {
    "ListTableTests.test_exact_too_old_is_gone":
        "expires one server's history; the other serves that version from the store's, "
        "as upstream's would",
    "WatchTableTests.test_too_old_is_error_410": "expires one server's history",
    "WatchTableTests.test_watch_outlives_compaction": "expires one server's history",
    "SlowWatcherTests.test_slow_watcher_closed_fast_one_keeps_up":
        "counts one server's watch streams",
    "VerbClassificationTests.test_put_create_needs_create":
        "replaces one server's authorizer",
}


def _skipped(reason: str):
    def test(self):
        raise SkipTest(reason)
    return test


def subclass(namespace: dict, module, mixin, suffix: str, base: type = TestCase,
             one_server: dict = {}) -> None:
    """
    A subclass ``<Suite><suffix>`` in ``namespace`` (a test module's globals) of every
    ``base`` test case class ``module`` defines, the tests ``one_server`` names skipped
    with their reason.
    """
    for name, value in vars(module).items():
        if (isinstance(value, type) and value.__module__ == module.__name__
                and name.endswith("Tests") and issubclass(value, base)):
            skipped = {test.split(".")[1]: _skipped(reason)
                       for test, reason in one_server.items()
                       if test.split(".")[0] == name}
            namespace[name + suffix] = type(name + suffix, (mixin, value),
                                            {"__module__": namespace["__name__"], **skipped})


SERVICES = "/api/v1/namespaces/default/services"


@inlineCallbacks
def race_for_addresses(case: TestCase, one, two):
    """
    24 NodePort services created at once, half through each of the clients ``one`` and
    ``two`` of servers with ``--service-cluster-ip-range 10.20.0.0/27`` (30 addresses,
    one the platform Service's) and ``--service-node-port-range 30000-30039``: every
    address and node port distinct.
    """
    answers = yield gatherResults([
        (one if n % 2 else two).post(SERVICES, {"metadata": {"name": f"s{n}"}, "spec": {
            "type": "NodePort", "ports": [{"port": 80}]}})
        for n in range(24)])
    for r in answers:
        case.assertEqual(r.code, 201, r.body)
    specs = [r.json()["spec"] for r in answers]
    ips = [s["clusterIP"] for s in specs] + ["10.20.0.1"]
    case.assertEqual(len(set(ips)), 25, sorted(ips))
    ports = [s["ports"][0]["nodePort"] for s in specs]
    case.assertEqual(len(set(ports)), 24, sorted(ports))
    listed = yield one.get(SERVICES)
    case.assertEqual(len({i["spec"]["clusterIP"] for i in listed.json()["items"]}), 25)
