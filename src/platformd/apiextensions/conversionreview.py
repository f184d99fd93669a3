"""
A ``ConversionReview``: what a conversion webhook is sent and what its answer must be,
as upstream's ``webhookConverter`` (apiextensions-apiserver
``pkg/apiserver/conversion/webhook_converter.go``) builds and checks them, in its words.

``request`` picks the first of the definition's ``conversionReviewVersions`` this server
knows (``v1``, ``v1beta1``) and carries the objects not already in the desired version
(upstream's ``getObjectsToConvert``); ``converted`` checks the answer (its
apiVersion/kind and uid for ``v1`` only, as upstream, ``result.status``, the count) and
each converted object (its group/version, kind, name, namespace and uid; metadata but
labels and annotations restored from the original, upstream's ``restoreObjectMeta``).
A fault is a ``ReviewError`` whose text is what follows upstream's ``conversion webhook
for <GVK> ...`` prefix, which the caller adds.  Nothing here waits or does I/O.
"""

from __future__ import annotations

import copy
from typing import Optional

import orjson

from platformd.apiextensions.names import GROUP
from platformd.model.meta import TOTAL_ANNOTATION_SIZE, label_value, qualified_name

#: The review versions this server sends, as upstream's client manager knows them.
KNOWN_VERSIONS = ("v1", "v1beta1")


class ReviewError(Exception):
    """The review could not be made or its answer is refused (``kind`` says which of
    upstream's metric reasons: ``call``, ``malformed``, ``partial``, ``invalid``)."""

    def __init__(self, message: str, kind: str = "malformed", prefixed: bool = True):
        super().__init__(message)
        self.kind = kind
        #: Whether upstream words it ``conversion webhook for <GVK> failed: ...``
        #: (``failed_prefix``) rather than another form (``returned ...``).
        self.prefixed = prefixed


def gvk_text(api_version: str, kind: str) -> str:
    """A GroupVersionKind as Go's ``%v`` prints it: ``example.com/v1, Kind=Widget``."""
    return f"{api_version}, Kind={kind}"


def needing_conversion(objects: list, desired: str) -> list:
    """Indexes of the objects not already in ``desired`` (only those are sent)."""
    return [i for i, obj in enumerate(objects) if obj.get("apiVersion") != desired]


def request(review_versions, objects: list, desired: str, uid: str) -> tuple:
    """``(review version, body bytes)``; ``ReviewError`` when no version is known."""
    for version in review_versions or ():
        if version in KNOWN_VERSIONS:
            body = {"kind": "ConversionReview", "apiVersion": f"{GROUP}/{version}",
                    "request": {"uid": uid, "desiredAPIVersion": desired,
                                "objects": objects}}
            return version, orjson.dumps(body)
    raise ReviewError("no supported conversion review versions", "call", prefixed=False)


