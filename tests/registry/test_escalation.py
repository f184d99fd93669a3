"""
Escalation prevention (platformd/registry/escalation.py), after upstream's
policy-based RBAC storages: end to end through the in-memory server with the RBAC
authorizer in place (the RBAC stores make the check), its place among admission's
steps, and unit cases (authorizers that answer later, updates of garbage-collector
fields only).
"""

from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from platformd import errors
from platformd.admission.interfaces import (
    AdmissionAttributes, IMutatingPlugin, IValidatingPlugin,
)
from platformd.auth.interfaces import ALLOW, NO_OPINION, Decision, IAuthorizer
from platformd.auth.rbac import build
from platformd.registry import rbac as rbac_kinds
from platformd.registry.escalation import EscalationCheck, escalation_message, only_gc_fields
from platformd.registry.interfaces import IWriteCheck

from tests.auth.fixtures import FakeCaches, binding, role, rule, subject, user
from tests.stub import StubServer

RBAC = "/apis/rbac.authorization.platform.io/v1"
G = "rbac.authorization.platform.io"
HEAD = ('user "jane" (groups=["devs" "system:authenticated"]) is attempting to grant RBAC '
        'permissions not currently held:\n')


@implementer(IAuthorizer)
class Masters:
    """system:masters may do anything (what the daemon's PrivilegedGroups does)."""

    def authorize(self, attributes):
        if "system:masters" in attributes.user.groups:
            return Decision(ALLOW)
        return Decision(NO_OPINION)


def check_for(index) -> EscalationCheck:
    check = EscalationCheck(index)
    assert IWriteCheck.providedBy(check)
    return check


class Server(SynchronousTestCase):
    """The in-memory server with RBAC authorizing, and jane's and carl's rights."""

    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        authorizer, index = build(self.stub.components.informers, self.stub.clock)
        index.start()
        self.addCleanup(index.stop)
        self.stub.components.api.authorizer.authorizers = [Masters(), authorizer]
        self.admin = self.stub.client()
        self.jane = self.stub.client(user="jane", groups=("devs",))
        self.carl = self.stub.client(user="carl", groups=())
        self.created(self.admin, "/api/v1/namespaces", {"metadata": {"name": "dev"}})
        for obj in (
            # Not "*": that would include escalate and bind.
            role("rbac-writer", rule(["create", "get", "list", "update", "patch", "delete"],
                                     [G], ["roles", "rolebindings"])),
            role("secret-reader", rule(["get"], [""], ["secrets"])),
            role("pod-reader", rule(["get", "list", "watch"], [""], ["pods"])),
            role("cm-all", rule(["*"], [""], ["configmaps"]), namespace="dev"),
            binding("jane-rbac", "ClusterRole", "rbac-writer", subject("User", "jane"),
                    namespace="dev"),
            binding("jane-cm", "Role", "cm-all", subject("Group", "devs"), namespace="dev"),
            role("crb-writer", rule(["create", "update"], [G], ["clusterrolebindings",
                                                               "clusterroles"]),
                 rule(["get"], [""], ["pods"])),
            binding("carl", "ClusterRole", "crb-writer", subject("User", "carl")),
        ):
            self.created(self.admin, self.url(obj), obj)

    @staticmethod
    def url(obj) -> str:
        plural = obj["kind"].lower() + "s"
        namespace = obj["metadata"].get("namespace")
        return f"{RBAC}/namespaces/{namespace}/{plural}" if namespace else f"{RBAC}/{plural}"

    def created(self, client, url, obj):
        r = client.post(url, obj)
        self.assertEqual(r.code, 201, r.body)
        return r

    def refused(self, client, obj, plural, message, method="post"):
        url = self.url(obj)
        if method == "put":
            url += "/" + obj["metadata"]["name"]
        r = getattr(client, method)(url, obj)
        self.assertEqual(r.code, 403, r.body)
        name = obj["metadata"]["name"]
        self.assertEqual(r.json()["message"], f'{plural}.{G} "{name}" is forbidden: {message}')
        self.assertEqual(r.json()["details"], {"name": name, "group": G, "kind": plural})


