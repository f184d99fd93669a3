"""
Random CustomResourceDefinitions and custom objects for the fuzzer (issue 31, "Bad
input"), shared by the suite's bounded run (``test_crdfuzz.py``) and ``bench/fuzz.py``.

``definition(rng, index)`` draws a whole definition: names (good, or bad in one of the
ways upstream refuses), scope, one to three versions (served or not, none, one or two
marked storage), each with a schema from ``schemas.schema``, subresources (status; scale
with good or bad paths), printer columns (bad JSONPaths, types, formats), selectable
fields, deprecation, and a conversion strategy (None, Webhook with a good or broken
client configuration, nonsense).  ``changes(rng, crd)`` are updates of an accepted one:
its stored version removed or unserved, a second storage version, the storage version
moved, a schema replaced, ``status.storedVersions`` emptied.

``objects(rng, crd, count)`` are requests for the custom objects of an accepted
definition: creates, updates, merge and JSON patches, applies, status and scale
writes and reads, in JSON, YAML and CBOR, with ``fieldValidation`` and ``dryRun``, of a
plausible object (``schemas.value``) mutated: wrong types, nulls, huge numbers, deep
nesting, a string of 2 MiB, int-or-string edge values, an embedded resource with bad
metadata, duplicate keys in a list, unknown fields.  The first is a plain create, so
that the updates after it exercise transition rules and ratcheting.
"""

from __future__ import annotations

import json
import random

import cbor2

from tests.fuzz import schemas
from tests.fuzz import requests
from tests.fuzz.requests import BIG_NUMBERS, NASTY, FuzzRequest, json_patch, mutate

CRDS = "/apis/apiextensions.platform.io/v1/customresourcedefinitions"
GROUP = "fuzz.example.com"
BAD_GROUPS = ("nodot", "Fuzz.Example.com", "x.platform.io", "", "a" * 254 + ".com",
              "-x.com")
BAD_NAMES = ("Things", "", "a.b", "x" * 70, "thing s", "-x", "\u00fc")
SCALE_PATHS = (".spec.replicas", ".status.replicas", ".spec.selector", "spec.replicas",
               ".metadata.name", ".spec[0]", ".spec.replicas.x.y", "", ".status..x",
               ".spec.nope")
COLUMN_PATHS = (".spec.replicas", ".metadata.name", "{.spec}", ".spec[", "spec", "",
                ".spec.a.b.c", ".status['x']", ".spec.list[*].a", "$..x")
VERSION_NAMES = ("v1", "v2", "v1beta1", "v1alpha1", "V1", "1", "v1", "x" * 70)
MEDIA = ("application/json", "application/json", "application/yaml", "application/cbor")


def _version(rng: random.Random, name: str, wild: bool) -> dict:
    """A version; unless ``wild``, one whose fields upstream accepts, mostly."""
    version: dict = {"name": name, "served": not wild or rng.random() < 0.9,
                     "storage": False}
    if not wild or rng.random() < 0.97:
        version["schema"] = {"openAPIV3Schema": schemas.schema(rng, wild)}
    subresources: dict = {}
    if rng.random() < 0.6:
        subresources["status"] = rng.choice(({}, {}, {"x": 1}))
    if rng.random() < 0.4:
        good = not wild or rng.random() < 0.5
        scale = {"specReplicasPath": SCALE_PATHS[0] if good else rng.choice(SCALE_PATHS),
                 "statusReplicasPath": SCALE_PATHS[1] if good else rng.choice(SCALE_PATHS)}
        if rng.random() < 0.5:
            scale["labelSelectorPath"] = SCALE_PATHS[2] if good else rng.choice(SCALE_PATHS)
        subresources["scale"] = scale
    if subresources:
        version["subresources"] = subresources
    if rng.random() < 0.3:
        version["additionalPrinterColumns"] = [
            {"name": rng.choice(("Replicas", "Name", "", "x" * 100)[:2 + 2 * wild]),
             "type": rng.choice(("integer", "string", "date", "number", "boolean", "float")
                                [:5 + wild]),
             "jsonPath": rng.choice(COLUMN_PATHS if wild else COLUMN_PATHS[:2]),
             **({"format": rng.choice(("int32", "byte", "nope"))}
                if wild and rng.random() < 0.2 else {}),
             **({"priority": rng.choice((0, 1, -1))} if rng.random() < 0.2 else {})}
            for _ in range(rng.randrange(1, 4))]
    if wild and rng.random() < 0.1:
        version["selectableFields"] = [{"jsonPath": rng.choice(COLUMN_PATHS)}
                                       for _ in range(rng.randrange(1, 3))]
    if rng.random() < 0.05:
        version["deprecated"] = True
        version["deprecationWarning"] = rng.choice(("old", "x" * 300, "\x01"))
    return version


