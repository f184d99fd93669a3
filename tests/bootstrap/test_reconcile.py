"""
Reconciling the bootstrap policy at start (``registry/bootstrap/reconcile.py``) over the
in-memory server.
"""

from platformd.auth.authorizers import AuthorizerChain
from platformd.compose import Authorization
from platformd.context import internal
from platformd.registry.bootstrap import policy, reconcile_bootstrap_policy
from platformd.registry.bootstrap.reconcile import CREATE, NONE, RECREATE, UPDATE
from platformd.registry import rbac
from tests.bootstrap.support import BootstrapCase
from tests.stub import StubServer

AUTOUPDATE = policy.AUTOUPDATE_ANNOTATION


class ReconcileTests(BootstrapCase):
    def reconcile(self, **kw):
        return {(r.kind, r.name): r for r in self.resolve(
            reconcile_bootstrap_policy(self.stores, internal(), **kw))}

    def test_creates_everything_on_an_empty_server(self):
        results = self.reconcile()
        self.assertEqual({r.operation for r in results.values()}, {CREATE})
        for expected in policy.cluster_roles():
            stored = self.role(expected["metadata"]["name"])
            self.assertEqual(stored.get("rules"), expected.get("rules"))
            self.assertEqual(stored.get("aggregationRule"), expected.get("aggregationRule"))
            self.assertEqual(stored["metadata"]["labels"]["platform.io/bootstrapping"],
                             "rbac-defaults")
            self.assertEqual(stored["metadata"]["annotations"][AUTOUPDATE], "true")
        admins = self.binding("cluster-admin")
        self.assertEqual(admins["roleRef"], {"apiGroup": "rbac.authorization.platform.io",
                                             "kind": "ClusterRole", "name": "cluster-admin"})
        self.assertEqual(admins["subjects"], [{"kind": "Group",
                                               "apiGroup": "rbac.authorization.platform.io",
                                               "name": "system:masters"}])
        self.assertEqual([s["name"] for s in self.binding("system:public-info-viewer")["subjects"]],
                         ["system:authenticated", "system:unauthenticated"])
        self.assertEqual(self.role("cluster-admin")["metadata"]["managedFields"][0]["manager"],
                         "platformd")

    def test_idempotent(self):
        """A second run writes nothing."""
        self.reconcile()
        revision = self.revision()
        results = self.reconcile()
        self.assertEqual({r.operation for r in results.values()}, {NONE})
        self.assertEqual(self.revision(), revision)

    def test_adds_missing_rule(self):
        """An autoupdating role that lost a rule gets it back; its own rules stay."""
        self.reconcile()
        extra = {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}
        self.change_role("system:basic-user", lambda obj: obj.update(rules=[
            obj["rules"][0], extra]))
        results = self.reconcile()
        self.assertEqual(results["ClusterRole", "system:basic-user"].operation, UPDATE)
        self.assertEqual(self.role("system:basic-user")["rules"], [
            policy.cluster_roles()[3]["rules"][0], extra,
            {"verbs": ["create"], "apiGroups": ["authentication.platform.io"],
             "resources": ["selfsubjectreviews"]}])
        self.assertEqual(self.reconcile()["ClusterRole", "system:basic-user"].operation, NONE)

    def test_covered_rule_not_added(self):
        """A rule already allowed by a wider one (verbs "*") is not missing."""
        self.reconcile()
        self.change_role("system:public-info-viewer", lambda obj: obj.update(rules=[
            {"verbs": ["*"], "nonResourceURLs": ["*"]}]))
        results = self.reconcile()
        self.assertEqual(results["ClusterRole", "system:public-info-viewer"].operation, NONE)

    def test_partly_covered_rule_adds_atoms(self):
        """Only what is not allowed is added, one verb and resource per rule (upstream)."""
        self.reconcile()
        self.change_role("system:aggregate-to-admin", lambda obj: obj.update(rules=[
            obj["rules"][0],
            {"verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
             "apiGroups": ["rbac.authorization.platform.io"],
             "resources": ["roles", "rolebindings"]}]))
        self.reconcile()
        added = self.role("system:aggregate-to-admin")["rules"][2:]
        self.assertEqual(added, [
            {"verbs": ["deletecollection"], "apiGroups": ["rbac.authorization.platform.io"],
             "resources": [resource]} for resource in ("rolebindings", "roles")])

    def test_protected_role_untouched(self):
        """autoupdate "false": the user's edits are kept, nothing is written."""
        self.reconcile()

        def edit(obj):
            obj["metadata"]["annotations"][AUTOUPDATE] = "false"
            obj["metadata"]["labels"].clear()
            obj["rules"] = []

        self.change_role("system:discovery", edit)
        before = self.role("system:discovery")
        revision = self.revision()
        results = self.reconcile()
        result = results["ClusterRole", "system:discovery"]
        self.assertEqual((result.operation, result.protected), (UPDATE, True))
        self.assertEqual(self.role("system:discovery"), before)
        self.assertEqual(self.revision(), revision)

    def test_labels_and_annotations_added_existing_values_win(self):
        self.reconcile()

        def edit(obj):
            obj["metadata"]["labels"] = {"mine": "1"}
            obj["metadata"]["annotations"] = {AUTOUPDATE: "yes-please"}

        self.change_role("view", edit)
        self.reconcile()
        meta = self.role("view")["metadata"]
        self.assertEqual(meta["labels"], {
            "mine": "1", "platform.io/bootstrapping": "rbac-defaults",
            policy.AGGREGATE_TO_EDIT: "true"})
        self.assertEqual(meta["annotations"], {AUTOUPDATE: "yes-please"})

    def test_aggregation_selector_restored(self):
        self.reconcile()
        self.change_role("admin", lambda obj: obj["aggregationRule"].update(
            clusterRoleSelectors=[{"matchLabels": {"mine": "true"}}]))
        self.reconcile()
        self.assertEqual(self.role("admin")["aggregationRule"]["clusterRoleSelectors"], [
            {"matchLabels": {"mine": "true"}},
            {"matchLabels": {policy.AGGREGATE_TO_ADMIN: "true"}}])

    def test_deleted_binding_recreated(self):
        self.reconcile()
        self.resolve(self.bindings.delete(internal(), None, "system:basic-user"))
        results = self.reconcile()
        self.assertEqual(results["ClusterRoleBinding", "system:basic-user"].operation, CREATE)
        self.assertEqual(self.binding("system:basic-user")["roleRef"]["name"],
                         "system:basic-user")

    def test_missing_subject_added(self):
        self.reconcile()
        self.resolve(self.bindings.update(internal(), None, "system:public-info-viewer",
                                          lambda obj: {**obj, "subjects": [
                                              {"kind": "User", "name": "alice"}]}))
        self.reconcile()
        self.assertEqual([s["name"] for s in self.binding("system:public-info-viewer")["subjects"]],
                         ["alice", "system:authenticated", "system:unauthenticated"])

    def test_binding_with_other_role_ref_recreated(self):
        """roleRef is immutable: a binding naming another role is deleted and created."""
        self.resolve(self.bindings.create(internal(), {
            "metadata": {"name": "system:discovery"},
            "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "Group", "name": "system:unauthenticated"}]}, None))
        uid = self.binding("system:discovery")["metadata"]["uid"]
        results = self.reconcile()
        self.assertEqual(results["ClusterRoleBinding", "system:discovery"].operation, RECREATE)
        stored = self.binding("system:discovery")
        self.assertNotEqual(stored["metadata"]["uid"], uid)
        self.assertEqual(stored["roleRef"]["name"], "system:discovery")
        self.assertEqual([s["name"] for s in stored["subjects"]], ["system:authenticated"])

    def test_protected_binding_untouched(self):
        self.reconcile()
        self.resolve(self.bindings.update(internal(), None, "system:basic-user",
                                          lambda obj: {**obj, "subjects": [], "metadata": {
                                              **obj["metadata"],
                                              "annotations": {AUTOUPDATE: "false"}}}))
        revision = self.revision()
        result = self.reconcile()["ClusterRoleBinding", "system:basic-user"]
        self.assertTrue(result.protected)
        self.assertEqual(self.binding("system:basic-user").get("subjects") or [], [])
        self.assertEqual(self.revision(), revision)


class LeaderLockingTests(BootstrapCase):
    """Issue 32: upstream's namespaced bootstrap Roles and RoleBindings (leader locking),
    in platform-system, reconciled as the cluster ones."""

    def test_created_then_left_alone(self):
        results = self.resolve(reconcile_bootstrap_policy(self.stores, internal()))
        created = {(r.kind, r.name) for r in results if r.operation == CREATE}
        for name in ("system::leader-locking-kube-controller-manager",
                     "system::leader-locking-kube-scheduler"):
            self.assertIn(("Role", name), created)
            self.assertIn(("RoleBinding", name), created)
        roles = self.stores[rbac.ROLE.gvr]
        role = roles.cache.get(rbac.ROLE.storage_key(
            "platform-system", "system::leader-locking-kube-scheduler")).obj
        self.assertEqual(role["rules"], [{
            "verbs": ["create", "get", "list", "update", "watch"],
            "apiGroups": ["coordination.platform.io"], "resources": ["leases"]}])
        bindings = self.stores[rbac.ROLE_BINDING.gvr]
        binding = bindings.cache.get(rbac.ROLE_BINDING.storage_key(
            "platform-system", "system::leader-locking-kube-scheduler")).obj
        self.assertEqual(binding["subjects"], [
            {"kind": "User", "apiGroup": "rbac.authorization.platform.io",
             "name": "system:kube-scheduler"},
            {"kind": "ServiceAccount", "name": "kube-scheduler",
             "namespace": "platform-system"}])
        revision = self.revision()
        again = self.resolve(reconcile_bootstrap_policy(self.stores, internal()))
        self.assertEqual({r.operation for r in again}, {NONE})
        self.assertEqual(self.revision(), revision)

    def test_grants(self):
        """What the grants allow, asked of the RBAC authorizer as upstream's SARs."""
        stub = StubServer(rbac_policy=True, authorization=lambda internals: Authorization(
            AuthorizerChain([internals.rbac])))
        self.addCleanup(stub.stop)
        admin = stub.client()

        def allowed(user, namespace, verb, group, resource, name="", subresource=""):
            r = admin.post("/apis/authorization.platform.io/v1/subjectaccessreviews", {
                "spec": {"user": user, "resourceAttributes": {
                    "namespace": namespace, "verb": verb, "group": group,
                    "resource": resource, "name": name, "subresource": subresource}}})
            return r.json()["status"].get("allowed", False)

        coordination = "coordination.platform.io"
        self.assertTrue(allowed("system:kube-scheduler", "platform-system", "update",
                                coordination, "leases", "kube-scheduler"))
        self.assertTrue(allowed("system:kube-scheduler", "platform-system", "watch",
                                coordination, "leases"))
        self.assertTrue(allowed("system:kube-controller-manager", "ns1", "update",
                                coordination, "leases", "kube-controller-manager"))
        self.assertFalse(allowed("system:kube-controller-manager", "ns1", "update",
                                 coordination, "leases", "someone-else"))
        for group in ("", "events.platform.io"):
            self.assertTrue(allowed("system:kube-scheduler", "ns1", "patch", group, "events"))
        self.assertFalse(allowed("jane", "ns1", "create", "", "events"))
        # What a scheduler does: read nodes, services and budgets, bind pods.
        scheduler = "system:kube-scheduler"
        self.assertTrue(allowed(scheduler, "ns1", "create", "", "pods", "p", "binding"))
        self.assertTrue(allowed(scheduler, "ns1", "create", "", "bindings"))
        self.assertTrue(allowed(scheduler, "", "watch", "", "nodes"))
        self.assertTrue(allowed(scheduler, "ns1", "list", "", "services"))
        self.assertTrue(allowed(scheduler, "ns1", "list", "policy.platform.io",
                                "poddisruptionbudgets"))
        self.assertFalse(allowed(scheduler, "", "delete", "", "nodes"))
        self.assertFalse(allowed(scheduler, "ns1", "create", "", "pods", "p", "eviction"))
        # kube-proxy and kube-dns, bound as upstream binds them.
        self.assertTrue(allowed("system:kube-proxy", "", "watch", "discovery.platform.io",
                                "endpointslices"))
        self.assertFalse(allowed("system:kube-proxy", "ns1", "update", "", "services"))
        self.assertTrue(allowed("system:serviceaccount:platform-system:kube-dns", "ns1",
                                "watch", "", "endpoints"))
        # system:node is shipped and bound to no one (the Node authorizer's job).
        self.assertFalse(allowed("system:node:n1", "", "create", "", "nodes"))
        binding = admin.get("/apis/rbac.authorization.platform.io/v1/clusterrolebindings/"
                            "system:node").json()
        self.assertNotIn("subjects", binding)
        self.assertEqual(binding["roleRef"]["name"], "system:node")
        node = admin.get("/apis/rbac.authorization.platform.io/v1/clusterroles/"
                         "system:node").json()
        self.assertIn({"verbs": ["create"], "apiGroups": [""], "resources": ["pods/eviction"]},
                      node["rules"])
        # Workloads read the service account issuer's discovery documents.
        r = admin.post("/apis/authorization.platform.io/v1/subjectaccessreviews", {"spec": {
            "user": "system:serviceaccount:ns1:default", "groups": ["system:serviceaccounts"],
            "nonResourceAttributes": {"path": "/openid/v1/jwks", "verb": "get"}}})
        self.assertIs(r.json()["status"]["allowed"], True)
