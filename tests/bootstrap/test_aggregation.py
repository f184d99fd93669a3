"""
The ClusterRole aggregation controller (``controllers/aggregation.py``) over the
in-memory server: it follows the watch cache and writes only when the union changes.
"""

from twisted.internet.defer import Deferred

from platformd.context import internal
from platformd.controllers.aggregation import MANAGER, ClusterRoleAggregator
from tests.bootstrap.support import BootstrapCase

LABEL = "example.com/aggregate-to-reader"
SELECT = [{"matchLabels": {LABEL: "true"}}]
READ_PODS = {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}
READ_CMS = {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}
READ_SECRETS = {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}


class AggregationTests(BootstrapCase):
    def setUp(self):
        super().setUp()
        self.create_role("reader", aggregate=SELECT)
        self.create_role("pods", {LABEL: "true"}, [READ_PODS])
        self.aggregator = ClusterRoleAggregator(self.stub.clock, self.stub.components.informers,
                                                self.stores)
        self.addCleanup(self.aggregator.stop)
        self.writes = []
        update = self.roles.update

        def counted(ctx, namespace, name, *args, **kw):
            if kw.get("manager") == MANAGER:
                self.writes.append(name)
            return update(ctx, namespace, name, *args, **kw)

        self.roles.update = counted

    def rules(self, name="reader"):
        return self.role(name).get("rules") or []

    def test_full_pass_at_start(self):
        """start() aggregates roles that already exist."""
        self.aggregator.start()
        self.stub.flush()
        self.assertEqual(self.rules(), [READ_PODS])
        self.assertEqual(self.role("reader")["metadata"]["managedFields"][-1]["manager"],
                         "clusterrole-aggregation-controller")

    def test_new_labelled_role_is_picked_up(self):
        """A new role with the label adds its rules, after those of roles named before it."""
        self.aggregator.start()
        self.stub.flush()
        self.create_role("configmaps", {LABEL: "true"}, [READ_CMS, READ_PODS])
        self.stub.flush()
        self.assertEqual(self.rules(), [READ_CMS, READ_PODS])

    def test_label_removed_drops_rules(self):
        """A role whose label goes away no longer contributes."""
        self.aggregator.start()
        self.create_role("secrets", {LABEL: "true"}, [READ_SECRETS])
        self.stub.flush()
        self.assertEqual(self.rules(), [READ_PODS, READ_SECRETS])
        self.change_role("secrets", lambda obj: obj["metadata"]["labels"].clear())
        self.stub.flush()
        self.assertEqual(self.rules(), [READ_PODS])

    def test_deleted_role_drops_rules(self):
        self.aggregator.start()
        self.stub.flush()
        self.resolve(self.roles.delete(internal(), None, "pods"))
        self.stub.flush()
        self.assertEqual(self.rules(), [])

    def test_unrelated_roles_ignored(self):
        """A role the selectors do not match changes nothing and writes nothing."""
        self.aggregator.start()
        self.stub.flush()
        self.writes.clear()
        self.create_role("other", {"example.com/x": "true"}, [READ_SECRETS])
        self.change_role("other", lambda obj: obj["rules"].append(READ_CMS))
        self.stub.flush()
        self.assertEqual(self.rules(), [READ_PODS])
        self.assertEqual(self.writes, [])

    def test_no_write_when_unchanged(self):
        """A matching role changed in a way that leaves the union as it is: no write."""
        self.aggregator.start()
        self.stub.flush()
        self.writes.clear()
        revision = self.revision()
        self.change_role("pods", lambda obj: obj["metadata"].setdefault(
            "annotations", {}).update({"note": "x"}))
        self.stub.flush()
        self.assertEqual(self.revision(), revision + 1)  # the change itself, nothing more
        self.assertEqual(self.writes, [])
        self.assertEqual(self.rules(), [READ_PODS])

    def test_duplicate_rules_once(self):
        """A rule two roles hold is kept once, where it was first seen (roles by name)."""
        self.aggregator.start()
        self.create_role("again", {LABEL: "true"}, [READ_CMS, READ_PODS])
        self.stub.flush()
        self.assertEqual(self.rules(), [READ_CMS, READ_PODS])
        self.create_role("a-first", {LABEL: "true"}, [READ_PODS])
        self.stub.flush()
        self.assertEqual(self.rules(), [READ_PODS, READ_CMS])

    def test_burst_coalesced(self):
        """Several changes in one turn: one pass, one write."""
        self.aggregator.start()
        self.stub.flush()
        self.writes.clear()
        for name in ("a", "b", "c"):
            self.roles.create(internal(), {
                "metadata": {"name": name, "labels": {LABEL: "true"}},
                "rules": [{"verbs": [name], "apiGroups": [""], "resources": ["pods"]}]}, None)
        self.stub.flush()
        self.assertEqual(self.writes, ["reader"])
        self.assertEqual([r["verbs"] for r in self.rules()], [["a"], ["b"], ["c"], ["get"]])

    def test_selector_expressions(self):
        """matchExpressions select as upstream's label selectors do."""
        self.create_role("exprs", aggregate=[{"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "private", "operator": "DoesNotExist"}]}])
        self.create_role("tier-a", {"tier": "a"}, [READ_CMS])
        self.create_role("tier-c", {"tier": "c"}, [READ_PODS])
        self.create_role("tier-b-private", {"tier": "b", "private": ""}, [READ_SECRETS])
        self.aggregator.start()
        self.stub.flush()
        self.assertEqual(self.rules("exprs"), [READ_CMS])

    def test_nested_aggregation(self):
        """An aggregating role that is itself selected passes its union on."""
        self.create_role("outer", aggregate=[{"matchLabels": {"outer": "true"}}])
        self.change_role("reader", lambda obj: obj["metadata"]["labels"].update(
            {"outer": "true"}))
        self.aggregator.start()
        self.stub.flush()
        self.assertEqual(self.rules("outer"), [READ_PODS])
        self.create_role("cms", {LABEL: "true"}, [READ_CMS])
        self.stub.flush()
        self.assertEqual(self.rules("outer"), [READ_CMS, READ_PODS])

    def test_stopped(self):
        """After stop() changes are no longer followed."""
        self.aggregator.start()
        self.stub.flush()
        self.aggregator.stop()
        self.create_role("cms", {LABEL: "true"}, [READ_CMS])
        self.stub.flush()
        self.assertEqual(self.rules(), [READ_PODS])

    def test_write_failing_after_stop_is_quiet(self):
        """
        A write under way when the controller stops, failed by the storage stopping
        after it (server shutdown), is neither logged as a failure nor retried.
        """
        pending = Deferred()
        self.roles.update = lambda *args, **kw: pending
        self.aggregator.start()
        self.stub.flush()
        queue = self.aggregator.queue
        self.aggregator.stop()
        pending.errback(RuntimeError("EtcdStorage stopped"))
        self.assertEqual(self.flushLoggedErrors(RuntimeError), [])
        self.assertEqual(queue.num_requeues("reader"), 0)
