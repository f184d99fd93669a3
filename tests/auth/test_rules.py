"""
Rule evaluation (platformd/auth/rbac/rules.py), one rule against one request, from
upstream's ``RuleAllows`` and ``evaluation_helpers.go``.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd.auth.rbac.rules import allows, compile_rule, rules_allow

from tests.auth.fixtures import path, resource, rule

PODS = resource("get", "pods", namespace="ns", name="p")

#: (what, rule, request, allowed)
TABLE = [
    ("exact verb, group, resource", rule(["get"], [""], ["pods"]), PODS, True),
    ("other verb", rule(["list"], [""], ["pods"]), PODS, False),
    ("verb *", rule(["*"], [""], ["pods"]), PODS, True),
    ("other group", rule(["get"], ["apps"], ["pods"]), PODS, False),
    ("group *", rule(["get"], ["*"], ["pods"]), PODS, True),
    ("other resource", rule(["get"], [""], ["services"]), PODS, False),
    ("resource *", rule(["get"], [""], ["*"]), PODS, True),
    ("no apiGroups", {"verbs": ["get"], "resources": ["pods"]}, PODS, False),
    ("group of a named group", rule(["patch"], ["apps"], ["deployments"]),
     resource("patch", "deployments", "apps", "ns", "d"), True),
    ("resource alone does not allow its subresource", rule(["get"], [""], ["pods"]),
     resource("get", "pods", name="p", subresource="log"), False),
    ("resource/subresource", rule(["get"], [""], ["pods/log"]),
     resource("get", "pods", name="p", subresource="log"), True),
    ("resource/subresource does not allow the resource", rule(["get"], [""], ["pods/log"]),
     PODS, False),
    ("*/subresource", rule(["update"], ["*"], ["*/status"]),
     resource("update", "deployments", "apps", "ns", "d", "status"), True),
    ("*/subresource, other subresource", rule(["update"], ["*"], ["*/status"]),
     resource("update", "pods", name="p", subresource="scale"), False),
    ("*/subresource does not allow the resource", rule(["update"], ["*"], ["*/status"]),
     resource("update", "pods", name="p"), False),
    ("* allows every subresource", rule(["get"], [""], ["*"]),
     resource("get", "pods", name="p", subresource="log"), True),
    # Upstream has no "resource/*": it is matched literally.
    ("pods/* is no wildcard", rule(["get"], [""], ["pods/*"]),
     resource("get", "pods", name="p", subresource="log"), False),
    ("resourceNames, named", rule(["get"], [""], ["pods"], names=["p"]), PODS, True),
    ("resourceNames, other name", rule(["get"], [""], ["pods"], names=["q"]), PODS, False),
    ("resourceNames never allow a list", rule(["list"], [""], ["pods"], names=["p"]),
     resource("list", "pods", namespace="ns"), False),
    ("resourceNames never allow a create", rule(["create"], [""], ["pods"], names=["p"]),
     resource("create", "pods", namespace="ns"), False),
    ("resourceNames allow a list narrowed to the name",
     rule(["list"], [""], ["pods"], names=["p"]),
     resource("list", "pods", namespace="ns", name="p"), True),
    ("resource rule, non-resource request", rule(["get"], ["*"], ["*"]),
     path("get", "/healthz"), False),
    ("URL exact", rule(["get"], urls=["/healthz"]), path("get", "/healthz"), True),
    ("URL other", rule(["get"], urls=["/healthz"]), path("get", "/livez"), False),
    ("URL *", rule(["get"], urls=["*"]), path("get", "/anything/at/all"), True),
    ("URL trailing *", rule(["get"], urls=["/logs/*"]), path("get", "/logs/a/b"), True),
    ("URL trailing * needs the prefix", rule(["get"], urls=["/logs/*"]),
     path("get", "/logs"), False),
    ("URL prefix*", rule(["get"], urls=["/healthz*"]), path("get", "/healthz/etcd"), True),
    ("URL other verb", rule(["get"], urls=["/healthz"]), path("post", "/healthz"), False),
    ("URL verb *", rule(["*"], urls=["/healthz"]), path("post", "/healthz"), True),
    ("URL rule, resource request", rule(["*"], urls=["*"]), PODS, False),
]


class RuleAllowsTests(SynchronousTestCase):
    def test_table(self):
        for what, source, info, expected in TABLE:
            self.assertEqual(allows(compile_rule(source), info), expected, what)

    def test_rules_allow_any(self):
        rules = [compile_rule(rule(["list"], [""], ["pods"])),
                 compile_rule(rule(["get"], [""], ["pods"]))]
        self.assertTrue(rules_allow(rules, PODS))
        self.assertFalse(rules_allow(rules[:1], PODS))
        self.assertFalse(rules_allow([], PODS))
