"""
A seeded generator of hostile requests (issue 11.6), shared by the suite's bounded run
(``test_fuzz.py``) and the long run (``bench/fuzz.py``).

Each request is built from a ``random.Random(seed)``: a route (discovery, every kind's
collection, object and status paths, namespaced and cluster-wide, watch), a method
(every verb and some odd ones), query parameters with bad values, an Accept type, and a
body in one of the body encodings — a valid object mutated (wrong JSON types at a
field, huge, negative or float numbers, nulls in lists and maps, deep nesting, lone
surrogates, non-UTF-8 text) or plain garbage — with a Content-Type that may lie or
carry a charset.  The same seed always gives the same requests.
"""

from __future__ import annotations

import json
import random

import attrs
import cbor2
import yaml

from platformd.codecs.protobufcodec import ProtobufCodec
from platformd.registry.catalog import builtin

ACCEPTS = ("application/json", "application/yaml", "application/cbor",
           "application/vnd.platform.protobuf", "application/json;as=Table;g=meta.platform.io;v=v1",
           "application/json;as=PartialObjectMetadata;g=meta.platform.io;v=v1", "*/*",
           "text/html", "application/*", "")
BODY_TYPES = ("application/json", "application/yaml", "application/cbor",
              "application/vnd.platform.protobuf", "application/json-patch+json",
              "application/merge-patch+json", "application/strategic-merge-patch+json",
              "application/apply-patch+yaml", "application/json; charset=latin1",
              "application/json; charset=utf-16", "text/plain", "")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "TRACE", "FROB")
QUERY = {
    "resourceVersion": ("", "0", "-1", "abc", "99999999999999999999", "1e3", "\xff"),
    "resourceVersionMatch": ("Exact", "NotOlderThan", "Sometimes", ""),
    "limit": ("-5", "0", "1", "abc", "99999999999999999999"),
    "continue": ("garbage", "eyJ2IjoibWV0YSJ9", "%%%", ""),
    "timeoutSeconds": ("-1", "x", "1"),
    "labelSelector": ("a=", "a in (", "!!", "a=b,c!=d", "x" * 300, "a=b=c"),
    "fieldSelector": ("metadata.name=", "spec.x=1", "=", "metadata.name==a,b"),
    "dryRun": ("All", "Some", ""),
    "fieldValidation": ("Strict", "Warn", "Ignore", "Loud"),
    "fieldManager": ("m", "\x01", "x" * 200),
    "propagationPolicy": ("Orphan", "Sideways", "Foreground"),
    "orphanDependents": ("true", "maybe"),
    "gracePeriodSeconds": ("-1", "x"),
    "watch": ("1", "maybe"),
    "sendInitialEvents": ("true", "x"),
    "allowWatchBookmarks": ("1",),
    "pretty": ("true", "x"),
    "force": ("true",),
}
_protobuf = ProtobufCodec()


@attrs.frozen
class FuzzRequest:
    method: str
    path: str
    headers: dict
    body: bytes | None

    def describe(self) -> str:
        return f"{self.method} {self.path[:200]} {self.headers} body={self.body[:120]!r}" \
            if self.body is not None else f"{self.method} {self.path[:200]} {self.headers}"


def _paths(kind) -> list:
    base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    if kind.namespaced:
        collection = f"{base}/namespaces/default/{kind.plural}"
        paths = [f"{base}/{kind.plural}", collection, f"{collection}/fuzzed",
                 f"{base}/namespaces/nowhere/{kind.plural}/fuzzed"]
    else:
        collection = f"{base}/{kind.plural}"
        paths = [collection, f"{collection}/fuzzed"]
    return paths + [f"{paths[-1]}/status", f"{paths[-1]}/nonsense"]


ODD_PATHS = ("/", "/api", "/apis", "/apis/rbac.authorization.platform.io",
             "/apis/rbac.authorization.platform.io/v1", "/openapi/v2", "/openapi/v3",
             "/version", "/healthz", "/readyz", "/livez", "/api/v1/namespaces/%ff/configmaps",
             "/api/v1/%00/x",
             "/api/v1/namespaces/default/configmaps/" + "a" * 70000, "/apis/nope/v9/things",
             "/api/v1/namespaces/default/configmaps/a/b/c/d/e", "//api//v1", "/api/v1/..",
             "/api/v1/namespaces/default/configmaps/%2e%2e")