def converted(version: str, uid: str, body: bytes) -> list:
    """The answer's ``response.convertedObjects`` once the answer is checked."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise ReviewError(f"couldn't decode the response: {error}", "call") from None
    if not isinstance(review, dict):
        raise ReviewError("couldn't decode the response: not a JSON object", "call")
    if version == "v1":
        want = gvk_text(f"{GROUP}/v1", "ConversionReview")
        got = gvk_text(str(review.get("apiVersion") or ""), str(review.get("kind") or ""))
        if got != want:
            raise ReviewError(f"expected webhook response of {want}, got {got}")
    response = review.get("response")
    if not isinstance(response, dict):
        raise ReviewError("no response provided")
    if version == "v1" and response.get("uid") != uid:
        raise ReviewError(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    result = response.get("result")
    if not isinstance(result, dict):
        result = {}
    if result.get("status") != "Success":
        message = result.get("message")
        if isinstance(message, str) and message:
            raise ReviewError(message)
        raise ReviewError(f"response.result.status was '{result.get('status') or ''}', "
                          "not 'Success'")
    objects = response.get("convertedObjects") or []
    if not isinstance(objects, list):
        raise ReviewError("couldn't decode the response: convertedObjects is not a list",
                          "call")
    return objects


def check_object(original: dict, out, desired: str, index: int, single: bool) -> dict:
    """
    ``out`` (the webhook's conversion of ``original``) as it is kept: ``ReviewError`` in
    upstream's words for the list form (``single`` False: ``returned invalid converted
    object at index N: ...``) or the single object's.
    """
    what = "object" if single else "converted object"
    if not isinstance(out, dict):
        raise ReviewError(f"returned invalid {what} at index {index}: "
                          "Object 'Kind' is missing in converted object", "invalid", False)
    api_version = out.get("apiVersion")
    if api_version != desired:
        raise ReviewError(f"returned invalid {what} at index {index}: invalid groupVersion "
                          f"(expected {desired}, received {api_version or ''})",
                          "invalid", False)
    if out.get("kind") != original.get("kind"):
        raise ReviewError(f"returned invalid {what} at index {index}: invalid kind "
                          f"(expected {original.get('kind')}, received {out.get('kind')})",
                          "invalid", False)
    problem = _changed_identity(original, out)
    if problem:
        head = "returned invalid object" if single else \
            f"returned invalid converted object at index {index}"
        raise ReviewError(f"{head}: {problem}", "invalid", False)
    problem = restore_object_meta(original, out)
    if problem:
        head = "returned invalid metadata" if single else \
            f"returned invalid metadata in object at index {index}"
        raise ReviewError(f"{head}: {problem}", "invalid", False)
    return out


def _changed_identity(original: dict, out: dict) -> Optional[str]:
    """Upstream's ``validateConvertedObject``: kind, name, namespace and uid kept."""
    before, after = original.get("metadata") or {}, _meta(out)
    for field, label in (("name", "name"), ("namespace", "namespace"), ("uid", "UID")):
        if (before.get(field) or "") != (after.get(field) or ""):
            return f"must have the same {label}: {before.get(field) or ''} != " \
                   f"{after.get(field) or ''}"
    return None


def _meta(obj: dict) -> dict:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def restore_object_meta(original: dict, out: dict) -> Optional[str]:
    """
    Upstream's ``restoreObjectMeta``, in place: ``out``'s metadata becomes
    ``original``'s but for labels and annotations, which the webhook may change (then
    checked as labels and annotations are); the problem, or None.
    """
    answered = out.get("metadata")
    if answered is None:
        return "missing metadata in converted object"
    if not isinstance(answered, dict):
        return f"invalid metadata of type {_go_type(answered)} in converted object"
    restored = copy.deepcopy(original.get("metadata") or {})
    for field in ("labels", "annotations"):
        value = answered.get(field)
        if value is None:
            restored.pop(field, None)
            continue
        if not isinstance(value, dict):
            return f"invalid metadata.{field} of type {_go_type(value)} in converted object"
        for key, item in value.items():
            if not isinstance(item, str):
                return f"metadata.{field}[{key}] must be a string, but is " \
                       f"{_go_type(item)} in converted object"
        if value != (restored.get(field) or {}):
            problems = _labels(value) if field == "labels" else _annotations(value)
            if problems:
                return problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
        restored[field] = value
    out["metadata"] = restored
    return None


def _labels(labels: dict) -> list:
    out: list = []
    for key, value in labels.items():
        out.extend(f'metadata.labels: Invalid value: "{key}": {p}' for p in qualified_name(key))
        out.extend(f'metadata.labels: Invalid value: "{value}": {p}' for p in label_value(value))
    return out


def _annotations(annotations: dict) -> list:
    out: list = []
    for key in annotations:
        out.extend(f'metadata.annotation: Invalid value: "{key}": {p}'
                   for p in qualified_name(key.lower()))
    size = sum(len(k) + len(v) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE:
        out.append(f"metadata.annotation: Too long: may not be more than "
                   f"{TOTAL_ANNOTATION_SIZE} bytes")
    return out


#: Go's ``%T`` of each decoded JSON type (bool before int: a bool is an int here).
_GO_TYPES = ((bool, "bool"), (int, "int64"), (float, "float64"), (str, "string"),
             (list, "[]interface {}"), (dict, "map[string]interface {}"))


def _go_type(value) -> str:
    """Go's ``%T`` of a decoded JSON value."""
    return next((name for python, name in _GO_TYPES if isinstance(value, python)), "<nil>")
