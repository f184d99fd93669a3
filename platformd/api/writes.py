"""
create (POST), update (PUT), patch (PATCH) and server-side apply, for objects and their
status.

The pipeline per request: options (``writeoptions.py``, 422 on bad ones), decode with
field validation (``body.py``), then the generic store's defaulting, validation,
namespace lifecycle, managedFields and compare-and-swap write — or, with ``dryRun``,
everything but the write.  JSON patch (RFC 6902, the ``jsonpatch`` library), merge patch
(RFC 7386) and strategic merge patch apply to the current object before that same
pipeline; server-side apply merges by field ownership (``platformd/patch/apply.py``).
"""

from __future__ import annotations

import jsonpatch
from twisted.internet.defer import inlineCallbacks, returnValue

from platformd import errors
from platformd.api import responses, writeoptions
from platformd.api.body import decode_object, read_body, report_fields
from platformd.codecs.duplicates import duplicate_paths
from platformd.codecs.cborcodec import CBORCodec
from platformd.codecs.interface import CodecError
from platformd.codecs.jsoncodec import JSONCodec, dumps
from platformd.codecs.yamlcodec import YAMLCodec
from platformd.patch.apply import apply as apply_configuration
from platformd.patch.merge import merge_patch
from platformd.patch.strategic import strategic_merge
from platformd.model import fielderrors as fe
from platformd.patch.managedfields import Manager
from platformd.model.schema import DecodeContext, DecodeError

_json = JSONCodec()
_yaml = YAMLCodec()
_cbor = CBORCodec()
_RETRIES = 16

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
APPLY_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def create(call, store):
    kind = call.kind
    options = writeoptions.parse(call)
    obj = decode_object(call, options.field_validation, kind.schema, kind.kind, kind.api_version)
    d = store.create(obj, call.info.namespace or None, options.dry_run,
                     Manager(options.field_manager))
    return d.addCallback(lambda created: responses.write_value(call, 201, created))


@inlineCallbacks
def update(call, store):
    kind = call.kind
    options = writeoptions.parse(call)
    obj = decode_object(call, options.field_validation, kind.schema, kind.kind, kind.api_version)
    result, created = yield store.update(
        call.info.namespace or None, call.info.name, obj, call.info.subresource,
        options.dry_run, lambda: call.authorize_as("create"),
        Manager(options.field_manager, "Update", call.info.subresource))
    returnValue(responses.write_value(call, 201 if created else 200, result))


def patch_type(call) -> str:
    """The patch kind; 415 for any other (CBOR only for apply, and only under its gate)."""
    content_type = (call.request.getHeader(b"content-type") or b"").decode("latin-1")
    content_type = content_type.split(";")[0].strip().lower()
    accepted = PATCH_TYPES + ((APPLY_CBOR,) if call.gates["CBORServingAndStorage"] else ())
    if not call.kind.strategic:
        accepted = tuple(t for t in accepted if t != STRATEGIC_PATCH)
    if content_type not in accepted:
        raise errors.StatusError(
            415, "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types "
            "include: " + ", ".join(accepted))
    return content_type


def patch(call, store):
    content_type = patch_type(call)
    if content_type in (APPLY_PATCH, APPLY_CBOR):
        return server_side_apply(call, store, content_type)
    return _patch(call, store, content_type)


@inlineCallbacks
def _patch(call, store, content_type: str):
    kind = call.kind
    options = writeoptions.parse(call)
    try:
        patch_doc = _json.decode(read_body(call))
    except CodecError as e:
        raise errors.bad_request(f"error decoding patch: {e}") from None
    duplicates = duplicate_paths(patch_doc) if content_type != JSON_PATCH else []
    namespace, name = call.info.namespace or None, call.info.name
    manager = Manager(options.field_manager, "Update", call.info.subresource)
    for _attempt in range(_RETRIES):
        current = store.get(namespace, name)
        patched = apply_patch(content_type, current.mutable(), patch_doc, kind.schema)
        obj = _decode(call, kind, patched, options.field_validation, duplicates)
        # As upstream's store.Update: a patch that leaves the object's resourceVersion
        # as read is unconditional (retried on a race); one that sets another value is
        # an optimistic-concurrency precondition (409 when stale); one that clears it
        # is unconditional.
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        conditional = bool(rv) and rv != str(current.revision)
        if not conditional:
            # Patch the version we read; if another writer got in first, patch again.
            obj.setdefault("metadata", {})["resourceVersion"] = str(current.revision)
        try:
            result, _created = yield store.update(namespace, name, obj, call.info.subresource,
                                                  options.dry_run, manager=manager)
        except errors.StatusError as e:
            if e.reason == "Conflict" and not conditional:
                call.warnings.clear()
                continue
            raise
        returnValue(responses.write_value(call, 200, result))
    raise errors.conflict(kind.plural, kind.group, name, "too many concurrent writers; try again")


def _decode(call, kind, value, level: str, duplicates=None, refuse=None) -> dict:
    """
    A patched or applied value as an object of ``kind``.  A patch's problems are
    upstream's patcher's: 422 Invalid on field ``patch`` whose value is the patched
    object (``refuse`` words them otherwise, as apply does).
    """
    refuse = refuse or (lambda problem: _invalid_patch(value, problem))
    ctx = DecodeContext()
    try:
        obj = kind.schema.decode(value, "", ctx)
    except DecodeError as e:
        raise refuse(str(e)) from None
    report_fields(call, level, ctx, duplicates, refuse)
    return obj


