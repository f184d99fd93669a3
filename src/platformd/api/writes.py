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
from platformd import errors
from platformd.goformat import gotext
from platformd.api import fieldvalidation, patchfields, responses, writeoptions
from platformd.api.body import decode_object, read_body
from platformd.api.patchfields import JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH
from platformd.codecs.cborcodec import CBORCodec
from platformd.codecs.interface import CodecError
from platformd.codecs.jsoncodec import JSONCodec
from platformd.codecs.yamlcodec import YAMLCodec
from platformd.patch import undeclared
from platformd.patch.apply import apply as apply_configuration
from platformd.patch.merge import merge_patch
from platformd.patch.strategic import strategic_merge
from platformd.patch.managedfields import Manager
from platformd.model.schema import DecodeContext, DecodeError

_json = JSONCodec()
_yaml = YAMLCodec()
_cbor = CBORCodec()

APPLY_PATCH = "application/apply-patch+yaml"
APPLY_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def _options(call, apply: bool = False):
    """The write's options, recorded on the request's context for admission and the store."""
    options = writeoptions.parse(call, apply)
    call.context.dry_run = options.dry_run
    call.context.field_manager = options.field_manager
    return options


def create(call, store):
    kind = call.kind
    options = _options(call)
    obj = decode_object(call, options.field_validation, kind.schema, kind.kind, kind.api_version)
    d = store.create(call.context, obj, call.info.namespace or None,
                     Manager(options.field_manager))
    return d.addCallback(lambda created: responses.write_value(call, 201, created))


def update(call, store):
    kind = call.kind
    options = _options(call)
    obj = decode_object(call, options.field_validation, kind.schema, kind.kind, kind.api_version)
    d = store.update(call.context, call.info.namespace or None, call.info.name,
                     lambda current: obj, call.info.subresource,
                     Manager(options.field_manager, "Update", call.info.subresource))
    return d.addCallback(lambda answer: responses.write_value(
        call, 201 if answer[1] else 200, answer[0]))


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


def _patch(call, store, content_type: str):
    kind = call.kind
    options = _options(call)
    try:
        patch_doc = _json.decode(read_body(call))
    except CodecError as e:
        raise errors.bad_request(f"error decoding patch: {e}") from None
    call.context.audit_request(patch_doc, has_object_meta=False)
    level = options.field_validation
    problems = [] if level == fieldvalidation.IGNORE else \
        patchfields.document_problems(content_type, patch_doc)

    def patched(current):
        # Each attempt of the update loop patches the object as it is then.  The
        # patched object's resourceVersion is the current one unless the patch set
        # another (a precondition: 409 when stale, as upstream) or removed it.
        if current is None:
            raise errors.not_found(kind.plural, kind.group, call.info.name)
        return patchfields.decode(call, kind, content_type,
                                  apply_patch(content_type, current, patch_doc, kind.schema),
                                  patch_doc, level, problems)

    d = store.update(call.context, call.info.namespace or None, call.info.name, patched,
                     call.info.subresource,
                     Manager(options.field_manager, "Update", call.info.subresource))
    return d.addCallback(lambda answer: responses.write_value(call, 200, answer[0]))


#: Upstream's maxJSONPatchOperations.
MAX_JSON_PATCH_OPERATIONS = 10000


def _json_patch_operations(patch_doc) -> list:
    """
    The operations of a JSON patch, checked as upstream's ``jsonpatch.DecodePatch``
    (Go's json.Unmarshal into ``[]Operation``) and its operation limit check it.
    """
    if patch_doc is None:
        return []  # Go unmarshals null into an empty patch: nothing to do
    if not isinstance(patch_doc, list):
        raise errors.bad_request(f"json: cannot unmarshal {gotext.json_kind(patch_doc)} "
                                 "into Go value of type jsonpatch.Patch")
    for operation in patch_doc:
        if operation is not None and not isinstance(operation, dict):
            raise errors.bad_request(f"json: cannot unmarshal {gotext.json_kind(operation)}"
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
        raise errors.bad_request(f"json: cannot unmarshal {gotext.json_kind(patch_doc)} into Go "
                                 "value of type map[string]interface {}")
    if content_type == MERGE_PATCH:
        return merge_patch(original, patch_doc)
    return strategic_merge(original, patch_doc, schema)


def server_side_apply(call, store, content_type: str = APPLY_PATCH):
    """
    Server-side apply (spec 4.7.2): create when absent (authorized as create), otherwise a
    patch merging by field ownership; 409 on conflicts unless ``force``.
    """
    kind = call.kind
    options = _options(call, apply=True)
    codec = _cbor if content_type == APPLY_CBOR else _yaml
    try:
        value, problems = fieldvalidation.parse(codec, read_body(call))
    except CodecError as e:
        raise errors.bad_request(f"error decoding the apply configuration: {e}") from None
    call.context.audit_request(value, has_object_meta=False)
    if not isinstance(value, dict):
        raise errors.bad_request("an apply configuration must be an object")
    for field, expected in (("apiVersion", kind.api_version), ("kind", kind.kind)):
        if not value.get(field):
            raise errors.bad_request(f"{field} must be set in an apply configuration")
        if value[field] != expected:
            raise errors.bad_request(f'{field} "{value[field]}" does not match the expected '
                                     f'"{expected}"')
    undeclared.check(kind, value)
    try:
        applied = kind.schema.decode(value, "", DecodeContext())
    except DecodeError as e:
        raise errors.bad_request(f'{kind.kind} in version "{kind.version}" cannot be handled '
                                 f"as a {kind.kind}: {e}") from None
    # applyPatcher strict-decodes the configuration again for its repeated keys
    # (sigs.k8s.io/yaml.UnmarshalStrict's words), once the merge has not failed.
    problems = [f"error converting YAML to JSON: {problem}" for problem in problems]
    meta = applied.setdefault("metadata", {})
    if meta.get("name", call.info.name) != call.info.name:
        raise errors.bad_request(f"the name of the object ({meta['name']}) does not match "
                                 f"the name on the URL ({call.info.name})")
    meta["name"] = call.info.name
    if kind.namespaced:
        meta.setdefault("namespace", call.info.namespace)
    manager = Manager(options.field_manager, "Apply", call.info.subresource)

    def merged(current):
        # Field ownership decides the merge; managedFields are the apply's own record.
        result = apply_configuration(kind, current, applied, manager, options.force,
                                     store.now())
        fieldvalidation.report(call, options.field_validation, problems, errors.bad_request,
                               lambda found: f"error strict decoding YAML: {found[0]}")
        return result

    d = store.update(call.context, call.info.namespace or None, call.info.name, merged,
                     call.info.subresource, force_allow_create=True)
    return d.addCallback(lambda answer: responses.write_value(
        call, 201 if answer[1] else 200, answer[0]))
