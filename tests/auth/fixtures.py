"""
RBAC objects for tests, and ``FakeCaches``: the four RBAC kinds' ``FakeInformer``s.
"""

from __future__ import annotations

from platformd.auth.interfaces import AUTHENTICATED_GROUP, Attributes, UserInfo
from platformd.auth.rbac.index import RBACIndex
from platformd.cache.informers import FakeInformer
from platformd.requestinfo import RequestInfo

GROUP = "rbac.authorization.platform.io"


def rule(verbs, groups=("",), resources=(), names=(), urls=()) -> dict:
    out = {"verbs": list(verbs)}
    if urls:
        out["nonResourceURLs"] = list(urls)
    else:
        out["apiGroups"] = list(groups)
        out["resources"] = list(resources)
    if names:
        out["resourceNames"] = list(names)
    return out


def role(name, *rules, namespace=None, **extra) -> dict:
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"kind": "ClusterRole" if namespace is None else "Role",
            "apiVersion": f"{GROUP}/v1", "metadata": meta, "rules": list(rules), **extra}


def subject(kind, name, namespace=None) -> dict:
    out = {"kind": kind, "name": name}
    if kind != "ServiceAccount":
        out["apiGroup"] = GROUP
    if namespace is not None:
        out["namespace"] = namespace
    return out


def binding(name, role_kind, role_name, *subjects, namespace=None) -> dict:
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"kind": "ClusterRoleBinding" if namespace is None else "RoleBinding",
            "apiVersion": f"{GROUP}/v1", "metadata": meta,
            "roleRef": {"apiGroup": GROUP, "kind": role_kind, "name": role_name},
            "subjects": list(subjects)}


def user(name, *groups, authenticated=True) -> UserInfo:
    return UserInfo(name, "", tuple(groups) + ((AUTHENTICATED_GROUP,) if authenticated else ()))


def resource(verb, resource_, group="", namespace="", name="", subresource="") -> RequestInfo:
    return RequestInfo(True, "", verb, "apis" if group else "api", group, "v1", resource_,
                       subresource, namespace, name, not name)


def path(verb, path_) -> RequestInfo:
    return RequestInfo(False, path_, verb)


def ask(authorizer, who, info):
    return authorizer.authorize(Attributes(who, info))


_PLURALS = {"Role": "roles", "ClusterRole": "clusterroles", "RoleBinding": "rolebindings",
            "ClusterRoleBinding": "clusterrolebindings"}


class FakeCaches:
    """The four RBAC kinds' informers (``FakeInformer``); ``put``/``delete`` objects."""

    def __init__(self):
        self.kinds = {plural: FakeInformer(resource=f"{plural}.{GROUP}")
                      for plural in _PLURALS.values()}

    def index(self) -> RBACIndex:
        k = self.kinds
        return RBACIndex(k["roles"], k["clusterroles"], k["rolebindings"],
                         k["clusterrolebindings"])

    def put(self, *objs) -> None:
        for obj in objs:
            self.kinds[_PLURALS[obj["kind"]]].put(obj)

    def delete(self, kind, name, namespace=None) -> None:
        self.kinds[_PLURALS[kind]].delete(namespace, name)