def _conversion(rng: random.Random, wild: bool):
    roll = rng.random()
    if roll < 0.8 or not wild:
        return None
    if roll < 0.95:
        config = rng.choice(({"url": "https://127.0.0.1:1/convert"}, {"url": "http://x"},
                             {"url": "https://x?q=1"}, {"service": {"name": "s"}},
                             {"service": {"name": "s", "namespace": "default",
                                          "port": 99999}}, {}))
        webhook = {"clientConfig": config,
                   "conversionReviewVersions": rng.choice((["v1"], ["v9"], [], ["v1", "v1"]))}
        return {"strategy": "Webhook", "webhook": webhook}
    return rng.choice(({"strategy": "Nope"}, {"strategy": "None", "webhook": {}}))


def definition(rng: random.Random, index: int) -> dict:
    """A random definition: "wild" ones (two in five) with anything, the others
    with what upstream accepts but for the rules and regexes in their schemas, so that
    most are served and their objects fuzzed."""
    wild = rng.random() < 0.4
    plural, kind = f"things{index}", f"Thing{index}"
    group = GROUP if not wild or rng.random() < 0.8 else rng.choice(BAD_GROUPS)
    names: dict = {"plural": plural, "singular": f"thing{index}", "kind": kind}
    if wild and rng.random() < 0.2:
        names[rng.choice(("plural", "singular", "kind", "listKind"))] = rng.choice(BAD_NAMES)
    if rng.random() < 0.1:
        names["shortNames"] = rng.sample((f"t{index}", "Bad", "", f"t{index}"),
                                         rng.randrange(1, 3)) if wild else [f"t{index}"]
    if wild and rng.random() < 0.1:
        names["listKind"] = kind
    versions = [_version(rng, name, wild) for name in
                rng.sample(VERSION_NAMES[:4], rng.randrange(1, 4))]
    if wild and rng.random() < 0.1:
        versions.append(_version(rng, rng.choice(VERSION_NAMES), wild))
    storage = rng.random()
    if storage < 0.9 or not wild:
        versions[0]["storage"] = versions[0]["served"] = True
    elif storage < 0.95:
        for version in versions:
            version["storage"] = True
    crd: dict = {"apiVersion": "apiextensions.platform.io/v1",
                 "kind": "CustomResourceDefinition",
                 "metadata": {"name": f"{names['plural']}.{group}"},
                 "spec": {"group": group, "names": names, "versions": versions,
                          "scope": rng.choice(("Namespaced", "Cluster", "Global")[:2 + wild])}}
    conversion = _conversion(rng, wild)
    if conversion is not None:
        crd["spec"]["conversion"] = conversion
    if wild and rng.random() < 0.05:
        crd["spec"]["preserveUnknownFields"] = True
    if wild and rng.random() < 0.05:
        crd["metadata"]["name"] = "other." + GROUP
    return crd


