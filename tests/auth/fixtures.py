"""
RBAC objects for tests, and ``FakeKindCache``: a ``KindCache`` look-alike (``objects``,
``listeners``) that tells its listeners of each change as the watch cache does.
"""

from __future__ import annotations

import orjson

from platformd.auth.interfaces import AUTHENTICATED_GROUP, Attributes, UserInfo
from platformd.auth.rbac.index import RBACIndex
from platformd.cache.watchcache import ADDED, DELETED, MODIFIED, CachedObject
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


class FakeKindCache:
    def __init__(self, plural: str):
        self.plural = plural
        self.objects: dict = {}
        self.listeners: list = []

    def key(self, namespace, name) -> str:
        prefix = f"/registry/{self.plural}.{GROUP}/"
        return f"{prefix}{namespace}/{name}" if namespace else prefix + name

    def tell(self, *args):
        for listener in list(self.listeners):
            listener(*args)


class FakeCaches:
    """The four RBAC kinds' caches, with a revision counter; ``put``/``delete`` objects."""

    def __init__(self):
        self.kinds = {plural: FakeKindCache(plural) for plural in _PLURALS.values()}
        self.revision = 0

    def index(self) -> RBACIndex:
        k = self.kinds
        return RBACIndex(k["roles"], k["clusterroles"], k["rolebindings"],
                         k["clusterrolebindings"])

    def put(self, *objs) -> None:
        for obj in objs:
            cache = self.kinds[_PLURALS[obj["kind"]]]
            meta = obj["metadata"]
            key = cache.key(meta.get("namespace"), meta["name"])
            self.revision += 1
            new = CachedObject(key, orjson.dumps(obj), self.revision, self.revision)
            old = cache.objects.get(key)
            cache.objects[key] = new
            cache.tell(ADDED if old is None else MODIFIED, new, old, self.revision)

    def delete(self, kind, name, namespace=None) -> None:
        cache = self.kinds[_PLURALS[kind]]
        old = cache.objects.pop(cache.key(namespace, name))
        self.revision += 1
        cache.tell(DELETED, None, old, self.revision)
