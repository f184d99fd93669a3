"""
Field validation of a JSON, merge or strategic merge patch (spec 4.7.2, 4.8.3), as
upstream's patch handler does it (``endpoints/handlers/patch.go``).

Under ``Warn`` or ``Strict`` the patch document is read first as sigs.k8s.io/json's
``UnmarshalStrict`` reads it: a JSON patch into ``[]jsonPatchOp`` (``op``, ``path``,
``from`` strings and any ``value``; another field is ``json patch unknown field
"[0].x"``, a repeated one ``json patch duplicate field "[1].path"``, anything else of
the wrong type a 400 ``error decoding patch: json: cannot unmarshal ...``), a merge or
strategic merge patch into a map (its repeated keys are ``duplicate field "a.b"``).
The patched object's unknown fields follow: a JSON or merge patch's result is decoded
from the JSON json-patch writes, whose objects' keys are sorted (a Go map's order), a
strategic merge patch's is converted from the merged map
(``FromUnstructuredWithValidation``: sorted by message, the path unquoted).

A field of the wrong type in the patched object fails the request alone (the patch's
own problems dropped); the problems then go to ``fieldvalidation.report``.  Either
refusal is a 422 on field ``patch`` whose value is the patched object's JSON (JSON and
merge patches) or the patch as Go's ``%+v`` prints a map (strategic merge).
"""

from __future__ import annotations

from platformd import errors
from platformd.goformat import gotext
from platformd.api import fieldvalidation
from platformd.codecs.duplicates import duplicate_paths
from platformd.codecs.jsoncodec import dumps
from platformd.model import fielderrors
from platformd.model.schema import UNKNOWN, DecodeContext, DecodeError

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"

#: handlers.jsonPatchOp's fields.
_OPERATION_FIELDS = ("op", "path", "from", "value")


def document_problems(content_type: str, patch) -> list:
    """The strict problems of the patch document itself (``Warn`` and ``Strict`` only)."""
    if content_type == JSON_PATCH:
        return _operation_problems(patch)
    if patch is not None and not isinstance(patch, dict):
        message = (f"json: cannot unmarshal {gotext.json_kind(patch)} into Go value of type "
                   "map[string]interface {}")
        # mergePatcher wraps the error, strategicPatchObject does not.
        raise errors.bad_request(f"error decoding patch: {message}"
                                 if content_type == MERGE_PATCH else message)
    return [f"duplicate field {gotext.go_quote(path)}" for path in duplicate_paths(patch)]


def _operation_problems(patch) -> list:
    if patch is not None and not isinstance(patch, list):
        _cannot_decode(patch, "Go value of type []handlers.jsonPatchOp")
    problems: dict = {}
    for index, operation in enumerate(patch or ()):
        if operation is None:
            continue
        if not isinstance(operation, dict):
            _cannot_decode(operation, "Go value of type handlers.jsonPatchOp")
        repeated = getattr(operation, "duplicates", ())
        for key, value in operation.items():
            path = f"[{index}].{key}"
            if key not in _OPERATION_FIELDS:
                problems.setdefault(f"unknown field {gotext.go_quote(path)}")
                continue
            if key in repeated:
                problems.setdefault(f"duplicate field {gotext.go_quote(path)}")
            if key == "value":
                for inner in duplicate_paths(value, path):
                    problems.setdefault(f"duplicate field {gotext.go_quote(inner)}")
            elif value is not None and not isinstance(value, str):
                _cannot_decode(value, f"Go struct field jsonPatchOp.{key} of type string")
    return ["json patch " + problem for problem in problems]


def _cannot_decode(value, target: str):
    raise errors.bad_request(f"error decoding patch: json: cannot unmarshal "
                             f"{gotext.json_kind(value)} into {target}")


def decode(call, kind, content_type: str, patched, patch, level: str, problems) -> dict:
    """
    ``patched`` (the patch applied to the current object) as an object of ``kind``,
    its problems reported after the patch's own ``problems``.  A JSON patch that makes
    the object ``null`` leaves the empty object, as Go's decoder leaves a struct it
    decodes ``null`` into (``DecodeInto``).
    """
    strategic = content_type == STRATEGIC_PATCH
    shown = gotext.go_value(patch) if strategic else dumps(patched).decode()

    def refuse(problem: str) -> errors.StatusError:
        """NewInvalid(GroupKind{}, "", [Invalid("patch", <shown>, problem)])."""
        return errors.invalid("", "", "", [fielderrors.invalid("patch", shown, problem)])

    ctx = DecodeContext()
    try:
        obj = kind.schema.decode(patched if strategic else _go_json_order(patched), "", ctx)
    except DecodeError as e:
        raise refuse(str(e)) from None
    unknown = [path for problem, path in ctx.problems if problem == UNKNOWN]
    if strategic:
        found = sorted(f'unknown field "{path}"' for path in unknown)
    else:
        found = [f"unknown field {gotext.go_quote(path)}" for path in unknown]
    fieldvalidation.report(call, level, [*problems, *found], refuse)
    return kind.schema.zero() if obj is None else obj


def _go_json_order(value):
    """``value`` with every object's keys sorted, as encoding/json writes a Go map."""
    if isinstance(value, dict):
        return {key: _go_json_order(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_go_json_order(item) for item in value]
    return value
