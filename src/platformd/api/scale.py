"""
A custom resource's ``scale`` subresource: ``autoscaling/v1`` Scale, read from and
written to the object at its definition's ``specReplicasPath``, ``statusReplicasPath``
and ``labelSelectorPath`` (upstream's ``customresource.ScaleREST``).  GET answers the
Scale; PUT and PATCH (JSON patch, merge patch; strategic merge as merge: Scale holds no
list) change the object's replicas through its generic store, conditional on the Scale's
``resourceVersion`` when it names one.
"""

from __future__ import annotations

from platformd import errors
from platformd.api import responses, writeoptions
from platformd.api.body import decode_object, read_body
from platformd.api.patchfields import JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH
from platformd.api.writes import apply_patch
from platformd.apiextensions import jsonpath
from platformd.codecs.interface import CodecError
from platformd.codecs.jsoncodec import JSONCodec
from platformd.model import fielderrors as fe
from platformd.model.schema import INT32, STRING, DecodeContext, DecodeError, Prop, Struct
from platformd.patch.managedfields import Manager
from platformd.registry.resource import ResourceType

_json = JSONCodec()
PREFIX = "io.platform.api.autoscaling.v1"

SCALE = ResourceType(
    group="autoscaling", version="v1", kind="Scale", plural="scale", singular="scale",
    namespaced=True, fields={
        "spec": Prop(Struct(f"{PREFIX}.ScaleSpec", {
            "replicas": Prop(INT32, "replicas is the desired number of instances for the "
                             "scaled object."),
        }, doc="ScaleSpec describes the attributes of a scale subresource."),
            "spec defines the behavior of the scale."),
        "status": Prop(Struct(f"{PREFIX}.ScaleStatus", {
            "replicas": Prop(INT32, "replicas is the actual number of observed instances of "
                             "the scaled object.", True),
            "selector": Prop(STRING, "selector is the label query over pods that should match "
                             "the replicas count."),
        }, doc="ScaleStatus represents the current status of a scale subresource."),
            "status is the current status of the scale."),
    }, doc="Scale represents a scaling request for a resource.", definition_prefix=PREFIX)


def to_scale(kind, obj: dict) -> dict:
    """The Scale of ``obj`` (upstream's ``scaleFromCustomResource``)."""
    paths = kind.scale or {}
    replicas = jsonpath.first(obj, jsonpath.parse(paths.get("specReplicasPath") or ".spec"))
    status = jsonpath.first(obj, jsonpath.parse(paths.get("statusReplicasPath") or ".status"))
    selector = None
    if paths.get("labelSelectorPath"):
        selector = jsonpath.first(obj, jsonpath.parse(paths["labelSelectorPath"]))
    meta = obj.get("metadata") or {}
    out_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                     "creationTimestamp") if meta.get(k)}
    status_value: dict = {"replicas": status if isinstance(status, int) else 0}
    if isinstance(selector, str) and selector:
        status_value["selector"] = selector
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": out_meta,
            "spec": {"replicas": replicas} if isinstance(replicas, int) and replicas else {},
            "status": status_value}


def _with_replicas(kind, current: dict, scale: dict) -> dict:
    """``current`` with the Scale's replicas at ``specReplicasPath``."""
    replicas = (scale.get("spec") or {}).get("replicas") or 0
    if replicas < 0:
        raise errors.invalid("Scale", "autoscaling", (current.get("metadata") or {}).get("name", ""),
                             [fe.invalid("spec.replicas", replicas,
                                         "must be greater than or equal to 0")])
    jsonpath.put(current, jsonpath.parse(kind.scale["specReplicasPath"]), replicas)
    wanted = (scale.get("metadata") or {}).get("resourceVersion")
    meta = current.setdefault("metadata", {})
    if wanted:
        meta["resourceVersion"] = wanted
    else:
        meta.pop("resourceVersion", None)
    return current


def serve(call, store, kind):
    info = call.info
    namespace = info.namespace or None
    if info.verb == "get":
        entry = store.get(namespace, info.name)
        return responses.write_value(call, 200, to_scale(kind, entry.obj))
    options = writeoptions.parse(call)
    call.context.dry_run = options.dry_run
    call.context.field_manager = options.field_manager
    manager = Manager(options.field_manager, "Update", "scale")
    if info.verb == "update":
        scale = decode_object(call, options.field_validation, SCALE.schema, "Scale",
                              "autoscaling/v1")

        def updated(current):
            return _with_replicas(kind, current, scale)
    else:
        content_type = (call.request.getHeader(b"content-type") or b"").decode("latin-1")
        content_type = content_type.split(";")[0].strip().lower()
        if content_type not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH):
            raise errors.StatusError(
                415, "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types "
                f"include: {JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_PATCH}")
        try:
            patch_doc = _json.decode(read_body(call))
        except CodecError as e:
            raise errors.bad_request(f"error decoding patch: {e}") from None
        patch_type = MERGE_PATCH if content_type == STRATEGIC_PATCH else content_type

        def updated(current):
            patched = apply_patch(patch_type, to_scale(kind, current), patch_doc, SCALE.schema)
            try:
                scale = SCALE.schema.decode(patched, "", DecodeContext())
            except DecodeError as e:
                raise errors.bad_request(str(e)) from None
            return _with_replicas(kind, current, scale)
    d = store.update(call.context, namespace, info.name, updated, "scale", manager)
    return d.addCallback(lambda answer: responses.write_value(call, 200,
                                                              to_scale(kind, answer[0])))
