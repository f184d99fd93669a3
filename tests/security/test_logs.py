"""
Errors a stored object or a client can make the server repeat reach the log at most
once a minute (``platformd/util/ratelog.py``; docs/security.md, "Logs"): a ClusterRole
whose aggregation selector is ``{}``, a role whose aggregation keeps failing, a bug a
client reaches on every request.
"""

from __future__ import annotations

from twisted.internet import defer
from twisted.internet.defer import inlineCallbacks
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from platformd.api import writes
from tests.e2e.harness import ServerTestCase
from tests.stub import StubServer

CLUSTER_ROLES = "/apis/rbac.authorization.platform.io/v1/clusterroles"
#: Simulated seconds each controller test runs for.
MINUTES = 10


class AggregationLogTests(SynchronousTestCase):
    """The daemon's boot (bootstrap roles, the aggregation controller) on a Clock."""

    def setUp(self):
        self.stub = StubServer(rbac_policy=True)
        self.addCleanup(self.stub.stop)
        self.events = []
        globalLogPublisher.addObserver(self.events.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.events.append)
        self.admin = self.stub.client()

    def role(self, name: str) -> dict:
        return self.admin.request("GET", f"{CLUSTER_ROLES}/{name}").json()

    def problems(self) -> list:
        return [e for e in self.events if e.get("log_failure") is not None
                or e.get("log_level") in (LogLevel.warn, LogLevel.error, LogLevel.critical)]

    def run_minutes(self) -> None:
        for _ in range(MINUTES * 60):
            self.stub.advance(1)

    def test_empty_selector_selects_every_role(self):
        """
        ``clusterRoleSelectors: [{}]`` is valid (201) and, as upstream's
        ``LabelSelectorAsSelector`` makes it, selects every other ClusterRole: the role
        holds their rules (cluster-admin's included), is written once, and ten
        simulated minutes log nothing (each second logged a critical traceback).
        """
        r = self.admin.post(CLUSTER_ROLES, {"metadata": {"name": "everything"},
                                            "aggregationRule": {"clusterRoleSelectors": [{}]}})
        self.assertEqual(r.code, 201, r.body)
        self.stub.flush()
        aggregated = self.role("everything")
        rules = aggregated["rules"]
        for rule in self.role("cluster-admin")["rules"] + self.role("view")["rules"]:
            self.assertIn(rule, rules)
        self.run_minutes()
        self.assertEqual(self.role("everything")["metadata"]["resourceVersion"],
                         aggregated["metadata"]["resourceVersion"])
        self.assertEqual(self.problems(), [])

    def test_failing_role_backs_off_and_logs_once_a_minute(self):
        """
        A role whose write always fails is retried as upstream's workqueue retries
        (5 ms, doubling): 17 tries in ten minutes, not 600; its traceback is logged
        once a minute at most (4 times: at 0 s, 82 s, 164 s, 328 s).
        """
        tries = []

        class Refusing:
            def update(self, ctx, namespace, name, *args, **kw):
                tries.append(name)
                return defer.fail(RuntimeError("the store refuses"))
        self.stub.components.aggregator.store = Refusing()
        r = self.admin.post(CLUSTER_ROLES, {
            "metadata": {"name": "refused"},
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"rbac.authorization.platform.io/aggregate-to-view": "true"}}]}})
        self.assertEqual(r.code, 201, r.body)
        self.run_minutes()
        self.assertEqual(tries, ["refused"] * 17)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 4)
        self.assertEqual([e["detail"] for e in self.problems()],
                         ["aggregating ClusterRole refused failed; retrying"] * 4)


class RequestFailureLogTests(ServerTestCase):
    """A bug a client reaches on every request, over a real socket."""

    @inlineCallbacks
    def test_one_traceback_for_many_requests(self):
        """Twenty requests reaching the same bug: twenty 500s (upstream's
        InternalError), one traceback."""
        def bug(*args, **kw):
            raise RuntimeError("a bug")
        self.patch(writes, "decode_object", bug)
        for i in range(20):
            r = yield self.client.post(f"/api/v1/namespaces/default/configmaps?try={i}",
                                       {"metadata": {"name": f"c{i}"}})
            self.assertEqual((r.code, r.json()["reason"], r.json()["message"]),
                             (500, "InternalError", "Internal error occurred: unexpected error"))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
