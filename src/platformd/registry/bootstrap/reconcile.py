"""
Reconciling the bootstrap policy at start (upstream's RBAC ``PostStartHook``,
``pkg/registry/rbac/rest/storage_rbac.go``, with ``pkg/registry/rbac/reconciliation``):

- a missing ClusterRole or ClusterRoleBinding is created;
- an existing one whose ``rbac.authorization.platform.io/autoupdate`` annotation is
  ``"false"`` is left alone (protected: a user's edits are kept);
- otherwise the expected labels and annotations are added where absent (the existing
  values win), a ClusterRole gains the expected rules it does not already allow (the
  uncovered atoms of ``rules.uncovered``, appended; nothing is removed) and the expected
  aggregation selectors it lacks (an aggregation rule the bootstrap role does not have is
  removed, as upstream does), and a ClusterRoleBinding gains its missing subjects;
- a ClusterRoleBinding whose roleRef differs from the expected one is deleted (on its
  UID) and created again, as upstream recreates it (roleRef is immutable).

Nothing is written for an object already reconciled, so a second run writes nothing.
Writes go through the generic stores (admission, validation, managedFields as
``platformd``); a write that loses a race is decided again from the current object, a
few times.  A failure is logged and the next object reconciled (upstream: "try to create
as many as you can"); the run's ``Result`` list says what happened to each object.
"""

from __future__ import annotations

import copy
from typing import Optional

import attrs
from twisted.internet.defer import inlineCallbacks, returnValue
from twisted.logger import Logger

from platformd import errors
from platformd.context import internal
from platformd.patch.managedfields import Manager
from platformd.registry import rbac
from platformd.registry.bootstrap.policy import (
    AUTOUPDATE_ANNOTATION, cluster_role_bindings, cluster_roles, namespace_role_bindings,
    namespace_roles,
)
from platformd.registry.bootstrap.rules import uncovered

log = Logger()

CREATE = "create"
UPDATE = "update"
RECREATE = "recreate"
NONE = "none"
FAILED = "failed"

#: How often one object is read and decided again after a lost race (upstream: 3).
ATTEMPTS = 4
#: The field manager of the server's own bootstrap writes (upstream: kube-apiserver).
MANAGER = Manager("platformd", "Update")


@attrs.frozen
class Result:
    """What reconciling one object did (``operation``: create, update, recreate, none, failed)."""

    kind: str
    name: str
    operation: str
    #: The existing object opted out (autoupdate "false"); ``operation`` says what would
    #: have been done.
    protected: bool = False


@attrs.define
class Decision:
    """What to do with one existing object: ``obj`` is the object to write."""

    obj: dict
    operation: str = NONE
    protected: bool = False


def _merge_metadata(decision: Decision, expected: dict) -> None:
    """Expected labels and annotations added where absent (upstream's ``merge``)."""
    meta = decision.obj["metadata"]
    for field in ("labels", "annotations"):
        existing = meta.get(field) or {}
        merged = {**(expected["metadata"].get(field) or {}), **existing}
        if merged != existing:
            meta[field] = merged
            decision.operation = UPDATE


def _protected(obj: dict) -> bool:
    annotations = obj["metadata"].get("annotations") or {}
    return annotations.get(AUTOUPDATE_ANNOTATION) == "false"


def reconcile_role(existing: dict, expected: dict) -> Decision:
    """Upstream's ``computeReconciledRole`` in the union mode (extra rules are kept)."""
    decision = Decision(existing, protected=_protected(existing))
    _merge_metadata(decision, expected)
    missing = uncovered(existing.get("rules"), expected.get("rules"))
    if missing:
        existing["rules"] = list(existing.get("rules") or ()) + missing
        decision.operation = UPDATE
    wanted_rule = expected.get("aggregationRule")
    have_rule = existing.get("aggregationRule")
    if wanted_rule is None:
        if have_rule is not None:
            del existing["aggregationRule"]
            decision.operation = UPDATE
        return decision
    have = list((have_rule or {}).get("clusterRoleSelectors") or ())
    lacking = [s for s in wanted_rule.get("clusterRoleSelectors") or () if s not in have]
    if lacking:
        existing["aggregationRule"] = {**(have_rule or {}), "clusterRoleSelectors": have + lacking}
        decision.operation = UPDATE
    return decision


