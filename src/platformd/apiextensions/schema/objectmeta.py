"""
Embedded resources (``x-kubernetes-embedded-resource``): upstream's ``objectmeta.Validate``
(``pkg/apiserver/schema/objectmeta/validation.go``).  An embedded object needs a
string ``apiVersion`` (a group/version) and ``kind`` (mixed case, otherwise a DNS-1035
label); its ``metadata`` is validated as ObjectMeta with names as path segments (no name
is fine: upstream validates it as ``fakename``).  The resource root's own metadata is the
store's (``model/meta.py``), so ``validate`` checks only embedded objects below it.
"""

from __future__ import annotations

import attrs

from platformd.apiextensions.schema import causes
from platformd.apiextensions.schema.node import EMBEDDED, Node
from platformd.model import meta as _meta

_DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
    "with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',"
    "  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def _dns1035(value: str) -> list:
    import re
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", value):
        problems.append(_DNS1035_MESSAGE)
    return problems


def validate(path: str, value, schema: Node | None) -> list:
    """Causes for the embedded resources in ``value`` (the root excluded)."""
    out: list = []
    _walk(path, value, schema, out, root=True)
    return out


def validate_resource(path: str, value, schema: Node) -> list:
    """``objectmeta.Validate`` with ``isResourceRoot``: ``value`` itself is an embedded
    resource too (a default of an embedded resource's schema)."""
    out: list = []
    if isinstance(value, dict):
        out.extend(_embedded(path, value))
    _walk(path, value, schema, out, root=True)
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _walk(path: str, value, schema: Node | None, out: list, root: bool = False) -> None:
    if schema is None or EMBEDDED not in schema.below:
        return
    if isinstance(value, dict):
        if schema.embedded and not root:
            out.extend(_embedded(path, value))
        for key, item in value.items():
            prop = schema.properties.get(key)
            if prop is not None:
                _walk(_join(path, key), item, prop, out)
            elif schema.additional is not None:
                _walk(f"{path}[{key}]", item, schema.additional, out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk(f"{path}[{i}]", item, schema.items, out)


def _group_version(text: str) -> str | None:
    """``schema.ParseGroupVersion``'s error, None when ``text`` is one."""
    if text == "v1" or text.count("/") == 0:
        return None
    if text.count("/") == 1:
        return None
    return f"unexpected GroupVersion string: {text}"


def _embedded(path: str, value: dict) -> list:
    out = []
    if "apiVersion" not in value:
        out.append(causes.required(_join(path, "apiVersion")))
    if "kind" not in value:
        out.append(causes.required(_join(path, "kind")))
    for key, item in value.items():
        where = _join(path, key)
        if key == "apiVersion":
            if not isinstance(item, str):
                out.append(causes.invalid(where, item, "must be a string"))
            elif not item:
                out.append(causes.invalid(where, item, "must not be empty"))
            elif (problem := _group_version(item)) is not None:
                out.append(causes.invalid(where, item, problem))
        elif key == "kind":
            if not isinstance(item, str):
                out.append(causes.invalid(where, item, "must be a string"))
            elif not item:
                out.append(causes.invalid(where, item, "must not be empty"))
            elif problems := _dns1035(item.lower()):
                out.append(causes.invalid(where, item, "may have mixed case, but should "
                                          "otherwise match: " + ",".join(problems)))
        elif key == "metadata":
            if not isinstance(item, dict):
                out.append(causes.invalid(where, item, "expected map[string]interface{}"))
                continue
            # a malformed field (a name of 1.5) is not validated: upstream's coercion
            # drops it first (it was a TypeError here: a 500)
            meta = _object_meta(item, where, [])
            if not meta.get("name"):
                meta["name"] = "fakename"
            for cause in _meta.validate_object_meta(meta, _meta.path_segment,
                                                    bool(meta.get("namespace"))):
                field = cause.field
                if field.startswith("metadata"):
                    field = where + field[len("metadata"):]
                out.append(attrs.evolve(cause, field=field))
    return out


def coerce(value, schema: Node | None, path: str = "") -> list:
    """
    Upstream's ``objectmeta.Coerce`` of the embedded resources below the root (with
    ``dropMalformedFields``): each embedded ``metadata`` keeps only ObjectMeta's fields
    (``model.meta.OBJECT_META``), a field of the wrong type dropped; the unknown fields'
    paths (``spec.template.metadata.foo``) are returned, for fieldValidation.
    """
    unknown: list = []
    _coerce(value, schema, path, unknown, root=True)
    return unknown


def _coerce(value, schema: Node | None, path: str, unknown: list, root: bool = False) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        if schema.embedded and not root and isinstance(value.get("metadata"), dict):
            value["metadata"] = _object_meta(value["metadata"], _join(path, "metadata"),
                                             unknown)
        for key, item in value.items():
            if schema.embedded and not root and key == "metadata":
                continue
            prop = schema.properties.get(key)
            sub = prop if prop is not None else schema.additional
            _coerce(item, sub, _join(path, key), unknown)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _coerce(item, schema.items, f"{path}[{i}]", unknown)


def _object_meta(metadata: dict, path: str, unknown: list) -> dict:
    from platformd.model.schema import DecodeContext, DecodeError

    out: dict = {}
    for key, item in metadata.items():
        ctx = DecodeContext()
        try:
            decoded = _meta.OBJECT_META.decode({key: item}, path, ctx)
        except DecodeError:
            continue  # a malformed field is dropped
        unknown.extend(problem_path for _kind, problem_path in ctx.problems)
        out.update(decoded)
    return out