def _invalid_patch(patched, problem: str) -> errors.StatusError:
    """handlers/patch.go: NewInvalid(GroupKind{}, "", [Invalid("patch", patchedJS, problem)])."""
    return errors.invalid("", "", "", [fe.invalid("patch", dumps(patched).decode(), problem)])


#: Upstream's maxJSONPatchOperations.
MAX_JSON_PATCH_OPERATIONS = 10000
_GO_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "bool", int: "number",
                  float: "number"}


def _go_json_type(value) -> str:
    """How Go's encoding/json names a JSON value's type in an unmarshal error."""
    return _GO_JSON_TYPES[type(value)]


def _json_patch_operations(patch_doc) -> list:
    """
    The operations of a JSON patch, checked as upstream's ``jsonpatch.DecodePatch``
    (Go's json.Unmarshal into ``[]Operation``) and its operation limit check it.
    """
    if patch_doc is None:
        return []  # Go unmarshals null into an empty patch: nothing to do
    if not isinstance(patch_doc, list):
        raise errors.bad_request(f"json: cannot unmarshal {_go_json_type(patch_doc)} "
                                 "into Go value of type jsonpatch.Patch")
    for operation in patch_doc:
        if operation is not None and not isinstance(operation, dict):
            raise errors.bad_request(f"json: cannot unmarshal {_go_json_type(operation)}"
                                     " into Go value of type jsonpatch.Operation")
    if len(patch_doc) > MAX_JSON_PATCH_OPERATIONS:
        raise errors.too_large_entity(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, "
            f"got {len(patch_doc)}")
    return [op for op in patch_doc if op is not None]


def apply_patch(content_type: str, original: dict, patch_doc, schema):
    """The patched object (plain values; decoded and validated afterwards)."""
    if content_type == JSON_PATCH:
        operations = _json_patch_operations(patch_doc)
        try:
            return jsonpatch.apply_patch(original, operations)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError,
                TypeError, ValueError, IndexError):
            raise errors.rejected() from None
    if not isinstance(patch_doc, dict):
        if content_type == MERGE_PATCH:
            raise errors.bad_request("Invalid JSON Patch")  # evanphx/json-patch's ErrBadJSONPatch
        # patch.go strategicPatchObject: json.Unmarshal into a map.
        raise errors.bad_request(f"json: cannot unmarshal {_go_json_type(patch_doc)} into Go "
                                 "value of type map[string]interface {}")
    if content_type == MERGE_PATCH:
        return merge_patch(original, patch_doc)
    return strategic_merge(original, patch_doc, schema)


@inlineCallbacks
def server_side_apply(call, store, content_type: str = APPLY_PATCH):
    """
    Server-side apply (spec 4.7.2): create when absent (authorized as create), otherwise a
    patch merging by field ownership; 409 on conflicts unless ``force``.
    """
    kind = call.kind
    options = writeoptions.parse(call, apply=True)
    codec = _cbor if content_type == APPLY_CBOR else _yaml
    try:
        value = codec.decode(read_body(call))
    except CodecError as e:
        raise errors.bad_request(f"error decoding the apply configuration: {e}") from None
    if not isinstance(value, dict):
        raise errors.bad_request("an apply configuration must be an object")
    for field, expected in (("apiVersion", kind.api_version), ("kind", kind.kind)):
        if not value.get(field):
            raise errors.bad_request(f"{field} must be set in an apply configuration")
        if value[field] != expected:
            raise errors.bad_request(f'{field} "{value[field]}" does not match the expected '
                                     f'"{expected}"')
    applied = _decode(call, kind, value, options.field_validation, duplicate_paths(value),
                      lambda problem: errors.bad_request(
                          f"error strict decoding patch: {problem}"
                          if problem.startswith("strict decoding error")
                          else f'{kind.kind} in version "{kind.version}" cannot be handled '
                               f"as a {kind.kind}: {problem}"))
    meta = applied.setdefault("metadata", {})
    if meta.get("name", call.info.name) != call.info.name:
        raise errors.bad_request(f"the name of the object ({meta['name']}) does not match "
                                 f"the name on the URL ({call.info.name})")
    meta["name"] = call.info.name
    if kind.namespaced:
        meta.setdefault("namespace", call.info.namespace)
    conditional = bool(meta.get("resourceVersion"))
    manager = Manager(options.field_manager, "Apply", call.info.subresource)
    namespace = call.info.namespace or None
    for _attempt in range(_RETRIES):
        current = store.cache.get(kind.storage_key(namespace, call.info.name))
        if current is None:
            if call.info.subresource:
                raise errors.not_found(kind.plural, kind.group, call.info.name)
            call.authorize_as("create")
            obj = apply_configuration(kind, None, applied, manager, options.force, store.now())
            created = yield store.create(obj, namespace, options.dry_run)
            returnValue(responses.write_value(call, 201, created))
        obj = apply_configuration(kind, current.mutable(), applied, manager, options.force,
                                  store.now())
        if not conditional:
            obj["metadata"]["resourceVersion"] = str(current.revision)
        try:
            result, _created = yield store.update(namespace, call.info.name, obj,
                                                  call.info.subresource, options.dry_run)
        except errors.StatusError as e:
            if e.reason == "Conflict" and not conditional and not e.causes:
                continue
            raise
        returnValue(responses.write_value(call, 200, result))
    raise errors.conflict(kind.plural, kind.group, call.info.name,
                          "too many concurrent writers; try again")