def _subject_key(subject: dict) -> tuple:
    return tuple(subject.get(f) or "" for f in ("kind", "apiGroup", "name", "namespace"))


def reconcile_binding(existing: dict, expected: dict) -> Decision:
    """Upstream's ``computeReconciledRoleBinding`` in the union mode (extra subjects kept)."""
    protected = _protected(existing)
    if existing.get("roleRef") != expected.get("roleRef"):
        return Decision(expected, RECREATE, protected)
    decision = Decision(existing, protected=protected)
    _merge_metadata(decision, expected)
    have = {_subject_key(s) for s in existing.get("subjects") or ()}
    missing = []
    for subject in expected.get("subjects") or ():
        if _subject_key(subject) not in have:
            have.add(_subject_key(subject))
            missing.append(subject)
    if missing:
        existing["subjects"] = list(existing.get("subjects") or ()) + missing
        decision.operation = UPDATE
    return decision


@inlineCallbacks
def _reconcile_one(store, ctx, expected: dict, decide):
    """Deferred[Result]: create, update or recreate ``expected`` in ``store``."""
    kind = store.kind.kind
    name = expected["metadata"]["name"]
    namespace = expected["metadata"].get("namespace")  # a Role's or RoleBinding's
    key = store.kind.storage_key(namespace, name)
    for _attempt in range(ATTEMPTS):
        current = store.cache.get(key)
        try:
            if current is None:
                yield store.create(ctx, copy.deepcopy(expected), namespace, MANAGER)
                returnValue(Result(kind, name, CREATE))
            decision = decide(current.mutable(), copy.deepcopy(expected))
            if decision.protected or decision.operation == NONE:
                if decision.protected and decision.operation != NONE:
                    log.warn("skipped reconcile-protected {kind} {name} ({operation} needed)",
                             kind=kind, name=name, operation=decision.operation)
                returnValue(Result(kind, name, decision.operation, decision.protected))
            if decision.operation == RECREATE:
                uid = current.obj["metadata"].get("uid")
                try:
                    yield store.delete(ctx, namespace, name, {"preconditions": {"uid": uid}})
                except errors.StatusError as e:
                    if e.code != 404:
                        raise
                yield store.create(ctx, decision.obj, namespace, MANAGER)
            else:
                yield store.update(ctx, namespace, name, lambda _current: decision.obj,
                                   manager=MANAGER)
            returnValue(Result(kind, name, decision.operation))
        except errors.StatusError as e:
            if e.code not in (404, 409):  # conflict, already exists, gone: decide again
                raise
    raise errors.conflict(store.kind.plural, store.kind.group, name,
                          "the object kept changing while it was reconciled")


@inlineCallbacks
def reconcile_bootstrap_policy(stores, ctx=None, roles: Optional[list] = None,
                               bindings: Optional[list] = None):
    """
    Deferred[list of Result]: reconcile every bootstrap ClusterRole, then every
    ClusterRoleBinding (``cluster_roles()`` and ``cluster_role_bindings()``
    unless given), through ``stores`` (the generic stores by ``kind.gvr``) as ``ctx``
    (default: ``context.internal()``).  Never fails: an object that cannot be
    reconciled is logged and reported as ``failed``.
    """
    ctx = ctx if ctx is not None else internal()
    work = [(stores[rbac.CLUSTER_ROLE.gvr], reconcile_role, r)
            for r in (roles if roles is not None else cluster_roles())]
    work += [(stores[rbac.CLUSTER_ROLE_BINDING.gvr], reconcile_binding, b)
             for b in (bindings if bindings is not None else cluster_role_bindings())]
    if roles is None and bindings is None:
        # Issue 32: the namespaced ones (upstream's namespace_policy.go), roles first.
        work += [(stores[rbac.ROLE.gvr], reconcile_role, r) for r in namespace_roles()]
        work += [(stores[rbac.ROLE_BINDING.gvr], reconcile_binding, b)
                 for b in namespace_role_bindings()]
    results = []
    for store, decide, expected in work:
        try:
            result = yield _reconcile_one(store, ctx, expected, decide)
        except Exception:
            log.failure("unable to reconcile {kind} {name}", kind=store.kind.kind,
                        name=expected["metadata"]["name"])
            result = Result(store.kind.kind, expected["metadata"]["name"], FAILED)
        results.append(result)
    returnValue(results)
