"""
Namespace (core ``v1``): a scope for names.  Its delete is its own (upstream's
``core/namespace/storage``): the first marks it Terminating and the namespace controller
(``controllers/namespaces.py``) empties it; it goes once its ``spec.finalizers`` are done
(``finalize``, upstream's ``FinalizeREST``: the namespace's own operation, so here, not
in the generic store every kind shares).
"""

from __future__ import annotations

import copy
from typing import Optional

from platformd import errors
from platformd.model import fielderrors as fe
from platformd.model.meta import dns_label
from platformd.model.schema import STRING, TIME, ListOf, Prop
from platformd.registry import deletion
from platformd.registry.deletion import FOREGROUND, ORPHAN
from platformd.registry.kinds.coreshapes import core_kind, struct
from platformd.registry.outcomes import Keep, Remove, Write
from platformd.registry.tables import AGE, NAME, Column

ACTIVE, TERMINATING = "Active", "Terminating"
#: The finalizer the namespace controller clears once a namespace is empty.
NAMESPACE_FINALIZER = "platform"
#: The label every namespace carries with its own name (upstream's
#: ``kubernetes.io/metadata.name``), so selectors can pick namespaces by name.
NAMESPACE_NAME_LABEL = "platform.io/metadata.name"

NAMESPACE_SPEC = struct("NamespaceSpec", {
    "finalizers": Prop(ListOf(STRING), "Finalizers that must be empty before the namespace is removed."),
}, "The desired state of a namespace.")

NAMESPACE_CONDITION = struct("NamespaceCondition", {
    "type": Prop(STRING, "Type of the condition.", required=True),
    "status": Prop(STRING, "True, False or Unknown.", required=True),
    "lastTransitionTime": Prop(TIME, "Last time the condition changed."),
    "reason": Prop(STRING, "One-word reason."),
    "message": Prop(STRING, "Human-readable details."),
}, "A condition of a namespace.")

NAMESPACE_STATUS = struct("NamespaceStatus", {
    "phase": Prop(STRING, "Active or Terminating."),
    "conditions": Prop(ListOf(NAMESPACE_CONDITION, "map", ("type",), "merge", "type"),
                       "The latest observations of the namespace's state."),
}, "The observed state of a namespace.")


def _default(obj: dict) -> None:
    meta = obj.setdefault("metadata", {})
    name = meta.get("name")
    if name:
        meta.setdefault("labels", {})[NAMESPACE_NAME_LABEL] = name
    status = obj.get("status") or {}
    if not status.get("phase"):  # SetDefaults_NamespaceStatus: a status write without one
        obj["status"] = {**status, "phase": ACTIVE}


def _prepare_for_create(obj: dict) -> None:
    obj["spec"] = {"finalizers": [NAMESPACE_FINALIZER]}
    obj["status"] = {"phase": ACTIVE}


def _prepare_for_update(new: dict, old: dict) -> None:
    """A namespace's spec (its finalizers) changes only through /finalize."""
    new["spec"] = copy.deepcopy(old.get("spec") or {})


def _validate_status_update(new: dict, old: dict) -> list:
    """
    Upstream's ``ValidateNamespaceStatusUpdate``: the phase follows
    ``deletionTimestamp``.  Whoever may write ``namespaces/status`` could otherwise mark
    a namespace Terminating, and the NamespaceLifecycle admission then refuses every
    create in it (``default`` included).
    """
    phase = (new.get("status") or {}).get("phase", "")
    if not new["metadata"].get("deletionTimestamp"):
        if phase != ACTIVE:
            return [fe.invalid("status.Phase", phase,
                               "may only be 'Active' if `deletionTimestamp` is empty")]
    elif phase != TERMINATING:
        return [fe.invalid("status.Phase", phase,
                           "may only be 'Terminating' if `deletionTimestamp` is not empty")]
    return []


def _extra_finalizers(obj: dict):
    """A namespace also waits for its ``spec.finalizers`` (its contents to go)."""
    return (obj.get("spec") or {}).get("finalizers") or ()


