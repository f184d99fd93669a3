"""
Escalation prevention: the RBAC registry's own check of a write, upstream's policy-based
storages (``pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/
policybased/storage.go`` with ``pkg/registry/rbac/escalation_check.go`` and
``ConfirmNoEscalation`` in ``pkg/registry/rbac/validation/rule.go``).

Upstream wraps the four kinds' REST storages: their Create and Update check the object
the handler hands them, so after mutating admission and before the storage's strategy
and validating admission.  Here the generic store calls the kind's ``IWriteCheck``
(``registry/interfaces.py``; ``compose`` gives the four RBAC stores an
``EscalationCheck``) at the same place relative to admission: after mutating admission
and the kind's own validation, before the first validating plugin.  It is no admission
plugin: no flag turns it off and the admission metrics do not count it.

A writer may create or update (update, patch, apply) a Role or ClusterRole only if it
already holds every permission the object grants, in the object's namespace (cluster
scope for a ClusterRole), or is allowed the ``escalate`` verb on it; a ClusterRole with
an ``aggregationRule`` (new or old) needs every permission (``*`` on everything).  It may
create or update a RoleBinding or ClusterRoleBinding only if it holds every permission
of the referenced role in the binding's namespace, or is allowed the ``bind`` verb on
that role.  Members of ``system:masters`` may do all of it; so may an update that
changes only what the garbage collector changes (owner references, finalizers).

The ``escalate`` and ``bind`` questions go to the request's own authorizer chain
(``RequestContext.authorizer``) and may be answered later (a webhook): the check then
answers with a Deferred.  The writer's permissions are read from the ``RBACIndex`` with
upstream's registry wording for roles that do not exist.

Refusals are 403 with upstream's message, byte for byte::

    roles.rbac.authorization.platform.io "r" is forbidden: user "jane" (groups=["devs"
    "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
    {APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}
"""

from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from zope.interface import implementer

from platformd import errors
from platformd.admission.interfaces import UPDATE
from platformd.auth.interfaces import ALLOW, Attributes
from platformd.auth.rbac.covers import covers, missing_descriptions
from platformd.auth.rbac.index import (
    CLUSTER_ROLE, CLUSTER_ROLES, GROUP, ROLE, ROLES, RBACIndex, role_error,
)
from platformd.auth.rbac.resolver import rules_for
from platformd.auth.rbac.subjects import PRIVILEGED_GROUP
from platformd.goformat.gotext import aggregate, quote, quote_list
from platformd.registry import rbac as rbac_kinds
from platformd.registry.interfaces import IWriteCheck
from platformd.requestinfo import RequestInfo
from platformd.util.deferreds import then
from platformd.util.ratelog import RateLimitedLog, origin

log = Logger()