def changes(rng: random.Random, crd: dict) -> list:
    """One or two changed copies of ``crd`` (as read back) to PUT."""
    out = []
    for _ in range(rng.randrange(1, 3)):
        changed = json.loads(json.dumps(crd))  # deepcopy recurses in Python
        spec = changed["spec"]
        versions = spec["versions"]
        roll = rng.random()
        stored = [v for v in versions if v["storage"]]
        if roll < 0.25 and stored:
            versions.remove(stored[0])  # a version removed while stored
            if versions:
                versions[0]["storage"] = True
        elif roll < 0.4:
            for version in versions:
                version["storage"] = True
        elif roll < 0.55:
            versions.append(_version(rng, rng.choice(VERSION_NAMES[:4]), rng.random() < 0.3))
            for version in versions:
                version["storage"] = version is versions[-1]
            versions[-1]["served"] = True
        elif roll < 0.7:
            version = rng.choice(versions)
            version["schema"] = {"openAPIV3Schema": schemas.schema(rng, rng.random() < 0.3)}
        elif roll < 0.8:
            for version in versions:
                version["served"] = False
        elif roll < 0.9:
            spec["scope"] = "Cluster" if spec["scope"] == "Namespaced" else "Namespaced"
        else:
            changed.setdefault("status", {})["storedVersions"] = rng.choice(
                ([], ["v9"], ["v1", "v1"]))
        out.append(changed)
    return out


def encode(rng: random.Random, value, media: str) -> bytes:
    """``requests.encode``; JSON (which YAML reads too) for a large YAML body (PyYAML's
    emitter takes seconds over megabytes), and JSON or CBOR written by the C encoders
    for a value nested deeper than ``requests.encode`` recurses."""
    def number(n):
        return n.text  # a requests.Number (as a string where it cannot be written whole)

    try:
        if "yaml" in media and len(json.dumps(value, default=number)) > 100_000:
            return json.dumps(value, default=number).encode()
        return requests.encode(rng, value, media)
    except RecursionError:
        if media == "application/cbor":
            return cbor2.dumps(value, default=lambda encoder, n: encoder.encode(n.value))
        return json.dumps(value, default=number).encode()


def _collection(crd: dict, version: str) -> str:
    spec = crd["spec"]
    base = f"/apis/{spec['group']}/{version}"
    if spec["scope"] == "Namespaced":
        base += "/namespaces/default"
    return f"{base}/{spec['names']['plural']}"


def _nested(depth: int) -> dict:
    """Maps nested ``depth`` levels, built without recursion."""
    out: dict = {}
    for _ in range(depth):
        out = {"a": out}
    return out


def _hostile(rng: random.Random, value):
    """``value`` made hostile (``_anywhere``), mostly below its ``spec`` or ``status``
    only, so that the schema's validation (not the kind and apiVersion checks before
    it) meets what is wrong."""
    inner = [key for key in ("spec", "status") if isinstance(value, dict) and key in value]
    if inner and rng.random() < 0.7:
        key = rng.choice(inner)
        return {**value, key: _anywhere(rng, value[key])}
    return _anywhere(rng, value)


