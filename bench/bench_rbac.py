"""
RBAC authorizer micro-benchmark (issue 13): the cost of one ``RBACAuthorizer.authorize()``
with 1,000 RoleBindings and 200 Roles loaded (50 namespaces, 4 Roles and 20 bindings
each, 3 subjects per binding) and 20 ClusterRoleBindings to other groups, for a
non-admin user holding one RoleBinding: an allowed request (the role's third rule
matches), a request in another namespace (no binding there) and a refused one in its
own namespace.  In process, no server; the index is fed as the watch cache feeds it.

    python bench/bench_rbac.py [--calls 200000]

Target: well under 10 us a call.  Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit

import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from platformd.auth.interfaces import AUTHENTICATED_GROUP, Attributes, UserInfo  # noqa: E402
from platformd.auth.rbac import RBACAuthorizer, RBACIndex  # noqa: E402
from platformd.cache.watchcache import CachedObject  # noqa: E402
from platformd.requestinfo import RequestInfo  # noqa: E402

GROUP = "rbac.authorization.platform.io"


class KindCache:
    """What the index reads of a watch cache's ``KindCache``."""

    def __init__(self, plural: str):
        self.plural = plural
        self.objects: dict = {}
        self.listeners: list = []

    def add(self, namespace, name, obj) -> None:
        prefix = f"/registry/{self.plural}.{GROUP}/"
        key = f"{prefix}{namespace}/{name}" if namespace else prefix + name
        self.objects[key] = CachedObject(key, orjson.dumps(obj), 1, 1)


def load() -> RBACIndex:
    roles, cluster_roles = KindCache("roles"), KindCache("clusterroles")
    bindings, cluster_bindings = KindCache("rolebindings"), KindCache("clusterrolebindings")
    user = 0
    for n in range(50):
        namespace = f"ns{n}"
        for r in range(4):
            roles.add(namespace, f"role{r}", {"rules": [
                {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},
                {"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments"]},
                {"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps"]},
            ]})
        for b in range(20):
            subjects = []
            for _ in range(3):
                subjects.append({"kind": "User", "apiGroup": GROUP, "name": f"user{user}"})
                user += 1
            bindings.add(namespace, f"binding{b}", {
                "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": f"role{b % 4}"},
                "subjects": subjects})
    for c in range(20):
        cluster_roles.add(None, f"cluster{c}", {"rules": [
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]})
        cluster_bindings.add(None, f"cluster{c}", {
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": f"cluster{c}"},
            "subjects": [{"kind": "Group", "apiGroup": GROUP, "name": f"admins{c}"}]})
    index = RBACIndex(roles, cluster_roles, bindings, cluster_bindings)
    index.start()
    assert len(index.bindings) == 1020 and len(index.roles) == 200
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    args = parser.parse_args()
    authorizer = RBACAuthorizer(load())
    # user1000 is in ns16/binding13 (role1).
    jane = UserInfo("user1000", "", ("developers", AUTHENTICATED_GROUP))
    cases = {
        "allowed (its namespace, third rule)": RequestInfo(
            True, "", "get", "api", "", "v1", "configmaps", "", "ns16", "app", False),
        "no opinion (another namespace)": RequestInfo(
            True, "", "get", "api", "", "v1", "configmaps", "", "ns3", "app", False),
        "no opinion (its namespace, no rule)": RequestInfo(
            True, "", "delete", "api", "", "v1", "secrets", "", "ns16", "s", False),
    }
    print("RBAC authorize(), 1,000 RoleBindings, 200 Roles, 20 ClusterRoleBindings")
    for what, info in cases.items():
        attributes = Attributes(jane, info)
        verdict = authorizer.authorize(attributes).verdict
        best = min(timeit.repeat(lambda: authorizer.authorize(attributes), number=args.calls,
                                 repeat=5))
        print(f"  {what:40} {verdict:9} {best / args.calls * 1e6:6.2f} us/call")


if __name__ == "__main__":
    main()
