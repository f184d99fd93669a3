"""
RBACAuthorizer (platformd/auth/rbac/authorizer.py) over an RBACIndex: a table of
decisions from upstream's documented semantics, the errors it reports (spec 2.2, 7.4),
the reasons it gives, and ``rules_for``.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from platformd.auth.interfaces import (
    ALLOW, NO_OPINION, Decision, IAuthorizer, IRuleResolver, RulesForUser, UserInfo,
)
from platformd.auth.rbac.authorizer import RBACAuthorizer

from tests.auth.fixtures import (
    FakeCaches, ask, binding, path, resource, role, rule, subject, user,
)

WORLD = [
    role("pod-reader", rule(["get", "list", "watch"], [""], ["pods"])),
    role("admin-all", rule(["*"], ["*"], ["*"])),
    role("status-writer", rule(["update"], [""], ["*/status"])),
    role("named-cm", rule(["get", "update"], [""], ["configmaps"], names=["app-config"])),
    role("urls", rule(["get"], urls=["/healthz", "/logs/*"])),
    role("deploy-patcher", rule(["patch"], ["apps"], ["deployments"])),
    role("dev-editor", rule(["*"], [""], ["configmaps"]), namespace="dev"),
    binding("readers", "ClusterRole", "pod-reader", subject("Group", "readers")),
    binding("root", "ClusterRole", "admin-all", subject("User", "root")),
    binding("health", "ClusterRole", "urls", subject("Group", "system:authenticated")),
    binding("statuses", "ClusterRole", "status-writer",
            subject("ServiceAccount", "updater", "ops")),
    binding("dev-editors", "Role", "dev-editor", subject("User", "jane"), namespace="dev"),
    binding("dev-readers", "ClusterRole", "pod-reader", subject("ServiceAccount", "ci"),
            namespace="dev"),
    binding("named", "ClusterRole", "named-cm", subject("User", "nina"), namespace="dev"),
    binding("patchers", "ClusterRole", "deploy-patcher", subject("Group", "deployers"),
            namespace="prod"),
]

JANE = user("jane")
BOB = user("bob", "readers")
ROOT = user("root")
CI = user("system:serviceaccount:dev:ci", "system:serviceaccounts",
          "system:serviceaccounts:dev")
UPDATER = user("system:serviceaccount:ops:updater")
ANONYMOUS = UserInfo("system:anonymous", "", ("system:unauthenticated",))
NINA = user("nina")
DEPLOYER = user("dora", "deployers")

#: (who, request, allowed)
TABLE = [
    # A RoleBinding to a Role: that namespace only.
    (JANE, resource("get", "configmaps", namespace="dev", name="a"), True),
    (JANE, resource("create", "configmaps", namespace="dev"), True),
    (JANE, resource("get", "configmaps", namespace="prod", name="a"), False),
    (JANE, resource("list", "configmaps"), False),
    (JANE, resource("list", "pods", namespace="dev"), False),
    # A ClusterRoleBinding to a group: every namespace and cluster-wide.
    (BOB, resource("list", "pods", namespace="dev"), True),
    (BOB, resource("watch", "pods", namespace="anywhere"), True),
    (BOB, resource("list", "pods"), True),
    (BOB, resource("delete", "pods", namespace="dev", name="p"), False),
    (BOB, resource("get", "pods", namespace="dev", name="p", subresource="log"), False),
    (BOB, resource("list", "pods", "apps", namespace="dev"), False),
    # Everything, but no non-resource URL.
    (ROOT, resource("delete", "nodes", name="n"), True),
    (ROOT, resource("escalate", "clusterroles", "rbac.authorization.platform.io", name="x"),
     True),
    (ROOT, path("get", "/metrics"), False),
    # A RoleBinding to a ClusterRole, for a service account named without a namespace:
    # the binding's namespace, and only there.
    (CI, resource("list", "pods", namespace="dev"), True),
    (CI, resource("list", "pods", namespace="prod"), False),
    (CI, resource("list", "pods"), False),
    (user("system:serviceaccount:prod:ci"), resource("list", "pods", namespace="dev"), False),
    # A service account named with its namespace, by a ClusterRoleBinding; */status.
    (UPDATER, resource("update", "pods", namespace="a", name="p", subresource="status"), True),
    (UPDATER, resource("update", "nodes", name="n", subresource="status"), True),
    (UPDATER, resource("update", "pods", namespace="a", name="p"), False),
    (UPDATER, resource("update", "deployments", "apps", "a", "d", "status"), False),
    (user("system:serviceaccount:ops:other"), resource("update", "nodes", name="n",
                                                      subresource="status"), False),
    # Non-resource URLs for system:authenticated.
    (JANE, path("get", "/healthz"), True),
    (JANE, path("get", "/logs/platformd.log"), True),
    (JANE, path("get", "/logs"), False),
    (JANE, path("post", "/healthz"), False),
    (ANONYMOUS, path("get", "/healthz"), False),
    # resourceNames.
    (NINA, resource("get", "configmaps", namespace="dev", name="app-config"), True),
    (NINA, resource("update", "configmaps", namespace="dev", name="app-config"), True),
    (NINA, resource("get", "configmaps", namespace="dev", name="other"), False),
    (NINA, resource("list", "configmaps", namespace="dev"), False),
    (NINA, resource("create", "configmaps", namespace="dev"), False),
    (NINA, resource("get", "configmaps", namespace="prod", name="app-config"), False),
    # Groups by name; API groups exactly.
    (DEPLOYER, resource("patch", "deployments", "apps", "prod", "d"), True),
    (DEPLOYER, resource("patch", "deployments", "", "prod", "d"), False),
    (DEPLOYER, resource("update", "deployments", "apps", "prod", "d"), False),
    (DEPLOYER, resource("patch", "deployments", "apps", "dev", "d"), False),
    (user("deployers"), resource("patch", "deployments", "apps", "prod", "d"), False),
]


class AuthorizerTestCase(SynchronousTestCase):
    def setUp(self):
        self.caches = FakeCaches()
        self.index = self.caches.index()
        self.index.start()
        self.addCleanup(self.index.stop)
        self.clock = Clock()
        self.authorizer = RBACAuthorizer(self.index, self.clock)


class DecisionTests(AuthorizerTestCase):
    def setUp(self):
        super().setUp()
        self.caches.put(*WORLD)

    def test_interfaces(self):
        verifyObject(IAuthorizer, self.authorizer)
        verifyObject(IRuleResolver, self.authorizer)

    def test_table(self):
        for who, info, allowed in TABLE:
            decision = ask(self.authorizer, who, info)
            self.assertIsInstance(decision, Decision)
            self.assertEqual(decision.verdict, ALLOW if allowed else NO_OPINION,
                             (who.name, info))
            if not allowed:
                self.assertEqual((decision.reason, decision.error), ("", ""))

    def test_allowed_reasons(self):
        """Upstream's describers name the binding, its role and the subject that applied."""
        self.assertEqual(
            ask(self.authorizer, JANE, resource("get", "configmaps", namespace="dev")).reason,
            'RBAC: allowed by RoleBinding "dev-editors/dev" of Role "dev-editor" to User "jane"')
        self.assertEqual(
            ask(self.authorizer, BOB, resource("list", "pods")).reason,
            'RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "pod-reader" to '
            'Group "readers"')
        self.assertEqual(
            ask(self.authorizer, CI, resource("list", "pods", namespace="dev")).reason,
            'RBAC: allowed by RoleBinding "dev-readers/dev" of ClusterRole "pod-reader" to '
            'ServiceAccount "ci/dev"')

    def test_no_user(self):
        self.assertEqual(self.authorizer.authorize(
            type("A", (), {"user": None, "info": path("get", "/healthz")})()).verdict,
            NO_OPINION)

    def test_binding_naming_the_user_twice(self):
        """A binding that applies through several subjects is visited once."""
        self.caches.put(binding("twice", "ClusterRole", "missing", subject("User", "jane"),
                                subject("Group", "system:authenticated")))
        decision = ask(self.authorizer, JANE, resource("list", "secrets"))
        self.assertEqual(decision.error, 'clusterrole.rbac.authorization.platform.io '
                                         '"missing" not found')
        rules = self.authorizer.rules_for(JANE, "")
        self.assertEqual(rules.error, decision.error)

    def test_rules_for(self):
        self.assertEqual(self.authorizer.rules_for(JANE, "dev"), RulesForUser(
            ({"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"]},),
            ({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/logs/*"]},), False, ""))
        self.assertEqual(self.authorizer.rules_for(NINA, "dev").resource_rules, (
            {"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps"],
             "resourceNames": ["app-config"]},))
        # Cluster scope: ClusterRoleBindings only.
        self.assertEqual(self.authorizer.rules_for(CI, "").resource_rules, ())
        self.assertEqual(self.authorizer.rules_for(CI, "dev").resource_rules, (
            {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},))


class ErrorTests(AuthorizerTestCase):
    """Evaluation errors: NoOpinion, reason ``RBAC: <errors>``, ``Decision.error``."""

    def check(self, who, info, error):
        decision = ask(self.authorizer, who, info)
        self.assertEqual(decision, Decision(NO_OPINION, "RBAC: " + error, error))
        self.assertEqual(self.authorizer.rules_for(who, info.namespace).error, error)

    def test_missing_role(self):
        self.caches.put(binding("b", "Role", "gone", subject("User", "jane"), namespace="dev"))
        self.check(JANE, resource("get", "pods", namespace="dev"),
                   'role.rbac.authorization.platform.io "gone" not found')
        # Only where the binding counts, and only for whom it names.
        self.assertEqual(ask(self.authorizer, JANE, resource("get", "pods", namespace="prod")),
                         Decision(NO_OPINION))
        self.assertEqual(ask(self.authorizer, BOB, resource("get", "pods", namespace="dev")),
                         Decision(NO_OPINION))

    def test_missing_cluster_role(self):
        self.caches.put(binding("b", "ClusterRole", "gone", subject("Group", "readers")))
        self.check(BOB, resource("get", "pods", namespace="dev"),
                   'clusterrole.rbac.authorization.platform.io "gone" not found')

    def test_role_in_a_cluster_role_binding(self):
        self.caches.put(role("r", rule(["*"], ["*"], ["*"]), namespace="dev"),
                        binding("b", "Role", "r", subject("User", "jane")))
        self.check(JANE, resource("get", "pods", namespace="dev"),
                   'role.rbac.authorization.platform.io "r" not found')

    def test_unsupported_role_ref_kind(self):
        self.caches.put(binding("b", "Policy", "p", subject("User", "jane")))
        self.check(JANE, resource("get", "pods"), 'unsupported role reference kind: "Policy"')

    def test_unknown_subject_kind(self):
        """Names nobody, so every request in the binding's scope hears of it."""
        self.caches.put(binding("b", "ClusterRole", "x", subject("Robot", "r2"),
                                namespace="dev"))
        self.check(BOB, resource("get", "pods", namespace="dev"),
                   'unsupported subject kind: "Robot"')
        self.assertEqual(ask(self.authorizer, BOB, resource("get", "pods", namespace="prod")),
                         Decision(NO_OPINION))

    def test_namespace_on_user_or_group(self):
        """Reported to whom the subject names; the binding still grants, as upstream's."""
        self.caches.put(role("r", rule(["get"], [""], ["pods"])),
                        binding("b", "ClusterRole", "r", subject("User", "jane", "dev"),
                                subject("Group", "readers", "dev")))
        self.check(JANE, resource("list", "pods"),
                   'User subject "jane" must not have a namespace (has "dev")')
        self.check(BOB, resource("list", "pods"),
                   'Group subject "readers" must not have a namespace (has "dev")')
        self.assertEqual(ask(self.authorizer, JANE, resource("get", "pods")).verdict, ALLOW)

    def test_several_errors(self):
        self.caches.put(binding("a", "ClusterRole", "gone", subject("User", "jane")),
                        binding("b", "Role", "gone", subject("User", "jane"), namespace="dev"))
        self.check(JANE, resource("get", "pods", namespace="dev"),
                   '[clusterrole.rbac.authorization.platform.io "gone" not found, '
                   'role.rbac.authorization.platform.io "gone" not found]')

    def test_errors_do_not_matter_when_allowed(self):
        self.caches.put(role("r", rule(["get"], [""], ["pods"])),
                        binding("a", "ClusterRole", "gone", subject("User", "jane")),
                        binding("b", "ClusterRole", "r", subject("User", "jane")))
        decision = ask(self.authorizer, JANE, resource("get", "pods"))
        self.assertEqual((decision.verdict, decision.error), (ALLOW, ""))

    def test_errors_logged_once_a_minute(self):
        logged: list = []
        observer = logged.append
        globalLogPublisher.addObserver(observer)
        self.addCleanup(globalLogPublisher.removeObserver, observer)
        self.caches.put(binding("a", "ClusterRole", "gone", subject("User", "jane")))
        mine = lambda: [e for e in logged if e.get("log_format", "").startswith("RBAC:")]
        for _ in range(5):
            ask(self.authorizer, JANE, resource("get", "pods"))
        self.assertEqual(len(mine()), 1)
        self.clock.advance(61)
        ask(self.authorizer, JANE, resource("get", "pods"))
        self.assertEqual(len(mine()), 2)
        self.assertEqual(mine()[0]["detail"],
                         'clusterrole.rbac.authorization.platform.io "gone" not found')