def _sample(kind) -> dict:
    """A plausible object of ``kind`` to mutate."""
    obj = {"apiVersion": kind.api_version, "kind": kind.kind,
           "metadata": {"name": "fuzzed", "labels": {"a": "b"}, "finalizers": ["x.io/f"]}}
    if kind.kind.endswith("RoleBinding"):
        obj["subjects"] = [{"kind": "User", "name": "jane"}]
        obj["roleRef"] = {"apiGroup": "rbac.authorization.platform.io", "kind": "ClusterRole",
                          "name": "view"}
    elif kind.kind.endswith("Role"):
        obj["rules"] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    elif kind.kind == "Pod":
        obj["spec"] = {"containers": [{"name": "c", "image": "i", "ports": [
            {"containerPort": 80}]}]}
    elif kind.kind in ("ConfigMap", "Secret"):
        obj["data"] = {"k": "dg=="}
    return obj


_NASTY = (None, [], {}, [None], {"": None}, 123456789012345678901234567890, -1, 1.5,
          1e308, True, "", "\ud800", "x" * 10000, [[[[[]]]]], {"$patch": "delete"},
          "a" * 254, "-", "UPPER", 0)


def _mutate(rng: random.Random, value):
    """``value`` with one nested field (or the whole) replaced by something nasty."""
    if not isinstance(value, (dict, list)) or not value or rng.random() < 0.2:
        return rng.choice(_NASTY)
    if isinstance(value, dict):
        key = rng.choice(list(value) + ["unknownField"])
        out = dict(value)
        out[key] = _mutate(rng, value.get(key))
        return out
    index = rng.randrange(len(value))
    out = list(value)
    out[index] = _mutate(rng, value[index])
    return out


def _deep(depth: int, content_type: str) -> bytes:
    """Arrays nested ``depth`` deep, written directly (encoders recurse per level)."""
    if content_type.startswith("application/cbor"):
        return b"\x81" * depth + b"\x61x"
    return b"[" * depth + b'"x"' + b"]" * depth  # JSON, and YAML's flow style


def _encode(rng: random.Random, value, content_type: str) -> bytes:
    media = content_type.split(";")[0].strip()
    if "yaml" in media:
        return yaml.safe_dump(value).encode("utf-8", "surrogatepass")
    if media == "application/cbor":
        try:
            return cbor2.dumps(value)
        except (ValueError, TypeError, UnicodeEncodeError):
            return b"\xa1\x61"
    if media == "application/vnd.platform.protobuf":
        try:
            return _protobuf.encode(value)
        except Exception:  # noqa: BLE001 - any unencodable value: send garbage instead
            return b"k8s\x00\x0a\x03abc"
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
    if "utf-16" in content_type:
        return text.encode("utf-16", "surrogatepass")
    return text.encode("utf-8", "surrogatepass")


def _body(rng: random.Random, kind, content_type: str) -> bytes:
    roll = rng.random()
    if roll < 0.15:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    if roll < 0.2:
        return _deep(rng.choice((50, 150, 5000)), content_type)
    if roll < 0.25:
        return _encode(rng, [{"op": rng.choice(("add", "test", "remove", "x")),
                              "path": rng.choice(("/metadata/name", "/x/y", "", "/~2"))}],
                       content_type)
    value = _sample(kind)
    for _ in range(rng.randrange(1, 4)):
        value = _mutate(rng, value)
    return _encode(rng, value, content_type)


def generate(seed: int, count: int, catalog=None):
    """``count`` FuzzRequests from ``seed``."""
    rng = random.Random(seed)
    kinds = list((catalog or builtin()).kinds)
    for _ in range(count):
        kind = rng.choice(kinds)
        path = rng.choice(_paths(kind) + [rng.choice(ODD_PATHS)])
        method = rng.choice(METHODS)
        params = rng.sample(sorted(QUERY), rng.randrange(0, 4))
        if params:
            path += "?" + "&".join(f"{p}={rng.choice(QUERY[p])}" for p in params)
        headers = {"Accept": rng.choice(ACCEPTS)}
        body = None
        if method in ("POST", "PUT", "PATCH", "DELETE") and rng.random() < 0.9:
            content_type = rng.choice(BODY_TYPES)
            headers["Content-Type"] = content_type
            body = _body(rng, kind, content_type)
        yield FuzzRequest(method, path, {k: v for k, v in headers.items() if v}, body)