def _anywhere(rng: random.Random, value):
    """``value`` mutated by the requests fuzzer's mutations, or with one of the custom
    resources' own hostile values put at a random place."""
    roll = rng.random()
    if roll < 0.6:
        for _ in range(rng.randrange(1, 4)):
            value = mutate(rng, value)
        return value
    special = rng.choice((
        "x" * (2 << 20), _nested(rng.choice((40, 90, 120, 300))), [{"a": "x"}, {"a": "x"}],
        ["s", "s"],
        {"apiVersion": 1, "kind": "", "metadata": {"name": "BAD_", "generateName": 5,
                                                   "labels": {"": "x"}, "uid": []}},
        {"apiVersion": "v1", "kind": "K", "metadata": "x"}, 2 ** 63, -2 ** 63 - 1, "50%",
        "2147483648", "-0", "1e3", 1.0, {"unknownField": 1},
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxx"))

    def put(target, depth=0):
        if not isinstance(target, dict) or not target or depth > 8 or rng.random() < 0.3:
            return special
        key = rng.choice(list(target))
        out = dict(target)
        out[key] = put(target[key], depth + 1)
        return out
    return put(value, 0)


def sample(rng: random.Random, crd: dict, version: dict) -> dict:
    """A plausible object of ``version``: its schema's spec and status."""
    root = version.get("schema", {}).get("openAPIV3Schema", {})
    props = root.get("properties", {}) if isinstance(root, dict) else {}
    obj = {"apiVersion": f"{crd['spec']['group']}/{version['name']}",
           "kind": crd["spec"]["names"]["kind"], "metadata": {"name": "fuzzed"}}
    for name in ("spec", "status"):
        if name in props:
            obj[name] = schemas.value(rng, props[name])
    return obj


def _scale_body(rng: random.Random) -> dict:
    return {"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "fuzzed", "namespace": "default"},
            "spec": {"replicas": rng.choice((1, 0, -1, 2 ** 31, 2 ** 63, "2", None, 1.5))}}


def objects(rng: random.Random, crd: dict, count: int):
    """``count`` FuzzRequests for the objects of ``crd`` (an accepted definition)."""
    served = [v for v in crd["spec"]["versions"] if v.get("served")]
    if not served:
        return
    for index in range(count):
        version = rng.choice(served)
        collection = _collection(crd, version["name"])
        item = f"{collection}/fuzzed"
        body = sample(rng, crd, version)
        query = []
        if rng.random() < 0.5:
            query.append("fieldValidation=" + rng.choice(("Strict", "Warn", "Ignore")))
        if rng.random() < 0.1:
            query.append("dryRun=All")
        media = rng.choice(MEDIA)
        roll = rng.random() if index else 0.0
        if roll < 0.3:
            method, path = "POST", collection
            body = _hostile(rng, body) if index else body
        elif roll < 0.5:
            method, path, body = "PUT", item, _hostile(rng, body)
        elif roll < 0.58:
            method, path, media = "PATCH", item, "application/merge-patch+json"
            body = _hostile(rng, {k: v for k, v in body.items() if k in ("spec", "metadata")})
        elif roll < 0.64:
            method, path, media = "PATCH", item, "application/json-patch+json"
            body = rng.choice((json_patch(rng), [{"op": "replace", "path": "/spec",
                                                  "value": _hostile(rng, body.get("spec"))}],
                               [{"op": "add", "path": "/spec/replicas",
                                 "value": rng.choice(NASTY + BIG_NUMBERS)}]))
        elif roll < 0.72:
            method, path, media = "PATCH", item, "application/apply-patch+yaml"
            query.append("fieldManager=fuzz")
            if rng.random() < 0.3:
                query.append("force=true")
            body = _hostile(rng, body)
        elif roll < 0.84:
            method, path = rng.choice(("PUT", "PATCH")), item + "/status"
            if method == "PATCH":
                media = "application/merge-patch+json"
            body = _hostile(rng, body)
        elif roll < 0.94:
            method, path = rng.choice(("GET", "PUT", "PATCH")), item + "/scale"
            body = _scale_body(rng)
            if method == "PATCH":
                media = "application/merge-patch+json"
                body = {"spec": body["spec"]}
        else:
            method, path, body = rng.choice((("GET", item, None), ("GET", collection, None),
                                             ("DELETE", item, None)))
        if query:
            path += "?" + "&".join(query)
        headers = {"Accept": rng.choice(("application/json", "application/yaml",
                                         "application/cbor",
                                         "application/json;as=Table;g=meta.platform.io;v=v1"))}
        payload = None
        if body is not None:
            headers["Content-Type"] = media
            payload = encode(rng, body, media)
        yield FuzzRequest(method, path, headers, payload)


def create(rng: random.Random, crd: dict) -> FuzzRequest:
    """The request creating ``crd``, in JSON, YAML or CBOR."""
    media = rng.choice(("application/json", "application/json", "application/yaml",
                        "application/cbor"))
    return FuzzRequest("POST", CRDS, {"Content-Type": media, "Accept": "application/json"},
                       encode(rng, crd, media))


def update(crd: dict) -> FuzzRequest:
    """The request replacing a definition by ``crd`` (its name from its metadata)."""
    return FuzzRequest("PUT", f"{CRDS}/{crd['metadata']['name']}",
                       {"Content-Type": "application/json", "Accept": "application/json"},
                       json.dumps(crd).encode())