def delete_finalizers(options: dict, finalizers: list) -> list:
    """
    A namespace's finalizers on its first delete (core/namespace/storage ``Delete``):
    there ``orphanDependents=false`` asks for ``foregroundDeletion``.
    """
    orphan_dependents = options.get("orphanDependents")
    policy = options.get("propagationPolicy")
    have = set(finalizers)

    def should_have(name: str, when_orphan_dependents: bool, when_policy: str) -> bool:
        if orphan_dependents is not None:
            return bool(orphan_dependents) == when_orphan_dependents
        if policy is not None:
            return policy == when_policy
        return name in have

    new = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
    if should_have(ORPHAN, True, "Orphan"):
        new.append(ORPHAN)
    if should_have(FOREGROUND, False, "Foreground"):
        new.append(FOREGROUND)
    return new


def check_preconditions(obj: dict, preconditions: Optional[dict]) -> None:
    """The namespace registry's own precondition checks and words."""
    meta = obj["metadata"]
    for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        wanted = (preconditions or {}).get(field)
        if wanted is not None and wanted != meta.get(field):
            raise errors.conflict("namespaces", "", meta["name"],
                                  f"Precondition failed: {label} in precondition: {wanted}, "
                                  f"{label} in object meta: {meta.get(field, '')}")


def decide_delete(kind, current, options: dict, now: str):
    """
    The namespace registry's delete: the first marks it Terminating (the namespace
    controller then empties it), later ones answer with it until its
    ``spec.finalizers`` are done; then it goes as any object does.
    """
    obj = current.obj
    check_preconditions(obj, options.get("preconditions"))
    if obj["metadata"].get("deletionTimestamp"):
        if (obj.get("spec") or {}).get("finalizers"):
            return Keep(obj)
        return deletion.decide(kind, current, options, now)
    new = current.mutable()
    meta = new["metadata"]
    meta["deletionTimestamp"] = now
    new.setdefault("status", {})["phase"] = TERMINATING
    finalizers = delete_finalizers(options, list(meta.get("finalizers") or ()))
    if finalizers:
        meta["finalizers"] = finalizers
    return Write(new)


def finalize(store, ctx, name: str):
    """
    Deferred: remove the terminating namespace ``name`` whose contents are gone (the
    namespace controller, once it has emptied it), through ``store`` (the namespaces'
    ``GenericStore``): its ``spec.finalizers`` are done; ``metadata.finalizers`` still
    hold it back (it is then left as it is).
    """
    def try_finalize(current):
        if current is None or current.obj["metadata"].get("finalizers"):
            return Keep(None)
        return Remove(current.obj)

    return store.guaranteed_update(ctx, store.kind.storage_key(None, name), try_finalize)


COLUMNS = (
    NAME,
    Column("Status", "string", lambda obj, now: (obj.get("status") or {}).get("phase", ""),
           "The status of the namespace"),
    AGE,
)

KIND = core_kind("Namespace", "namespaces", False, {
    "spec": Prop(NAMESPACE_SPEC, "The behaviour of the namespace."),
    "status": Prop(NAMESPACE_STATUS, "The current status of the namespace (read-only here)."),
}, "Namespace provides a scope for names.", {
    "Namespace": "metadata spec status",
    "NamespaceCondition": "type status lastTransitionTime? reason? message?",
    "NamespaceSpec": "",
    "NamespaceStatus": "phase?",
}, name_rule=dns_label, short_names=("ns",), has_status=True, default=_default,
    validate_status_update=_validate_status_update,
    prepare_for_create=_prepare_for_create, prepare_for_update=_prepare_for_update,
    extra_finalizers=_extra_finalizers, decide_delete=decide_delete, columns=COLUMNS,
    # Namespaces are cluster-scoped: their conversion func knows no metadata.namespace.
    field_labels=("metadata.name", "status.phase"))
