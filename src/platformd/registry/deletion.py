"""
What a delete request does to an object's finalizers and metadata before it is removed
(spec 3), as upstream's generic store decides it (``registry/generic/registry/store.go``
``deletionFinalizersForGarbageCollection``, ``markAsDeleting``; ``rest/delete.go``
``BeforeDelete``); a namespace's own delete is in ``kinds/namespace.py``.

The garbage collector's finalizers: ``propagationPolicy=Orphan`` or
``orphanDependents=true`` asks for ``orphan``, ``Foreground`` for
``foregroundDeletion``; ``Background`` (or ``orphanDependents=false``) for neither and
takes them off.  Without either option an object keeps what it has.  An object left
with any finalizer is marked terminating and stays until a client removes them: this
server has no garbage collector to do that (``docs/api-conventions.md``).
"""

from __future__ import annotations

from typing import Optional

from platformd import errors
from platformd.registry.outcomes import Remove, Write

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


def _wants(options: dict, finalizers: list) -> tuple:
    """(orphan, foreground): which garbage-collector finalizers the object should have."""
    orphan_dependents = options.get("orphanDependents")
    policy = options.get("propagationPolicy")
    if orphan_dependents is not None:
        return bool(orphan_dependents), False
    if policy is not None:
        return policy == "Orphan", policy == "Foreground"
    for finalizer in finalizers:
        if finalizer in (ORPHAN, FOREGROUND):
            return finalizer == ORPHAN, finalizer == FOREGROUND
    return False, False


def gc_finalizers(options: dict, finalizers: list) -> Optional[list]:
    """
    The finalizers after the delete request, or None when they do not change: the
    others in their order, then ``orphan``, then ``foregroundDeletion`` (upstream's
    order).  Changes are judged as sets, as upstream's are.
    """
    orphan, foreground = _wants(options, finalizers)
    new = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
    if orphan:
        new.append(ORPHAN)
    if foreground:
        new.append(FOREGROUND)
    return None if set(new) == set(finalizers) else new


def mark_deleting(meta: dict, now: str) -> None:
    """upstream's ``markAsDeleting``: deletionTimestamp (kept if set), grace 0."""
    if not meta.get("deletionTimestamp") and (meta.get("generation") or 0) > 0:
        meta["generation"] += 1
    if not meta.get("deletionTimestamp"):
        meta["deletionTimestamp"] = now
    meta["deletionGracePeriodSeconds"] = 0


def check_preconditions(kind, obj: dict, preconditions: Optional[dict]) -> None:
    """
    ``BeforeDelete``'s precondition checks: 409 Conflict on the kind (not the resource:
    ``RoleBinding.rbac.authorization.platform.io``), with upstream's words.
    """
    if not preconditions:
        return
    meta = obj["metadata"]
    uid, rv = preconditions.get("uid"), preconditions.get("resourceVersion")
    if uid is not None and uid != meta.get("uid"):
        why = (f"the UID in the precondition ({uid}) does not match the UID in record "
               f"({meta.get('uid', '')}). The object might have been deleted and then recreated")
    elif rv is not None and rv != meta.get("resourceVersion"):
        why = (f"the ResourceVersion in the precondition ({rv}) does not match the "
               f"ResourceVersion in record ({meta.get('resourceVersion', '')}). The object "
               "might have been modified")
    else:
        return
    raise errors.conflict(kind.kind, kind.group, meta["name"], why)


def decide(kind, current, options: dict, now: str):
    """
    The generic store's delete (one step of its update loop): preconditions, the
    garbage collector's finalizers, then either mark the object terminating (it keeps
    finalizers) or remove it.
    """
    obj = current.obj
    check_preconditions(kind, obj, options.get("preconditions"))
    finalizers = list(obj["metadata"].get("finalizers") or ())
    changed = gc_finalizers(options, finalizers)
    if finalizers if changed is None else changed:
        new = current.mutable()
        if changed is not None:
            new["metadata"]["finalizers"] = changed
        mark_deleting(new["metadata"], now)
        return Write(new)
    return Remove(obj)

