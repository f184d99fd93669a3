"""
create (POST), update (PUT) and patch (PATCH), for objects and their status.

The pipeline per request: decode with field validation (``body.py``), then the generic
store's defaulting, validation, namespace lifecycle and compare-and-swap write.  JSON
patch (RFC 6902, via the ``jsonpatch`` library) and merge patch (RFC 7386) apply to the
current object before that same pipeline; strategic merge and server-side apply arrive
with issue 4.
"""

from __future__ import annotations

import jsonpatch
from twisted.internet.defer import inlineCallbacks, returnValue

from platformd import errors
from platformd.api import responses
from platformd.api.body import decode_object, field_validation_level, read_body, report_fields
from platformd.codecs.jsoncodec import JSONCodec
from platformd.patch.merge import merge_patch
from platformd.patch.strategic import strategic_merge
from platformd.registry.schema import DecodeContext, DecodeError

_json = JSONCodec()
_PATCH_RETRIES = 16


def create(call, store):
    kind = call.kind
    dry_run = call.dry_run()
    obj = decode_object(call, kind.schema, kind.kind, kind.api_version)
    d = store.create(obj, call.info.namespace or None, dry_run)
    return d.addCallback(lambda created: responses.write_value(call, 201, created))


@inlineCallbacks
def update(call, store):
    kind = call.kind
    dry_run = call.dry_run()
    obj = decode_object(call, kind.schema, kind.kind, kind.api_version)
    result, created = yield store.update(call.info.namespace or None, call.info.name, obj,
                                         call.info.subresource, dry_run,
                                         lambda: call.authorize_as("create"))
    returnValue(responses.write_value(call, 201 if created else 200, result))


JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH)


@inlineCallbacks
def patch(call, store):
    kind = call.kind
    dry_run = call.dry_run()
    level = field_validation_level(call)
    content_type = (call.request.getHeader(b"content-type") or b"").decode("latin-1")
    content_type = content_type.split(";")[0].strip().lower()
    if content_type not in PATCH_TYPES:
        raise errors.StatusError(
            415, "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types "
            "include: " + ", ".join(PATCH_TYPES))
    data = read_body(call)
    try:
        patch_doc = _json.decode(data)
    except Exception as e:
        raise errors.bad_request(f"error decoding patch: {e}") from None
    conditional = isinstance(patch_doc, dict) and isinstance(patch_doc.get("metadata"), dict) \
        and "resourceVersion" in patch_doc["metadata"]
    namespace, name = call.info.namespace or None, call.info.name
    for _attempt in range(_PATCH_RETRIES):
        current = store.get(namespace, name)
        patched = apply_patch(content_type, current.mutable(), patch_doc, kind.schema)
        ctx = DecodeContext()
        try:
            obj = kind.schema.decode(patched, "", ctx)
        except DecodeError as e:
            raise errors.bad_request(f"{kind.kind} in version \"{kind.version}\" cannot be "
                                     f"handled as a {kind.kind}: {e}") from None
        report_fields(call, level, ctx)
        if not conditional:
            # Patch the version we read; if another writer got in first, patch again.
            obj.setdefault("metadata", {})["resourceVersion"] = str(current.revision)
        try:
            result, _created = yield store.update(namespace, name, obj, call.info.subresource,
                                                  dry_run)
        except errors.StatusError as e:
            if e.reason == "Conflict" and not conditional:
                continue
            raise
        returnValue(responses.write_value(call, 200, result))
    raise errors.conflict(kind.plural, kind.group, name, "too many concurrent writers; try again")


def apply_patch(content_type: str, original: dict, patch_doc, schema):
    """The patched object (plain values; decoded and validated afterwards)."""
    if content_type == JSON_PATCH:
        if not isinstance(patch_doc, list):
            raise errors.bad_request("json patch must be a list of operations")
        try:
            return jsonpatch.apply_patch(original, patch_doc)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
            raise errors.StatusError(422, "Invalid", f"the server rejected our request due to an "
                                     f"error in our request: {e}") from None
    if not isinstance(patch_doc, dict):
        raise errors.bad_request("a merge patch must be a JSON object")
    if content_type == MERGE_PATCH:
        return merge_patch(original, patch_doc)
    return strategic_merge(original, patch_doc, schema)