#: The kinds checked, by ``gvr``: the roles (``escalate``), the bindings (``bind``).
_ROLE_KINDS = frozenset({rbac_kinds.ROLE.gvr, rbac_kinds.CLUSTER_ROLE.gvr})
_BINDING_KINDS = frozenset({rbac_kinds.ROLE_BINDING.gvr, rbac_kinds.CLUSTER_ROLE_BINDING.gvr})
#: What the URL of a role write names (its request info's resource).
_ROLE_RESOURCES = frozenset({ROLES, CLUSTER_ROLES})
#: What using an aggregationRule needs (upstream's ``fullAuthority``).
FULL_AUTHORITY = ({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                  {"verbs": ["*"], "nonResourceURLs": ["*"]})
AGGREGATION_REFUSED = "must have cluster-admin privileges to use the aggregationRule"
#: The fields only the garbage collector changes (upstream's ``IsOnlyMutatingGCFields``).
_GC_FIELDS = ("ownerReferences", "finalizers", "selfLink")


def checks(index: RBACIndex) -> dict:
    """The RBAC kinds' write check, by ``gvr``: what ``compose`` gives their stores."""
    check = EscalationCheck(index)
    return {gvr: check for gvr in _ROLE_KINDS | _BINDING_KINDS}


@implementer(IWriteCheck)
class EscalationCheck:
    """Refuses RBAC writes that would grant what the writer does not hold (see module)."""

    def __init__(self, index: RBACIndex):
        self.index = index
        #: An authorizer failing fails every RBAC write that asks it: one traceback a
        #: minute per bug.
        self._failures = RateLimitedLog(log)

    def check(self, a):
        kind = a.kind
        gvr = getattr(kind, "gvr", None)
        if a.subresource or (gvr not in _ROLE_KINDS and gvr not in _BINDING_KINDS):
            return None
        user = a.context.user if a.context is not None else None
        if user is not None and PRIVILEGED_GROUP in user.groups:
            return None  # upstream's EscalationAllowed
        if a.operation == UPDATE and only_gc_fields(a.obj, a.old):
            return None
        if gvr in _ROLE_KINDS:
            return then(self._escalate_authorized(a, user), self._check_role, a, user)
        role_ref = a.obj.get("roleRef") or {}
        namespace = a.namespace if gvr == rbac_kinds.ROLE_BINDING.gvr else ""
        return then(self._bind_authorized(a, user, role_ref, namespace), self._check_binding,
                    a, user, role_ref, namespace)

    # -- roles -------------------------------------------------------------------------

    def _escalate_authorized(self, a, user):
        """Upstream's ``RoleEscalationAuthorized``: ``escalate`` on what the URL names."""
        info = getattr(a.context, "info", None)
        if (info is None or not info.is_resource or info.group != GROUP
                or info.resource not in _ROLE_RESOURCES):
            return False
        return self._ask(a, user, RequestInfo(
            True, "", "escalate", "apis", GROUP, "*", info.resource, "", info.namespace,
            info.name))

    def _check_role(self, allowed: bool, a, user) -> None:
        if allowed:
            return
        plural = a.kind.plural
        name = _name(a.obj)
        self._confirm(user, a.namespace, a.obj.get("rules") or (), plural, name)
        if a.kind.gvr == rbac_kinds.CLUSTER_ROLE.gvr and (_aggregates(a.obj)
                                                          or _aggregates(a.old)):
            if not covers(self._owner_rules(user, "")[0], FULL_AUTHORITY)[0]:
                raise errors.forbidden(plural, GROUP, name, AGGREGATION_REFUSED)

    # -- bindings ----------------------------------------------------------------------

    def _bind_authorized(self, a, user, role_ref: dict, namespace: str):
        """Upstream's ``BindingAuthorized``: ``bind`` on the referenced role."""
        resource = {CLUSTER_ROLE: CLUSTER_ROLES, ROLE: ROLES}.get(role_ref.get("kind", ""))
        if resource is None:
            return False
        return self._ask(a, user, RequestInfo(
            True, "", "bind", "apis", role_ref.get("apiGroup", ""), "", resource, "",
            namespace, role_ref.get("name", "")))

    def _check_binding(self, allowed: bool, a, user, role_ref: dict, namespace: str) -> None:
        if allowed:
            return
        kind, role_name = role_ref.get("kind", ""), role_ref.get("name", "")
        role = self.index.lookup_role(kind, role_name, namespace)
        if role is None:
            if kind in (ROLE, CLUSTER_ROLE):
                raise errors.not_found(kind.lower() + "s", GROUP, role_name)
            raise errors.internal(role_error(kind, role_name))
        self._confirm(user, namespace, role.rules, a.kind.plural, _name(a.obj))

    # -- shared ------------------------------------------------------------------------

    def _ask(self, a, user, info: RequestInfo):
        """Whether the request's authorizer allows ``info`` (a bool or a Deferred of one);
        an authorizer that fails is a no, as upstream logs and refuses."""
        authorizer = getattr(a.context, "authorizer", None)
        if authorizer is None or user is None:
            return False
        try:
            decision = authorizer.authorize(Attributes(user, info))
        except Exception:
            return self._refused(None, user, info)
        if isinstance(decision, Deferred):
            return decision.addCallbacks(_allowed, self._refused, errbackArgs=(user, info))
        return _allowed(decision)

    def _refused(self, failure, user, info) -> bool:
        """An authorizer that failed (``failure``, or the exception being handled)."""
        self._failures.failure(f"RBAC: asking whether {user.name} may {info.verb} failed",
                               failure, key=origin(failure))
        return False

    def _owner_rules(self, user, namespace: str) -> tuple:
        return rules_for(self.index, user, namespace, plural=True)

    def _confirm(self, user, namespace: str, rules, plural: str, name: str) -> None:
        """Upstream's ``ConfirmNoEscalation``, refused as ``NewForbidden``."""
        if user is None:
            raise errors.forbidden(plural, GROUP, name, "no user on context")
        owner_rules, resolution_errors = self._owner_rules(user, namespace)
        covered, missing = covers(owner_rules, rules)
        if covered:
            return
        message = escalation_message(user, missing, resolution_errors)
        raise errors.forbidden(plural, GROUP, name, message)


def escalation_message(user, missing, resolution_errors=()) -> str:
    """ConfirmNoEscalation's message for the ``missing`` (broken-down) rules."""
    message = (f"user {quote(user.name)} (groups={quote_list(user.groups)}) is attempting to "
               "grant RBAC permissions not currently held:\n"
               + "\n".join(missing_descriptions(missing)))
    if resolution_errors:
        # Go's %v of a []error holding the one aggregate error.
        message += f"; resolution errors: [{aggregate(resolution_errors)}]"
    return message


def only_gc_fields(new, old) -> bool:
    """
    Upstream's ``IsOnlyMutatingGCFields``: ``new`` differs from ``old`` at most in the
    owner references, finalizers and self link, compared as ``Semantic.DeepEqual``
    (missing and empty values alike).
    """
    if old is None or new is None:
        return False
    stomped = dict(new)
    meta = dict(new.get("metadata") or {})
    old_meta = old.get("metadata") or {}
    for field in _GC_FIELDS:
        if field in old_meta:
            meta[field] = old_meta[field]
        else:
            meta.pop(field, None)
    stomped["metadata"] = meta
    return _semantic(stomped) == _semantic(old)


_ZERO: tuple = (None, "", [], {}, False)


def _semantic(value):
    """``value`` with empty and zero dict entries dropped, recursively."""
    if isinstance(value, dict):
        # Go's zero values (nil, "", empty, false, 0) and absence compare equal.
        return {k: _semantic(v) for k, v in value.items() if v not in _ZERO}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _allowed(decision) -> bool:
    return decision.verdict == ALLOW


def _name(obj) -> str:
    return ((obj or {}).get("metadata") or {}).get("name", "")


def _aggregates(obj) -> bool:
    return bool(((obj or {}).get("aggregationRule") or {}).get("clusterRoleSelectors"))
