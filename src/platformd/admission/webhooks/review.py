"""
The ``AdmissionReview`` (``admission.platform.io/v1``, or ``v1beta1`` when a webhook
lists only that) sent to a webhook, and the checks of its answer (upstream's
``request/admissionreview.go``: ``CreateAdmissionObjects``, ``VerifyAdmissionResponse``).
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid

import attrs

from platformd.codecs.jsoncodec import dumps

GROUP = "admission.platform.io"
VERSIONS = ("v1", "v1beta1")
_OPTIONS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


def review_version(hook):
    """The first of the webhook's admissionReviewVersions this server speaks, or None."""
    for version in hook.review_versions:
        if version in VERSIONS:
            return version
    return None


def _user(user) -> dict:
    if user is None:
        return {}
    out: dict = {"username": user.name}
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {key: list(values) for key, values in user.extra}
    return out


def _options(a) -> dict:
    kind = _OPTIONS.get(a.operation)
    if kind is None:
        return {}
    options = dict(a.options) if isinstance(a.options, dict) else {}
    options.update({"kind": kind, "apiVersion": "meta.platform.io/v1"})
    if a.dry_run:
        options["dryRun"] = ["All"]
    return options


def request_dict(a, uid: str, namespaces) -> dict:
    """The AdmissionRequest of ``a`` (also the ``request`` of match conditions); a
    namespace's own is in itself (``namespaces``: ``matching.Namespaces``)."""
    object_kind = a.kind_of_object
    kind = {"group": object_kind.group, "version": object_kind.version,
            "kind": object_kind.kind}
    resource = {"group": a.kind.group, "version": a.kind.version, "resource": a.kind.plural}
    request: dict = {"uid": uid, "kind": kind, "resource": resource}
    if a.subresource:
        request["subResource"] = a.subresource
    request["requestKind"] = kind
    request["requestResource"] = resource
    if a.subresource:
        request["requestSubResource"] = a.subresource
    name = a.name or ((a.obj or {}).get("metadata") or {}).get("name") or ""
    if name:
        request["name"] = name
    namespace = name if namespaces.holds(a) else a.namespace
    if namespace:
        request["namespace"] = namespace
    request["operation"] = a.operation
    request["userInfo"] = _user(getattr(a.context, "user", None))
    request["object"] = a.obj
    request["oldObject"] = a.old
    request["dryRun"] = a.dry_run
    request["options"] = _options(a)
    return request


@attrs.define
class Invocation:
    """One review: its uid, the request, and the encoded bodies per version."""

    uid: str
    request: dict

    @classmethod
    def of(cls, a, namespaces) -> "Invocation":
        uid = str(uuid.uuid4())
        return cls(uid, request_dict(a, uid, namespaces))

    def body(self, version: str) -> bytes:
        # The server's one encoder: the request's options are as the client sent them
        # (a number past int64 among them too).
        return dumps({"kind": "AdmissionReview", "apiVersion": f"{GROUP}/{version}",
                      "request": self.request})


@attrs.frozen
class Result:
    allowed: bool
    status: dict
    patch: object  # a JSON Patch (a list) or None
    audit_annotations: dict
    warnings: tuple


class BadResponse(Exception):
    """The answer is not a usable AdmissionReview; ``str`` is upstream's reason."""


def verify(body: bytes, version: str, uid: str, mutating: bool) -> Result:
    try:
        review = json.loads(body)
    except ValueError as error:
        raise BadResponse(f"failed to decode the webhook's response: {error}") from None
    if not isinstance(review, dict):
        raise BadResponse("failed to decode the webhook's response: not a JSON object")
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if api_version != f"{GROUP}/{version}" or kind != "AdmissionReview":
        raise BadResponse(f"expected webhook response of {GROUP}/{version}, "
                          f"Kind=AdmissionReview, got {api_version}, Kind={kind}")
    response = review.get("response")
    if not isinstance(response, dict):
        raise BadResponse("webhook response was absent")
    if response.get("uid") != uid:
        raise BadResponse(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    allowed = response.get("allowed")
    if not isinstance(allowed, bool):
        allowed = False
    patch = None
    patch_type = response.get("patchType")
    raw_patch = response.get("patch")
    if mutating:
        if raw_patch and not patch_type:
            raise BadResponse("webhook returned response.patch but not response.patchType")
        if patch_type and not raw_patch:
            raise BadResponse("webhook returned response.patchType but not response.patch")
        if raw_patch:
            if patch_type != "JSONPatch":
                raise BadResponse(f'webhook returned invalid response.patchType of "{patch_type}"')
            try:
                patch = json.loads(base64.b64decode(raw_patch, validate=True))
            except (binascii.Error, ValueError, TypeError) as error:
                raise BadResponse(f"failed to decode the webhook's patch: {error}") from None
            if not isinstance(patch, list):
                raise BadResponse("the webhook's patch is not a JSON Patch (an array)")
    elif raw_patch or patch_type:
        raise BadResponse("validating webhook may not return response.patch or "
                          "response.patchType")
    annotations = response.get("auditAnnotations")
    warnings = response.get("warnings")
    status = response.get("status")
    return Result(
        allowed, status if isinstance(status, dict) else {}, patch,
        {str(k): str(v) for k, v in annotations.items()} if isinstance(annotations, dict) else {},
        tuple(str(w) for w in warnings) if isinstance(warnings, list) else ())
