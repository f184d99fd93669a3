"""
Strict decoding of a small versioned configuration file (YAML or JSON), worded as
upstream's ``serializer.NewCodecFactory(scheme, EnableStrict).UniversalDecoder()``.

A file is described by a ``Kind``: its name, the ``apiVersion``s that carry it and its
``schema``.  A schema is a ``Struct``: field names to field types, each ``"int32"``, a
string type's Go name (``"string"``, ``"v1beta1.ProtocolType"``), a nested ``Struct``
(an object) or a one-element list of a type (an array); the Go names serve the type
errors (``json: cannot unmarshal number into Go struct field
EgressSelection.egressSelections.name of type string``).  ``RAW`` is a field kept as
written, whatever it holds (a ``runtime.RawExtension``, which decodes any JSON value);
``BYTES`` a Go ``[]byte``: a base64 string, decoded.  The first type error wins, else
every unknown field is reported at once (``strict decoding error: unknown field
"a.b"``), as sigs.k8s.io/json reports them.  A field that is absent or null is absent
from the decoded dict, so callers can tell an unset pointer from a zero value.

``decode`` reads a versioned file; ``decode_object`` a document that is not one (a
kubeconfig), leniently: client-go's kubeconfig codec is not strict, so unknown fields
are skipped there.
"""

from __future__ import annotations

import base64
import binascii

import attrs
import yaml

from platformd.goformat import gotext
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_INT32 = (-(2 ** 31), 2 ** 31 - 1)
#: Field types besides a Go type name, a ``Struct`` and a list.
RAW = "RawExtension"
BYTES = "[]uint8"  # Go names a []byte so in its type errors


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
    document = load_yaml(data)
    if document is None:  # an empty file: null, which Go decodes into nothing
        document = {}
    if not isinstance(document, dict):
        raise not_an_object(document)
    api_version, name = document.get("apiVersion"), document.get("kind")
    compact = " ".join(data.decode("utf-8", "replace").split())[:200]
    if not name:
        raise DecodeError(f"Object 'Kind' is missing in '{compact}'")
    if not api_version:
        raise DecodeError(f"Object 'apiVersion' is missing in '{compact}'")
    if api_version not in kind.api_versions or name != kind.name:
        raise DecodeError(f'no kind "{name}" is registered for version "{api_version}" in '
                          "scheme")
    body = {k: v for k, v in document.items() if k not in ("apiVersion", "kind")}
    return api_version, decode_object(body, kind.schema)


def not_an_object(document) -> DecodeError:
    """A document that is not an object, as the serializer's ``Interpret`` finds it
    reading the type's ``apiVersion`` and ``kind``."""
    return DecodeError("couldn't get version/kind; json parse error: json: cannot "
                       f"unmarshal {gotext.json_kind(document)} into Go value "
                       "of type struct { APIVersion string \"json:\\\"apiVersion,omitempty"
                       "\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }")


def load_yaml(data: bytes):
    """The YAML (or JSON) document in ``data``; ``DecodeError`` in the project's words for
    the parser's complaint (PyYAML's text after sigs.k8s.io/yaml's prefix)."""
    try:
        return yaml.load(data, Loader=_Loader)
    except yaml.YAMLError as error:
        raise DecodeError("error converting YAML to JSON: " + " ".join(str(error).split())) \
            from None


def decode_object(document: dict, schema: Struct, strict: bool = True) -> dict:
    """``document`` decoded as ``schema``; ``strict``: unknown fields are errors."""
    decoder = _Decoder(strict)
    value = decoder.object(document, schema, "", "")
    if decoder.type_error:
        raise DecodeError(decoder.type_error)
    if decoder.unknown:
        raise DecodeError("strict decoding error: " + ", ".join(
            f'unknown field "{field}"' for field in decoder.unknown))
    return value


class _Decoder:
    def __init__(self, strict: bool):
        self.strict = strict
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
                if self.strict:
                    self.unknown.append(f"{path}.{key}" if path else str(key))
                continue
            if item is not None:
                out[key] = self.value(item, struct.fields[key], struct, _join(path, key),
                                      _join(go_path, key))
        return out

    def value(self, item, type_, parent: Struct, path: str, go_path: str):
        if type_ == RAW:
            return item
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
        if type_ == BYTES:
            return self.base64(item)
        return item

    def base64(self, text: str) -> bytes:
        """Go's ``[]byte`` field: standard base64, padded; the first fault is Go's
        ``illegal base64 data at input byte N`` (an invalid character, else the start
        of an incomplete group)."""
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            pass
        if not self.type_error:
            alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
            bad = next((i for i, c in enumerate(text) if c not in alphabet), None)
            at = bad if bad is not None else len(text) - len(text) % 4
            self.type_error = f"illegal base64 data at input byte {at}"
        return b""


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
