"""
Binding (core ``v1``): a pod bound to a node, by a POST to
``/api/v1/namespaces/{ns}/pods/{name}/binding`` (what a scheduler does); nothing is
stored but the pod's ``spec.nodeName``.

Upstream's ``BindingREST`` (``pkg/registry/core/pod/storage/storage.go``, v1.36):

* the body's name must be the URL's (400 ``name in URL does not match name in Binding
  object``);
* ``ValidatePodBinding``: ``target.kind`` empty or ``Node``, ``target.name`` required —
  returned upstream as a plain aggregate error, so a **500** with no reason
  (``target.kind: Unsupported value: "Pod": supported values: "Node", "<empty>"``);
* the validating admission plugins (``createValidation``; the mutating ones ran on the
  Binding, a create of ``pods/binding``, before any of this: ``api/reviews.py``);
* the pod is changed in one compare-and-swap step, without the pod's validation or
  admission (the registry's raw ``GuaranteedUpdate``), on the preconditions of the body's
  ``metadata.uid`` and ``metadata.resourceVersion`` when given (409 with storage's
  words); a terminating pod is 409 ``Operation cannot be fulfilled on pods/binding "p":
  pod p is being deleted, cannot be assigned to a host``, a bound one 409 ``... pod p is
  already assigned to node "n"``, a missing one 404;
* ``spec.nodeName`` is set, the body's annotations merged into the pod's, and the
  ``PodScheduled`` condition set True; the answer is a ``Success`` Status, 201.

``dryRun`` decides everything and writes nothing.  The legacy collection
``POST /api/v1/namespaces/{ns}/bindings`` does the same for the pod the body names
(``LegacyBindingREST``; no name: 400 ``Name parameter required.``), admitted as a
create of ``bindings``.
"""

from __future__ import annotations

from platformd import errors
from platformd.goformat.gotext import aggregate
from platformd.model import fielderrors as fe
from platformd.model.schema import Prop
from platformd.registry.kinds.coreshapes import (
    OBJECT_REFERENCE, OBJECT_REFERENCE_PRESENCE, PREFIX, PROTO,
)
from platformd.registry.kinds.eviction import check_names
from platformd.registry.outcomes import Write
from platformd.registry.resource import ResourceType
from platformd.util.deferreds import then

PODS = ("", "v1", "pods")


def _validate(obj: dict) -> list:
    """``ValidatePodBinding``."""
    target = obj.get("target") or {}
    causes = []
    kind = target.get("kind", "")
    if kind and kind != "Node":
        causes.append(fe.not_supported("target.kind", kind, ("Node", "<empty>")))
    if not target.get("name"):
        causes.append(fe.required("target.name"))
    return causes


def _storage_error(key: str, why: str) -> str:
    """apiserver's ``StorageError.Error()`` of an invalid-object (precondition) error."""
    return (f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
            f"AdditionalErrorMsg: {why}")


def _update_condition(conditions: list, now: str) -> None:
    """``podutil.UpdatePodCondition`` with PodScheduled True."""
    for i, old in enumerate(conditions):
        if old.get("type") == "PodScheduled":
            stamp = old.get("lastTransitionTime") if old.get("status") == "True" else now
            new = {"type": "PodScheduled", "status": "True",
                   "lastTransitionTime": stamp or now}
            if old.get("lastProbeTime"):
                new["lastProbeTime"] = old["lastProbeTime"]
            conditions[i] = new
            return
    conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": now})


def _bind(context, obj: dict, server, validate):
    """``pods/{name}/binding``: ``BindingREST.Create``."""
    namespace, name = check_names(obj["metadata"], context, "Binding")
    return _assign(context, obj, server, namespace, name, validate)


def _bind_named_in_body(context, obj: dict, server, validate):
    """``bindings``: ``LegacyBindingREST``, the pod named by the body."""
    return _assign(context, obj, server, context.info.namespace,
                   obj["metadata"].get("name", ""), validate)


def _assign(context, obj: dict, server, namespace: str, name: str, validate):
    """``validate``: the validating admission, after the Binding's own validation (its
    ``createValidation``)."""
    causes = _validate(obj)
    if causes:
        raise errors.StatusError(500, "", aggregate(f"{c.field}: {c.message}" for c in causes))
    if not name:
        raise errors.bad_request("Name parameter required.")
    return then(validate(), lambda _: _assigned(context, obj, server, namespace, name))


def _assigned(context, obj: dict, server, namespace: str, name: str):
    meta = obj["metadata"]
    store = server.stores[PODS]
    key = store.kind.storage_key(namespace, name)
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    node = obj["target"]["name"]
    annotations = meta.get("annotations") or {}

    def assign(current):
        if current is None:
            raise errors.not_found("pods", "", name)
        pod = current.mutable()
        pod_meta = pod["metadata"]
        why = None
        if uid and uid != pod_meta.get("uid"):
            why = (f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                   f"{pod_meta.get('uid', '')}")
        elif version and version != str(current.revision):
            why = (f"Precondition failed: ResourceVersion in precondition: {version}, "
                   f"ResourceVersion in object meta: {current.revision}")
        if why is not None:
            raise errors.conflict("pods", "", name, _storage_error(key, why))
        if pod_meta.get("deletionTimestamp"):
            raise errors.conflict("pods/binding", "", name, f"pod {name} is being deleted, "
                                                            "cannot be assigned to a host")
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            raise errors.conflict("pods/binding", "", name,
                                  f'pod {name} is already assigned to node "{bound}"')
        pod.setdefault("spec", {})["nodeName"] = node
        pod_meta.setdefault("annotations", {}).update(annotations)
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        _update_condition(conditions, store.now())
        return Write(pod)

    return then(store.guaranteed_update(context, key, assign),
                lambda _: {"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Success", "code": 201})


#: The Protobuf presence of Binding's message (registered with the pods' kind).
PRESENCE = {PROTO + "Binding": "metadata target", **{
    PROTO + name: fields for name, fields in OBJECT_REFERENCE_PRESENCE.items()}}

_FIELDS = {
    "target": Prop(OBJECT_REFERENCE, "The target object that you want to bind to the "
                                     "standard object.", required=True),
}
_DOC = ("Binding ties one object to another; for example, a pod is bound to a node by a "
        "scheduler.")

#: ``pods/<name>/binding``.
SUBRESOURCE = ResourceType(
    group="", version="v1", kind="Binding", plural="binding", singular="",
    namespaced=True, fields=_FIELDS, doc=_DOC, definition_prefix=PREFIX, review=_bind,
    review_takes_server=True, presence=PRESENCE)

#: The legacy ``/api/v1/namespaces/{ns}/bindings`` collection: create only, the pod named
#: by the body (upstream's ``LegacyBindingREST``); discovered as ``bindings``.
KIND = ResourceType(
    group="", version="v1", kind="Binding", plural="bindings", singular="binding",
    namespaced=True, fields=_FIELDS, doc=_DOC, definition_prefix=PREFIX,
    review=_bind_named_in_body, review_takes_server=True, presence=PRESENCE)