class EndToEndTests(Server):
    def test_role_within_the_writers_rights(self):
        self.created(self.jane, f"{RBAC}/namespaces/dev/roles",
                     role("cm-reader", rule(["get", "list"], [""], ["configmaps"]),
                          namespace="dev"))

    def test_role_beyond_the_writers_rights(self):
        self.refused(self.jane, role("pods", rule(["get", "list"], [""], ["pods"]),
                                     rule(["get"], [""], ["configmaps"]),
                                     rule(["watch"], ["apps"], ["*"]), namespace="dev"),
                     "roles",
                     HEAD + '{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}\n'
                     '{APIGroups:["apps"], Resources:["*"], Verbs:["watch"]}')

    def test_role_update_beyond_the_writers_rights(self):
        obj = role("cm-reader", rule(["get"], [""], ["configmaps"]), namespace="dev")
        self.created(self.jane, f"{RBAC}/namespaces/dev/roles", obj)
        obj["rules"].append(rule(["delete"], [""], ["secrets"], names=["s"]))
        self.refused(self.jane, obj, "roles", HEAD + '{APIGroups:[""], Resources:["secrets"], '
                     'ResourceNames:["s"], Verbs:["delete"]}', method="put")

    def test_escalate_verb(self):
        self.created(self.admin, f"{RBAC}/clusterroles",
                     role("escalator", rule(["escalate"], [G], ["roles"])))
        self.created(self.admin, f"{RBAC}/namespaces/dev/rolebindings",
                     binding("jane-escalates", "ClusterRole", "escalator",
                             subject("User", "jane"), namespace="dev"))
        self.created(self.jane, f"{RBAC}/namespaces/dev/roles",
                     role("pods", rule(["*"], ["*"], ["*"]), namespace="dev"))

    def test_binding_within_the_writers_rights(self):
        self.created(self.jane, f"{RBAC}/namespaces/dev/rolebindings",
                     binding("cm-to-bob", "Role", "cm-all", subject("User", "bob"),
                             namespace="dev"))

    def test_binding_beyond_the_writers_rights(self):
        self.refused(self.jane, binding("pods-to-bob", "ClusterRole", "pod-reader",
                                        subject("User", "bob"), namespace="dev"),
                     "rolebindings",
                     HEAD + '{APIGroups:[""], Resources:["pods"], Verbs:["get" "list" "watch"]}')

    def test_bind_verb(self):
        self.created(self.admin, f"{RBAC}/clusterroles",
                     role("binder", rule(["bind"], [G], ["clusterroles"], names=["pod-reader"])))
        self.created(self.admin, f"{RBAC}/namespaces/dev/rolebindings",
                     binding("jane-binds", "ClusterRole", "binder", subject("User", "jane"),
                             namespace="dev"))
        self.created(self.jane, f"{RBAC}/namespaces/dev/rolebindings",
                     binding("pods-to-bob", "ClusterRole", "pod-reader",
                             subject("User", "bob"), namespace="dev"))
        # Only the role named.
        self.refused(self.jane, binding("secrets-to-bob", "ClusterRole", "secret-reader",
                                        subject("User", "bob"), namespace="dev"),
                     "rolebindings", HEAD + '{APIGroups:[""], Resources:["secrets"], '
                     'Verbs:["get"]}')

    def test_binding_to_a_missing_role(self):
        r = self.jane.post(f"{RBAC}/namespaces/dev/rolebindings",
                           binding("b", "Role", "nope", subject("User", "bob"), namespace="dev"))
        self.assertEqual(r.code, 404, r.body)
        self.assertEqual(r.json()["message"], f'roles.{G} "nope" not found')

    def test_resolution_errors(self):
        self.created(self.admin, f"{RBAC}/namespaces/dev/rolebindings",
                     binding("ghostly", "Role", "ghost", subject("User", "jane"),
                             namespace="dev"))
        self.refused(self.jane, role("pods", rule(["get"], [""], ["pods"]), namespace="dev"),
                     "roles", HEAD + '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}'
                     f'; resolution errors: [roles.{G} "ghost" not found]')

    def test_cluster_role_binding(self):
        """Checked at cluster scope: carl's RoleBindings would not count."""
        self.refused(self.carl, binding("pods", "ClusterRole", "pod-reader",
                                        subject("User", "bob")), "clusterrolebindings",
                     'user "carl" (groups=["system:authenticated"]) is attempting to grant '
                     'RBAC permissions not currently held:\n'
                     '{APIGroups:[""], Resources:["pods"], Verbs:["list" "watch"]}')

    def test_cluster_role(self):
        self.refused(self.carl, role("c", rule(["get"], [""], ["pods"]),
                                     rule(["get"], urls=["/metrics", "/healthz"])),
                     "clusterroles",
                     'user "carl" (groups=["system:authenticated"]) is attempting to grant '
                     'RBAC permissions not currently held:\n'
                     '{NonResourceURLs:["/healthz"], Verbs:["get"]}\n'
                     '{NonResourceURLs:["/metrics"], Verbs:["get"]}')

    def test_aggregation_rule_needs_everything(self):
        self.refused(self.carl, role("agg", aggregationRule={"clusterRoleSelectors": [
            {"matchLabels": {"a": "b"}}]}), "clusterroles",
            "must have cluster-admin privileges to use the aggregationRule")
        self.created(self.admin, f"{RBAC}/clusterroles", role("agg", aggregationRule={
            "clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}))

    def test_system_masters(self):
        self.created(self.admin, f"{RBAC}/clusterrolebindings",
                     binding("anything", "ClusterRole", "pod-reader", subject("User", "bob")))
        self.created(self.admin, f"{RBAC}/clusterroles",
                     role("everything", rule(["*"], ["*"], ["*"]), rule(["*"], urls=["*"])))


@implementer(IMutatingPlugin, IValidatingPlugin)
class Steps:
    """An admission plugin recording its steps on the RBAC kinds; ``admit`` adds
    ``extra`` to a Role's rules."""

    name = "Steps"

    def __init__(self, extra=None):
        self.extra = extra
        self.seen: list = []

    def handles(self, operation):
        return True

    def admit(self, a):
        if a.kind.gvr == rbac_kinds.ROLE.gvr:
            self.seen.append("admit")
            if self.extra is not None:
                a.obj["rules"].append(self.extra)

    def validate(self, a):
        if a.kind.gvr == rbac_kinds.ROLE.gvr:
            self.seen.append("validate")


class OrderTests(Server):
    """Where the RBAC stores' check runs among the write's steps: after mutating
    admission (what a mutating plugin adds is checked) and the kind's validation, before
    validating admission, as the admission plugin it was ran; in a dry run too."""

    def steps(self, extra=None) -> Steps:
        steps = Steps(extra)
        admission = self.stub.components.admission
        admission.set_plugins(list(admission.plugins) + [steps])
        return steps

    def test_after_mutating_admission(self):
        steps = self.steps(rule(["get"], [""], ["pods"]))
        self.refused(self.jane, role("cm", rule(["get"], [""], ["configmaps"]),
                                     namespace="dev"), "roles",
                     HEAD + '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}')
        self.assertEqual(steps.seen, ["admit"])

    def test_update_after_mutating_admission(self):
        obj = role("cm", rule(["get"], [""], ["configmaps"]), namespace="dev")
        self.created(self.jane, f"{RBAC}/namespaces/dev/roles", obj)
        steps = self.steps(rule(["get"], [""], ["pods"]))
        self.refused(self.jane, obj, "roles",
                     HEAD + '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}', method="put")
        self.assertEqual(steps.seen, ["admit"])

    def test_before_validating_admission(self):
        steps = self.steps()
        self.created(self.jane, f"{RBAC}/namespaces/dev/roles",
                     role("cm", rule(["get"], [""], ["configmaps"]), namespace="dev"))
        self.assertEqual(steps.seen, ["admit", "validate"])

    def test_before_the_kinds_validation(self):
        """An escalating and invalid role is 403: upstream's policybased storage checks
        before its inner store's strategy validates (a valid one the user may grant
        goes on to the kind's 422)."""
        r = self.jane.post(f"{RBAC}/namespaces/dev/roles", role(
            "bad", rule(["get"], [""], ["pods"]), rule([], [""], ["configmaps"]),
            namespace="dev"))
        self.assertEqual((r.code, r.json()["reason"]), (403, "Forbidden"), r.body)
        r = self.jane.post(f"{RBAC}/namespaces/dev/roles", role(
            "bad", rule(["get"], [""], ["configmaps"]), rule([], [""], ["configmaps"]),
            namespace="dev"))
        self.assertEqual((r.code, r.json()["reason"]), (422, "Invalid"), r.body)

    def test_dry_run(self):
        r = self.jane.post(f"{RBAC}/namespaces/dev/roles?dryRun=All",
                           role("pods", rule(["get"], [""], ["pods"]), namespace="dev"))
        self.assertEqual(r.code, 403, r.body)


@implementer(IAuthorizer)
class Later:
    """Answers every question with a Deferred, fired by the test."""

    def __init__(self):
        self.asked: list = []

    def authorize(self, attributes):
        d: Deferred = Deferred()
        self.asked.append((attributes, d))
        return d


class Context:
    def __init__(self, who, authorizer, info=None):
        self.user = who
        self.authorizer = authorizer
        self.info = info
        self.dry_run = False


class UnitTests(SynchronousTestCase):
    def setUp(self):
        self.caches = FakeCaches()
        self.caches.put(role("pod-reader", rule(["get"], [""], ["pods"])))
        self.index = self.caches.index()
        self.index.start()
        self.check = check_for(self.index)
        self.later = Later()
        self.jane = user("jane")

    def attributes(self, operation, kind, obj, old=None, namespace="dev"):
        return AdmissionAttributes(operation, kind, namespace, obj["metadata"]["name"], "",
                                   obj, old, Context(self.jane, self.later))

    def test_interface(self):
        verifyObject(IWriteCheck, self.check)

    def test_other_kinds_pass(self):
        from platformd.registry import core
        a = self.attributes("CREATE", core.CONFIG_MAP, {"metadata": {"name": "x"}})
        self.assertIsNone(self.check.check(a))

    def test_bind_answered_later(self):
        obj = binding("b", "ClusterRole", "pod-reader", subject("User", "bob"), namespace="dev")
        d = self.check.check(self.attributes("CREATE", rbac_kinds.ROLE_BINDING, obj))
        (asked, answer), = self.later.asked
        info = asked.info
        self.assertEqual((info.verb, info.group, info.resource, info.namespace, info.name),
                         ("bind", G, "clusterroles", "dev", "pod-reader"))
        results: list = []
        d.addBoth(results.append)
        self.assertEqual(results, [])
        answer.callback(Decision(ALLOW))
        self.assertEqual(results, [None])

    def test_bind_refused_later(self):
        obj = binding("b", "ClusterRole", "pod-reader", subject("User", "bob"), namespace="dev")
        d = self.check.check(self.attributes("CREATE", rbac_kinds.ROLE_BINDING, obj))
        self.later.asked[0][1].callback(Decision(NO_OPINION))
        failure = self.failureResultOf(d, errors.StatusError)
        self.assertEqual(str(failure.value.message), f'rolebindings.{G} "b" is forbidden: '
                         'user "jane" (groups=["system:authenticated"]) is attempting to grant '
                         'RBAC permissions not currently held:\n'
                         '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}')

    def test_authorizer_failure_is_a_no(self):
        obj = binding("b", "ClusterRole", "pod-reader", subject("User", "bob"), namespace="dev")
        d = self.check.check(self.attributes("CREATE", rbac_kinds.ROLE_BINDING, obj))
        self.later.asked[0][1].errback(RuntimeError("webhook down"))
        self.failureResultOf(d, errors.StatusError)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_escalate_asks_about_the_url(self):
        from platformd.requestinfo import parse
        obj = role("r", rule(["get"], [""], ["secrets"]), namespace="dev")
        a = self.attributes("CREATE", rbac_kinds.ROLE, obj)
        a.context.info = parse(b"POST", f"{RBAC}/namespaces/dev/roles", False)
        d = self.check.check(a)
        (asked, answer), = self.later.asked
        info = asked.info
        self.assertEqual((info.verb, info.group, info.resource, info.namespace, info.name),
                         ("escalate", G, "roles", "dev", ""))
        answer.callback(Decision(ALLOW))
        self.assertIsNone(self.successResultOf(d))

    def test_without_request_info_no_escalate_question(self):
        obj = role("r", rule(["get"], [""], ["pods"]), namespace="dev")
        self.caches.put(binding("jb", "ClusterRole", "pod-reader", subject("User", "jane")))
        self.assertIsNone(self.check.check(self.attributes("CREATE", rbac_kinds.ROLE, obj)))
        self.assertEqual(self.later.asked, [])

    def test_no_user(self):
        obj = role("r", rule(["get"], [""], ["pods"]), namespace="dev")
        a = self.attributes("CREATE", rbac_kinds.ROLE, obj)
        a.context.user = None
        with self.assertRaises(errors.StatusError) as caught:
            self.check.check(a)
        self.assertEqual(caught.exception.message,
                         f'roles.{G} "r" is forbidden: no user on context')

    def test_gc_fields_only(self):
        old = role("r", rule(["*"], ["*"], ["*"]), namespace="dev")
        new = role("r", rule(["*"], ["*"], ["*"]), namespace="dev")
        new["metadata"]["finalizers"] = ["x"]
        new["metadata"]["ownerReferences"] = [{"name": "o"}]
        self.assertTrue(only_gc_fields(new, old))
        self.assertIsNone(self.check.check(self.attributes("UPDATE", rbac_kinds.ROLE, new,
                                                               old)))
        new["metadata"]["labels"] = {"a": "b"}
        self.assertFalse(only_gc_fields(new, old))
        old["metadata"]["labels"] = {}
        new["metadata"]["labels"] = {}
        self.assertTrue(only_gc_fields(new, old))
        self.assertFalse(only_gc_fields(new, None))

    def test_message(self):
        self.assertEqual(escalation_message(user("a", "x"), [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
            ["e1", "e2"]),
            'user "a" (groups=["x" "system:authenticated"]) is attempting to grant RBAC '
            'permissions not currently held:\n'
            '{APIGroups:[""], Resources:["pods"], Verbs:["list" "get"]}; '
            'resolution errors: [[e1, e2]]')
