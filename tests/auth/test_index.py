"""
RBACIndex (platformd/auth/rbac/index.py) keeps up with the watch cache: roles and
bindings created, updated and deleted after ``start()``, none after ``stop()``; through
fake caches and through the in-memory server's real watch cache.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.auth.interfaces import ALLOW, NO_OPINION
from platformd.auth.rbac import build
from platformd.auth.rbac.authorizer import RBACAuthorizer

from tests.auth.fixtures import FakeCaches, ask, binding, resource, role, rule, subject, user
from tests.stub import StubServer

JANE = user("jane")
BOB = user("bob", "devs")
PODS = resource("list", "pods", namespace="dev")
RBAC = "/apis/rbac.authorization.platform.io/v1"


class IndexTests(SynchronousTestCase):
    def setUp(self):
        self.caches = FakeCaches()
        self.index = self.caches.index()
        self.authorizer = RBACAuthorizer(self.index, Clock())

    def verdict(self, who=JANE, info=PODS):
        return ask(self.authorizer, who, info).verdict

    def test_loads_at_start(self):
        self.caches.put(role("r", rule(["list"], [""], ["pods"]), namespace="dev"),
                        binding("b", "Role", "r", subject("User", "jane"), namespace="dev"))
        self.assertEqual(self.verdict(), NO_OPINION)
        self.index.start()
        self.addCleanup(self.index.stop)
        self.assertEqual(self.verdict(), ALLOW)

    def test_follows_changes(self):
        self.index.start()
        self.addCleanup(self.index.stop)
        self.caches.put(binding("b", "Role", "r", subject("User", "jane"), namespace="dev"))
        self.assertEqual(ask(self.authorizer, JANE, PODS).error,
                         'role.rbac.authorization.platform.io "r" not found')
        # The role arrives.
        self.caches.put(role("r", rule(["list"], [""], ["pods"]), namespace="dev"))
        self.assertEqual(self.verdict(), ALLOW)
        # Its rules change.
        self.caches.put(role("r", rule(["get"], [""], ["pods"]), namespace="dev"))
        self.assertEqual(self.verdict(), NO_OPINION)
        self.caches.put(role("r", rule(["list", "get"], [""], ["pods"]), namespace="dev"))
        self.assertEqual(self.verdict(), ALLOW)
        # The binding's subjects change: from jane to the group devs.
        self.caches.put(binding("b", "Role", "r", subject("Group", "devs"), namespace="dev"))
        self.assertEqual((self.verdict(JANE), self.verdict(BOB)), (NO_OPINION, ALLOW))
        # The binding goes; so does the namespace's scope.
        self.caches.delete("RoleBinding", "b", "dev")
        self.assertEqual(self.verdict(BOB), NO_OPINION)
        self.assertEqual(self.index.namespaces, {})
        # The role goes: a binding to it reports it.
        self.caches.put(binding("b", "Role", "r", subject("Group", "devs"), namespace="dev"))
        self.assertEqual(self.verdict(BOB), ALLOW)
        self.caches.delete("Role", "r", "dev")
        self.assertEqual(ask(self.authorizer, BOB, PODS).error,
                         'role.rbac.authorization.platform.io "r" not found')

    def test_cluster_objects(self):
        self.index.start()
        self.addCleanup(self.index.stop)
        self.caches.put(role("c", rule(["list"], [""], ["pods"])),
                        binding("cb", "ClusterRole", "c", subject("User", "jane")))
        self.assertEqual(self.verdict(JANE, resource("list", "pods")), ALLOW)
        self.caches.delete("ClusterRole", "c")
        self.assertEqual(self.verdict(JANE, resource("list", "pods")), NO_OPINION)
        self.caches.put(role("c", rule(["list"], [""], ["pods"])))
        self.caches.delete("ClusterRoleBinding", "cb")
        self.assertEqual(self.verdict(JANE, resource("list", "pods")), NO_OPINION)
        self.assertEqual(self.index.bindings, {})

    def test_stop_removes_listeners(self):
        self.index.start()
        self.index.start()  # once only
        self.assertEqual([len(k.handlers) for k in self.caches.kinds.values()], [1, 1, 1, 1])
        self.index.stop()
        self.assertEqual([len(k.handlers) for k in self.caches.kinds.values()], [0, 0, 0, 0])
        self.caches.put(role("c", rule(["list"], [""], ["pods"])),
                        binding("cb", "ClusterRole", "c", subject("User", "jane")))
        self.assertEqual(self.verdict(JANE, resource("list", "pods")), NO_OPINION)

    def test_undecodable_object_is_dropped(self):
        self.caches.put(binding("cb", "ClusterRole", "c", subject("User", "jane")))
        self.index.start()
        self.addCleanup(self.index.stop)
        self.caches.kinds["clusterrolebindings"].put({"metadata": {"name": "cb"}},
                                                     raw=b"{not json")
        self.assertEqual(self.index.bindings, {})


class SharingTests(SynchronousTestCase):
    """
    The index keeps a binding's subjects shared with other bindings naming the same
    subject (a dict of the same strings), and no per-binding containers it does not
    need: what it decides is unchanged.
    """

    def test_equal_subjects_shared(self):
        caches = FakeCaches()
        index = caches.index()
        index.start()
        self.addCleanup(index.stop)
        caches.put(role("r", rule(["list"], [""], ["pods"]), namespace="dev"),
                   binding("a", "Role", "r", subject("Group", "devs"), subject("User", "jane"),
                           namespace="dev"),
                   binding("b", "Role", "r", subject("Group", "devs"), namespace="dev"),
                   binding("c", "Role", "r", {**subject("Group", "devs"), "extra": "x"},
                           namespace="dev"))
        a, b, c = (next(v for v in index.bindings.values() if v.name == n) for n in "abc")
        self.assertIs(a.subjects[0], b.subjects[0])
        self.assertEqual(a.subjects[0], subject("Group", "devs"))
        self.assertIsNot(c.subjects[0], a.subjects[0])  # other fields: its own
        self.assertEqual(c.subjects[0]["extra"], "x")
        self.assertEqual((b.subject_errors, b.scope_errors, b.memo), ((), (), None))
        authorizer = RBACAuthorizer(index, Clock())
        self.assertEqual(ask(authorizer, BOB, PODS).verdict, ALLOW)
        self.assertEqual(ask(authorizer, JANE, PODS).verdict, ALLOW)
        self.assertEqual(ask(authorizer, user("eve"), PODS).verdict, NO_OPINION)

    def test_errors_still_reported(self):
        """A subject of an unknown kind is a scope-wide error; a User with a namespace an
        error for that user, as before."""
        caches = FakeCaches()
        index = caches.index()
        index.start()
        self.addCleanup(index.stop)
        caches.put(binding("b", "Role", "r", subject("Robot", "r2"),
                           {**subject("User", "jane"), "namespace": "dev"}, namespace="dev"))
        [b] = index.bindings.values()
        self.assertEqual(len(b.scope_errors), 1)
        self.assertEqual(len(b.subject_errors), 1)

    def test_one_binding_filed_as_itself(self):
        """A subject named by one binding is filed as that binding, by several as a dict
        of them; as bindings come and go it changes form and decides the same."""
        caches = FakeCaches()
        index = caches.index()
        index.start()
        self.addCleanup(index.stop)
        authorizer = RBACAuthorizer(index, Clock())
        caches.put(role("r", rule(["list"], [""], ["pods"]), namespace="dev"),
                   binding("a", "Role", "r", subject("User", "jane"), subject("User", "jane"),
                           namespace="dev"))
        scope = index.namespaces["dev"]
        [a] = index.bindings.values()
        self.assertIs(scope.users["jane"], a)
        self.assertEqual(list(scope.bindings_for(JANE)), [a])
        caches.put(binding("b", "Role", "r", subject("User", "jane"), subject("Group", "devs"),
                           namespace="dev"))
        b = next(v for v in index.bindings.values() if v.name == "b")
        self.assertEqual(scope.users["jane"], {a.key: a, b.key: b})
        self.assertIs(scope.groups["devs"], b)
        self.assertEqual(list(scope.bindings_for(user("jane", "devs"))), [a, b])
        caches.delete("RoleBinding", "a", "dev")
        self.assertIs(scope.users["jane"], b)
        self.assertEqual(ask(authorizer, JANE, PODS).verdict, ALLOW)
        caches.put(binding("b", "Role", "r", subject("Group", "devs"), namespace="dev"))
        self.assertNotIn("jane", scope.users)
        self.assertEqual((ask(authorizer, JANE, PODS).verdict,
                          ask(authorizer, BOB, PODS).verdict), (NO_OPINION, ALLOW))
        caches.delete("RoleBinding", "b", "dev")
        self.assertNotIn("dev", index.namespaces)


class WatchCacheTests(SynchronousTestCase):
    """Through the in-memory server: objects written over HTTP reach the index."""

    def test_keeps_up_with_the_server(self):
        stub = StubServer()
        self.addCleanup(stub.stop)
        admin = stub.client()
        authorizer, index = build(stub.components.informers, stub.clock)
        admin.post(f"{RBAC}/clusterroles", role("early", rule(["get"], [""], ["nodes"])))
        index.start()
        self.addCleanup(index.stop)
        self.assertIn("early", index.cluster_roles)
        admin.post("/api/v1/namespaces", {"metadata": {"name": "dev"}})
        r = admin.post(f"{RBAC}/namespaces/dev/roles",
                       role("r", rule(["list"], [""], ["pods"]), namespace="dev"))
        self.assertEqual(r.code, 201, r.body)
        r = admin.post(f"{RBAC}/namespaces/dev/rolebindings",
                       binding("b", "Role", "r", subject("User", "jane"), namespace="dev"))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(ask(authorizer, JANE, PODS).verdict, ALLOW)
        r = admin.put(f"{RBAC}/namespaces/dev/rolebindings/b",
                      binding("b", "Role", "r", subject("User", "bob"), namespace="dev"))
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((ask(authorizer, JANE, PODS).verdict, ask(authorizer, BOB, PODS).verdict),
                         (NO_OPINION, ALLOW))
        r = admin.delete(f"{RBAC}/namespaces/dev/roles/r")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(ask(authorizer, BOB, PODS).error,
                         'role.rbac.authorization.platform.io "r" not found')
        admin.delete(f"{RBAC}/namespaces/dev/rolebindings/b")
        self.assertEqual(ask(authorizer, BOB, PODS).verdict, NO_OPINION)
        self.assertEqual(index.bindings, {})
