"""
From an HTTP method and path to *what* is being asked (spec 2.1): the verb, and the
group, version, resource, subresource, namespace and name it applies to.

This mirrors upstream's ``RequestInfoFactory``: authorization, admission and the
handlers all work from this one reading of the URL, so they cannot disagree.
"""

from __future__ import annotations

import attrs

#: Subresources of a namespace, reached as ``/api/v1/namespaces/{name}/{sub}``.
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})

#: Upstream's long-running requests (kube-apiserver's ``BasicLongRunningRequestCheck``):
#: these verbs, these subresources of a resource.  The in-flight limit does not count them
#: and the request timeout does not end them.
LONG_RUNNING_VERBS = frozenset({"watch", "proxy"})
LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "proxy", "log", "portforward"})

_METHOD_VERBS = {b"POST": "create", b"PUT": "update", b"PATCH": "patch", b"DELETE": "delete",
                 b"GET": "get", b"HEAD": "get"}


@attrs.frozen
class RequestInfo:
    is_resource: bool
    path: str
    verb: str
    api_prefix: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    #: True when the path names a collection (no object name).
    collection: bool = False


def parse(method: bytes, path: str, watch: bool) -> RequestInfo:
    """
    Read ``path``.  ``watch`` says whether the query asks to watch (``watch=1|true``).
    Non-resource paths come back with ``is_resource=False`` and the lower-case method as
    verb, as upstream classifies them for authorization.
    """
    parts = [p for p in path.split("/") if p]
    verb = _METHOD_VERBS.get(method, method.decode("ascii", "replace").lower())
    if not parts or parts[0] not in ("api", "apis"):
        return RequestInfo(False, path, verb)
    prefix = parts[0]
    rest = parts[1:]
    if prefix == "api":
        group = ""
        if not rest:
            return RequestInfo(False, path, verb)
    else:
        if len(rest) < 2:
            return RequestInfo(False, path, verb)
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    if not rest:
        return RequestInfo(False, path, verb)

    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if len(rest) > 3:
        # Deeper paths name nothing; the router answers 404.
        subresource = "/".join(rest[2:])
    collection = not name
    if collection:
        if verb == "get":
            verb = "watch" if watch else "list"
        elif verb == "delete":
            verb = "deletecollection"
    elif verb == "get" and watch:
        verb = "watch"
    return RequestInfo(True, path, verb, prefix, group, version, resource, subresource,
                       namespace, name, collection)


def long_running(info: RequestInfo) -> bool:
    """Upstream's ``BasicLongRunningRequestCheck`` (with its ``/debug/pprof/`` paths)."""
    if info.verb in LONG_RUNNING_VERBS:
        return True
    if info.is_resource:
        return info.subresource in LONG_RUNNING_SUBRESOURCES
    return info.path.startswith("/debug/pprof/")
