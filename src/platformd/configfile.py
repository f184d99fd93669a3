"""
Strict decoding of a small versioned configuration file (YAML or JSON), worded as
upstream's ``serializer.NewCodecFactory(scheme, EnableStrict).UniversalDecoder()``.

A file is described by a ``Kind``: its name, the ``apiVersion``s that carry it and its
``schema``.  A schema is a ``Struct``: field names to field types, each ``"int32"``, a
string type's Go name (``"string"``, ``"v1beta1.ProtocolType"``), a nested ``Struct``
(an object) or a one-element list of a type (an array); the Go names serve the type
errors (``json: cannot unmarshal number into Go struct field
EgressSelection.egressSelections.name of type string``).  The first type error wins, else every
unknown field is reported at once (``strict decoding error: unknown field "a.b"``), as
sigs.k8s.io/json reports them.  A field that is absent or null is absent from the
decoded dict, so callers can tell an unset pointer from a zero value.
"""

from __future__ import annotations

import attrs
import yaml

from platformd import gotext

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_INT32 = (-(2 ** 31), 2 ** 31 - 1)


class DecodeError(Exception):
    """The file is not a valid document of its kind; ``str`` is upstream's words."""


@attrs.frozen
class Struct:
    """An object: its Go struct name, its Go type as a type error names it
    (``v1beta1.Connection``) and its fields (name -> type)."""

    go_name: str
    go_type: str
    fields: dict


@attrs.frozen
class Kind:
    name: str
    api_versions: frozenset
    schema: Struct


def decode(data: bytes, kind: Kind) -> tuple:
    """(apiVersion, the decoded document without apiVersion and kind)."""
    try:
        document = yaml.load(data, Loader=_Loader)
    except yaml.YAMLError as error:
        raise DecodeError("error converting YAML to JSON: " + " ".join(str(error).split())) \
            from None
    if not isinstance(document, dict):
        raise DecodeError("couldn't get version/kind; json parse error: json: cannot "
                          f"unmarshal {gotext.json_kind(document)} into Go value "
                          "of type struct { APIVersion string \"json:\\\"apiVersion,omitempty"
                          "\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }")
    api_version, name = document.get("apiVersion"), document.get("kind")
    if not name:
        compact = " ".join(data.decode("utf-8", "replace").split())[:200]
        raise DecodeError(f"Object 'Kind' is missing in '{compact}'")
    if api_version not in kind.api_versions or name != kind.name:
        raise DecodeError(f'no kind "{name}" is registered for version "{api_version}" in '
                          "scheme")
    decoder = _Decoder()
    body = {k: v for k, v in document.items() if k not in ("apiVersion", "kind")}
    value = decoder.object(body, kind.schema, "", "")
    if decoder.type_error:
        raise DecodeError(decoder.type_error)
    if decoder.unknown:
        raise DecodeError("strict decoding error: " + ", ".join(
            f'unknown field "{field}"' for field in decoder.unknown))
    return api_version, value


class _Decoder:
    def __init__(self):
        self.type_error = ""
        self.unknown: list = []

    def wrong(self, value, struct: Struct, go_path: str, want: str) -> None:
        """Go's words: the innermost struct's name, then the JSON path from the root."""
        if not self.type_error:
            got = gotext.json_kind(value)
            self.type_error = (f"json: cannot unmarshal {got} into Go struct field "
                               f"{struct.go_name}.{go_path} of type {want}")

    def object(self, value: dict, struct: Struct, path: str, go_path: str) -> dict:
        out = {}
        for key, item in value.items():
            if key not in struct.fields:
                self.unknown.append(f"{path}.{key}" if path else str(key))
                continue
            if item is not None:
                out[key] = self.value(item, struct.fields[key], struct, _join(path, key),
                                      _join(go_path, key))
        return out

    def value(self, item, type_, parent: Struct, path: str, go_path: str):
        if isinstance(type_, Struct):
            if not isinstance(item, dict):
                self.wrong(item, parent, go_path, type_.go_type)
                return {}
            return self.object(item, type_, path, go_path)
        if isinstance(type_, list):
            element = type_[0]
            if not isinstance(item, list):
                self.wrong(item, parent, go_path, "[]" + (
                    element.go_type if isinstance(element, Struct) else element))
                return []
            return [self.value(entry, element, parent, f"{path}[{index}]", go_path)
                    for index, entry in enumerate(item) if entry is not None]
        if type_ == "int32":
            if isinstance(item, bool) or not isinstance(item, int) or \
                    not _INT32[0] <= item <= _INT32[1]:
                self.wrong(item, parent, go_path, "int32")
                return 0
            return item
        if not isinstance(item, str):  # strings and string types (v1beta1.ProtocolType)
            self.wrong(item, parent, go_path, type_)
            return ""
        return item


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
