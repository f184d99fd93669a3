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

Numbers past what 64 bits hold come wherever a number is read: integers of thousands of
digits, past int64 and uint64, and floats past float64 in bodies (JSON, YAML, CBOR),
JSON patch paths and values, query parameters, continue tokens and a bearer token's
time claims (Python refuses ``int()`` of more than 4,300 digits: such bugs show as 500s).
"""

from __future__ import annotations

import base64
import json
import random
import re

import attrs
import cbor2
import yaml

from platformd.codecs.protobufcodec import ProtobufCodec
from platformd.registry.catalog import builtin


@attrs.frozen
class Number:
    """A number written as ``text`` in JSON and YAML (neither ``json.dumps`` nor ``str``
    writes an int of 5,000 digits) and as ``value`` in CBOR (a bignum, an infinity)."""

    text: str
    value: object


def nines(count: int, negative: bool = False) -> Number:
    """The integer of ``count`` nines, computed without a decimal conversion."""
    value = 10 ** count - 1
    return Number(("-" if negative else "") + "9" * count, -value if negative else value)


#: 5,000 digits: past Python's int-string limit (4,300).
LONG = "9" * 5000
BIG_NUMBERS = (nines(5000), nines(5000, True), nines(20), Number(str(2 ** 63), 2 ** 63),
               Number(str(2 ** 64), 2 ** 64), Number(str(-2 ** 63 - 1), -2 ** 63 - 1),
               Number("1e400", float("inf")), Number("-1e400", float("-inf")),
               Number("1e308", 1e308), Number("4e-400", 0.0), Number("1e19", 1e19),
               Number("2147483648", 2 ** 31), Number("1.5", 1.5))


def _token(payload: str) -> str:
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


#: Continue tokens whose numbers are past int64 (or not integers).
BIG_TOKENS = tuple(_token('{"v":"meta.platform.io/v1","rv":%s,"start":"a","t":%s}' % pair)
                   for pair in ((LONG, "1"), ("99999999999999999999", "1"), ("1.5", "1"),
                                ("2", LONG), ("-" + LONG, "1e400")))
#: Bearer tokens (unsigned) whose time claims are past int64 and float64.
_JWT_HEADER = _token('{"alg":"RS256","kid":"k"}')
BIG_JWTS = tuple(f"{_JWT_HEADER}.{_token(claims)}.c2ln" for claims in (
    '{"iss":"https://platform.default.svc","exp":%s,"iat":%s,"nbf":-%s}' % (LONG, LONG, LONG),
    '{"iss":"x","exp":1e400,"nbf":99999999999999999999}'))


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
    "resourceVersion": ("", "0", "-1", "abc", "99999999999999999999", "1e3", "\xff", LONG),
    "resourceVersionMatch": ("Exact", "NotOlderThan", "Sometimes", ""),
    "limit": ("-5", "0", "1", "abc", "99999999999999999999", LONG, "-" + LONG, "", "+1",
              "1_0", "9223372036854775807"),
    "continue": ("garbage", "eyJ2IjoibWV0YSJ9", "%%%", "") + BIG_TOKENS,
    "timeoutSeconds": ("-1", "x", "1", LONG, "", "9223372036854775807"),
    "timeout": ("1s", "x", LONG + "s", "9999999999h", "-" + LONG),
    "labelSelector": ("a=", "a in (", "!!", "a=b,c!=d", "x" * 300, "a=b=c"),
    "fieldSelector": ("metadata.name=", "spec.x=1", "=", "metadata.name==a,b"),
    "dryRun": ("All", "Some", ""),
    "fieldValidation": ("Strict", "Warn", "Ignore", "Loud"),
    "fieldManager": ("m", "\x01", "x" * 200),
    "propagationPolicy": ("Orphan", "Sideways", "Foreground"),
    "orphanDependents": ("true", "maybe"),
    "gracePeriodSeconds": ("-1", "x", LONG, "9223372036854775807", "-" + LONG),
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


NASTY = (None, [], {}, [None], {"": None}, 123456789012345678901234567890, -1, 1.5,
          1e308, True, "", "\ud800", "x" * 10000, [[[[[]]]]], {"$patch": "delete"},
          "a" * 254, "-", "UPPER", 0, LONG) + BIG_NUMBERS


def mutate(rng: random.Random, value):
    """``value`` with one nested field (or the whole) replaced by something nasty."""
    if not isinstance(value, (dict, list)) or not value or rng.random() < 0.2:
        return rng.choice(NASTY)
    if isinstance(value, dict):
        key = rng.choice(list(value) + ["unknownField"])
        out = dict(value)
        out[key] = mutate(rng, value.get(key))
        return out
    index = rng.randrange(len(value))
    out = list(value)
    out[index] = mutate(rng, value[index])
    return out


def _deep(depth: int, content_type: str) -> bytes:
    """Arrays nested ``depth`` deep, written directly (encoders recurse per level)."""
    if content_type.startswith("application/cbor"):
        return b"\x81" * depth + b"\x61x"
    return b"[" * depth + b'"x"' + b"]" * depth  # JSON, and YAML's flow style


def _swap_numbers(value, swap):
    """``value`` with each ``Number`` replaced by ``swap(number)``."""
    if isinstance(value, Number):
        return swap(value)
    if isinstance(value, dict):
        return {k: _swap_numbers(v, swap) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap_numbers(v, swap) for v in value]
    return value


def _with_numbers(dump, value) -> str:
    """``dump`` (JSON or YAML) of ``value``, each ``Number`` written as its text: dumped as
    a placeholder word, then the word (and JSON's quotes around it) replaced."""
    texts = []

    def placeholder(number):
        texts.append(number.text)
        return f"zznumber{len(texts) - 1}zz"
    out = dump(_swap_numbers(value, placeholder))
    return re.sub(r'"?zznumber(\d+)zz"?', lambda m: texts[int(m.group(1))], out)


def encode(rng: random.Random, value, content_type: str) -> bytes:
    media = content_type.split(";")[0].strip()
    if "yaml" in media:
        return _with_numbers(yaml.safe_dump, value).encode("utf-8", "surrogatepass")
    if media == "application/cbor":
        try:
            return cbor2.dumps(_swap_numbers(value, lambda number: number.value))
        except (ValueError, TypeError, UnicodeEncodeError):
            return b"\xa1\x61"
    if media == "application/vnd.platform.protobuf":
        try:
            return _protobuf.encode(value)
        except Exception:  # noqa: BLE001 - any unencodable value: send garbage instead
            return b"k8s\x00\x0a\x03abc"
    ascii_only = rng.random() < 0.5
    text = _with_numbers(lambda v: json.dumps(v, ensure_ascii=ascii_only), value)
    if "utf-16" in content_type:
        return text.encode("utf-16", "surrogatepass")
    return text.encode("utf-8", "surrogatepass")


#: JSON patch paths whose array index or key is a long number.
PATCH_PATHS = ("/metadata/name", "/x/y", "", "/~2", "/metadata/finalizers/" + LONG,
               "/metadata/finalizers/99999999999999999999", "/metadata/finalizers/-1",
               "/metadata/finalizers/01", "/metadata/finalizers/-", "/metadata/labels/" + LONG,
               "/subjects/9223372036854775808/name")


def json_patch(rng: random.Random) -> list:
    """A JSON patch of one or two operations, their paths, indices and values hostile."""
    operations = []
    for _ in range(rng.randrange(1, 3)):
        operation = {"op": rng.choice(("add", "test", "remove", "replace", "move", "copy",
                                       "x", rng.choice(BIG_NUMBERS))),
                     "path": rng.choice(PATCH_PATHS + (rng.choice(BIG_NUMBERS),))}
        if rng.random() < 0.5:
            operation["value"] = rng.choice(NASTY + ("v", ["x.io/f"]))
        if rng.random() < 0.3:
            operation["from"] = rng.choice(PATCH_PATHS)
        operations.append(operation)
    return operations


def _body(rng: random.Random, kind, content_type: str) -> bytes:
    """Garbage, deep nesting, a JSON patch (mostly, under its media type), or the kind's
    sample mutated up to three times: a quarter go whole, so that objects exist for the
    updates, patches and deletes that follow to work on."""
    roll = rng.random()
    if roll < 0.15:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    if roll < 0.2:
        return _deep(rng.choice((50, 150, 5000)), content_type)
    if roll < 0.25 or content_type == "application/json-patch+json" and roll < 0.8:
        return encode(rng, json_patch(rng), content_type)
    value = _sample(kind)
    for _ in range(rng.randrange(0, 4)):
        value = mutate(rng, value)
    return encode(rng, value, content_type)


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
        if rng.random() < 0.02:
            headers["Authorization"] = "Bearer " + rng.choice(BIG_JWTS)
        body = None
        if method in ("POST", "PUT", "PATCH", "DELETE") and rng.random() < 0.9:
            content_type = rng.choice(BODY_TYPES)
            headers["Content-Type"] = content_type
            body = _body(rng, kind, content_type)
        yield FuzzRequest(method, path, {k: v for k, v in headers.items() if v}, body)
