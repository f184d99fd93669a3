"""The bootstrap policy data, PolicyRule coverage and structured label selectors."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.registry import rbac
from platformd.controllers.aggregation import ClusterRoleAggregator
from platformd.registry.bootstrap import policy, reconcile_bootstrap_policy
from platformd.util.labelselectors import compile_selector, matches
from platformd.registry.bootstrap.rules import breakdown, uncovered
from tests.bootstrap.support import BootstrapCase


class PolicyDataTests(SynchronousTestCase):
    def test_every_object_labelled_and_autoupdating(self):
        for obj in policy.cluster_roles() + policy.cluster_role_bindings():
            meta = obj["metadata"]
            self.assertEqual(meta["labels"]["platform.io/bootstrapping"], "rbac-defaults")
            self.assertEqual(meta["annotations"], {
                "rbac.authorization.platform.io/autoupdate": "true"})

    def test_valid(self):
        """Every object passes its kind's validation (after defaulting)."""
        for kind, objects in ((rbac.CLUSTER_ROLE, policy.cluster_roles()),
                              (rbac.CLUSTER_ROLE_BINDING, policy.cluster_role_bindings())):
            for obj in objects:
                kind.default(obj)
                self.assertEqual(kind.validate_all(obj), [], obj["metadata"]["name"])

    def test_bindings_name_bootstrap_roles(self):
        roles = {r["metadata"]["name"] for r in policy.cluster_roles()}
        for binding in policy.cluster_role_bindings():
            self.assertIn(binding["roleRef"]["name"], roles)

    def test_fresh_copies(self):
        policy.cluster_roles()[0]["rules"].clear()
        self.assertTrue(policy.cluster_roles()[0]["rules"])


class RulesTests(SynchronousTestCase):
    def test_breakdown(self):
        self.assertEqual(breakdown({"verbs": ["get", "list"], "apiGroups": [""],
                                    "resources": ["pods"], "resourceNames": ["a"]}), [
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
            {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
        ])
        self.assertEqual(breakdown({"verbs": ["get"], "nonResourceURLs": ["/a", "/b"]}), [
            {"verbs": ["get"], "nonResourceURLs": ["/a"]},
            {"verbs": ["get"], "nonResourceURLs": ["/b"]}])

    def test_covers(self):
        pods = {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}
        self.assertEqual(uncovered([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                                   [pods]), [])
        self.assertEqual(uncovered([{"verbs": ["get"], "apiGroups": [""],
                                     "resources": ["pods"], "resourceNames": ["a"]}], [pods]),
                         [pods])
        self.assertEqual(uncovered([pods], [{**pods, "resourceNames": ["a"]}]), [])
        self.assertEqual(uncovered([{"verbs": ["get"], "apiGroups": [""],
                                     "resources": ["*/status"]}],
                                   [{**pods, "resources": ["pods/status"]}]), [])
        self.assertEqual(uncovered([{"verbs": ["get"], "nonResourceURLs": ["/api/*"]}],
                                   [{"verbs": ["get"], "nonResourceURLs": ["/api/v1", "/apis"]}]),
                         [{"verbs": ["get"], "nonResourceURLs": ["/apis"]}])

    def test_label_selectors(self):
        match = compile_selector({"matchLabels": {"a": "1"}, "matchExpressions": [
            {"key": "b", "operator": "NotIn", "values": ["x"]},
            {"key": "c", "operator": "Exists"}]})
        self.assertTrue(match({"a": "1", "c": ""}))
        self.assertFalse(match({"a": "1", "b": "x", "c": ""}))
        self.assertFalse(match({"a": "2", "c": ""}))
        self.assertTrue(matches(compile_selector({}), {}))
        self.assertRaises(ValueError, compile_selector,
                          {"matchExpressions": [{"key": "a", "operator": "Gt"}]})


class BootstrappedServerTests(BootstrapCase):
    def test_admin_edit_view(self):
        """Reconciled, then aggregated: admin ⊇ edit ⊇ view, as upstream."""
        self.resolve(reconcile_bootstrap_policy(self.stores))
        aggregator = ClusterRoleAggregator(self.stub.clock, self.stub.components.informers,
                                           self.stores)
        aggregator.start()
        self.addCleanup(aggregator.stop)
        self.stub.flush()
        rules = {name: self.role(name)["rules"] for name in ("admin", "edit", "view")}
        own = {r["metadata"]["name"]: r["rules"] for r in policy.cluster_roles()
               if r["metadata"]["name"].startswith("system:aggregate-to-")}
        self.assertEqual(rules["view"], own["system:aggregate-to-view"])
        self.assertEqual(rules["edit"], own["system:aggregate-to-edit"] + rules["view"])
        self.assertEqual(rules["admin"], rules["edit"] + own["system:aggregate-to-admin"])
        revision = self.revision()
        self.assertEqual({r.operation for r in self.resolve(
            reconcile_bootstrap_policy(self.stores))}, {"none"})
        self.stub.flush()
        self.assertEqual(self.revision(), revision)
