"""
The RBAC objects in memory, kept current from the watch cache, with bindings indexed by
subject so that a request looks up only the bindings that can apply to its user.

``RBACIndex`` follows the four kinds' informers (``platformd/informing.py``'s
``IInformer``; ``cache/informers.py`` makes them): ``start()`` adds a handler to each
(the current objects arrive as adds, then every change), ``stop()`` removes them.  It
holds:

* roles by ``(namespace, name)`` and cluster roles by name, each with its rules as
  stored and compiled (``rules.Rule``);
* per scope (one for ClusterRoleBindings, one per namespace for RoleBindings) the
  bindings filed under each subject: by user name, by group name and by service
  account ``(namespace, name)`` (a service account subject without a namespace is
  filed under the binding's namespace);
* per scope, the bindings with a subject of an unknown kind, whose errors every
  evaluation in that scope reports (spec 2.2: the authorizer reports an error).

A user's bindings in a scope are then the union of a few dict lookups: its name, each
of its groups and, for ``system:serviceaccount:<ns>:<name>``, that service account.
Following the watch cache needs no import of it: ``from_informers`` asks
``informer(gvr)`` for each kind.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

import orjson
from twisted.logger import Logger

import platformd.auth.rbac.subjects as sj
from platformd.goformat.gotext import quote
from platformd.auth.rbac.rules import compile_rule
from platformd.informing import EventHandlers

log = Logger()

GROUP = "rbac.authorization.platform.io"
VERSION = "v1"
ROLES, CLUSTER_ROLES = "roles", "clusterroles"
ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS = "rolebindings", "clusterrolebindings"
ROLE, CLUSTER_ROLE = "Role", "ClusterRole"


class Role:
    """A Role's or ClusterRole's rules: as stored (dicts) and compiled."""

    __slots__ = ("rules", "compiled")

    def __init__(self, rules):
        self.rules = tuple(r for r in rules if isinstance(r, dict))
        self.compiled = tuple(compile_rule(r) for r in self.rules)


#: Subjects as the index keeps them, shared between bindings naming the same one
#: (``_shared_subject``), by their fields' values; at most ``_SUBJECTS_LIMIT``, then
#: forgotten all at once (the bindings keep theirs).
_SUBJECTS: dict = {}
_SUBJECTS_LIMIT = 65536
_SUBJECT_FIELDS = ("kind", "apiGroup", "name", "namespace")


def _intern(value):
    return sys.intern(value) if type(value) is str else value


def _shared_subject(subject: dict) -> dict:
    """
    ``subject`` or an equal one already kept: thousands of bindings name the same
    groups and service accounts, and a dict of short strings costs ~0.4 KiB.  Only
    subjects of strings and of the four fields are shared (never mutated: read-only
    here, as the bindings are).
    """
    values = tuple(subject.get(field) for field in _SUBJECT_FIELDS)
    if len(subject) != sum(v is not None for v in values) or \
            any(v is not None and type(v) is not str for v in values):
        return subject
    found = _SUBJECTS.get(values)
    if found is None:
        if len(_SUBJECTS) >= _SUBJECTS_LIMIT:
            _SUBJECTS.clear()
        found = _SUBJECTS[tuple(_intern(v) for v in values)] = {
            _intern(k): _intern(v) for k, v in subject.items()}
    return found


class Binding:
    """A RoleBinding (``namespace`` set) or ClusterRoleBinding, as the index keeps it."""

    __slots__ = ("key", "namespace", "role_kind", "role_name", "subjects",
                 "subject_errors", "scope_errors", "memo")

    def __init__(self, key: str, namespace: str, obj: dict):
        #: The watch cache's key (its string, shared), which ends in the name.
        self.key = key
        self.namespace = _intern(namespace)
        role_ref = obj.get("roleRef") or {}
        self.role_kind = _intern(role_ref.get("kind", ""))
        self.role_name = _intern(role_ref.get("name", ""))
        self.subjects = tuple(_shared_subject(s) for s in obj.get("subjects") or ()
                              if isinstance(s, dict))
        #: Errors of subjects that still name someone (a User or Group with a
        #: namespace): reported to the users they apply to.  (Empty: one shared tuple,
        #: as for ``scope_errors``: most bindings have none.)
        self.subject_errors: Sequence = ()
        #: Errors of subjects that name nobody (an unknown kind): reported scope-wide.
        self.scope_errors: Sequence = ()
        #: What readers derive from this version of the binding (the authorizer's
        #: decisions per subject), dropped with it; made when first needed.
        self.memo: Optional[dict] = None
        for subject in self.subjects:
            error = sj.subject_error(subject)
            if error is None:
                continue
            if subject.get("kind") in (sj.USER, sj.GROUP):
                self.subject_errors = [*self.subject_errors, (subject, error)]
            else:
                self.scope_errors = [*self.scope_errors, error]

    @property
    def name(self) -> str:
        """From the key: a string of its own per binding was ~0.6 MiB of 11,000."""
        return self.key.rsplit("/", 1)[1]

    @property
    def kind(self) -> str:
        return "RoleBinding" if self.namespace else "ClusterRoleBinding"

    def errors_for(self, user) -> list:
        return [error for subject, error in self.subject_errors
                if sj.applies_to(user, subject, self.namespace)]

    def first_subject(self, user) -> int:
        """The index of the first subject that applies to ``user`` (upstream's
        ``appliesTo``), or -1."""
        namespace = self.namespace
        for i, subject in enumerate(self.subjects):
            if sj.applies_to(user, subject, namespace):
                return i
        return -1

    def describe(self, subject_index: int) -> str:
        """
        Upstream's binding describers, naming the subject at ``subject_index`` (the
        first that applies): ``RoleBinding "name/ns" of Role "r" to User "jane"``.
        """
        subject = self.subjects[subject_index] if subject_index >= 0 else {}
        name = f"{self.name}/{self.namespace}" if self.namespace else self.name
        return (f"{self.kind} {quote(name)} of {self.role_kind} {quote(self.role_name)} to "
                f"{sj.describe(subject, self.namespace)}")


class Scope:
    """
    The bindings of one scope (cluster-wide, or one namespace) filed by subject.  A
    subject's bucket is its one binding itself, or a dict of its bindings by key once
    it has several: most users are named by one binding, and a dict of one costs
    ~0.2 KiB (2 MiB of 11,000 RoleBindings each naming its own user).
    """

    __slots__ = ("users", "groups", "service_accounts", "errors")

    def __init__(self):
        self.users: dict = {}
        self.groups: dict = {}
        self.service_accounts: dict = {}
        #: Binding key -> the binding, for bindings with scope-wide errors.
        self.errors: dict = {}

    def empty(self) -> bool:
        return not (self.users or self.groups or self.service_accounts or self.errors)

    def bindings_for(self, user):
        """The bindings filed under ``user``, each once."""
        buckets = []
        found = self.users.get(user.name)
        if found:
            buckets.append(found)
        groups = self.groups
        if groups:
            for group in user.groups:
                found = groups.get(group)
                if found:
                    buckets.append(found)
        if self.service_accounts and user.name.startswith(sj.SERVICE_ACCOUNT_PREFIX):
            for account in sj.service_accounts_of(user.name):
                found = self.service_accounts.get(account)
                if found:
                    buckets.append(found)
        if not buckets:
            return ()
        if len(buckets) == 1:
            found = buckets[0]
            return (found,) if type(found) is Binding else found.values()
        merged: dict = {}
        for bucket in buckets:
            if type(bucket) is Binding:
                merged[bucket.key] = bucket
            else:
                merged.update(bucket)
        return merged.values()

    def add(self, binding: Binding) -> None:
        for table, key in self._places(binding):
            bucket = table.get(key)
            if bucket is None or (type(bucket) is Binding and bucket.key == binding.key):
                table[key] = binding
            elif type(bucket) is Binding:
                table[key] = {bucket.key: bucket, binding.key: binding}
            else:
                bucket[binding.key] = binding
        if binding.scope_errors:
            self.errors[binding.key] = binding

    def remove(self, binding: Binding) -> None:
        for table, key in self._places(binding):
            bucket = table.get(key)
            if bucket is None:
                continue
            if type(bucket) is Binding:
                if bucket.key == binding.key:
                    del table[key]
                continue
            bucket.pop(binding.key, None)
            if len(bucket) == 1:
                table[key] = next(iter(bucket.values()))
            elif not bucket:
                del table[key]
        self.errors.pop(binding.key, None)

    def _places(self, binding: Binding):
        for subject in binding.subjects:
            kind = subject.get("kind")
            name = subject.get("name", "")
            if kind == sj.USER:
                yield self.users, name
            elif kind == sj.GROUP:
                yield self.groups, name
            elif kind == sj.SERVICE_ACCOUNT:
                namespace = sj.service_account_namespace(subject, binding.namespace)
                if namespace:
                    yield self.service_accounts, (namespace, name)


_NO_SCOPES: tuple = ()


class RBACIndex:
    """
    Roles, cluster roles and bindings from the four kinds' ``KindCache``s (see the
    module docstring).  Everything runs on the reactor thread, as the cache does.
    """

    def __init__(self, roles, cluster_roles, role_bindings, cluster_role_bindings):
        self._informers = {ROLES: roles, CLUSTER_ROLES: cluster_roles,
                        ROLE_BINDINGS: role_bindings,
                        CLUSTER_ROLE_BINDINGS: cluster_role_bindings}
        self._registrations: dict = {}
        self.roles: dict = {}
        self.cluster_roles: dict = {}
        self.bindings: dict = {}
        self.cluster_scope = Scope()
        self.namespaces: dict = {}

    @classmethod
    def from_informers(cls, informers) -> "RBACIndex":
        """Over ``cache.informers.Informers`` (its ``informer(gvr)`` for the four kinds)."""
        return cls(*(informers.informer((GROUP, VERSION, plural))
                     for plural in (ROLES, CLUSTER_ROLES, ROLE_BINDINGS,
                                    CLUSTER_ROLE_BINDINGS)))

    # -- following the cache -----------------------------------------------------------

    def start(self) -> None:
        """Take every object the informers hold, then follow their changes."""
        if self._registrations:
            return
        for plural, informer in self._informers.items():
            self._registrations[plural] = informer.add_handler(self._handlers(plural))

    def stop(self) -> None:
        for plural, registration in self._registrations.items():
            self._informers[plural].remove_handler(registration)
        self._registrations = {}

    def _handlers(self, plural: str) -> EventHandlers:
        return EventHandlers(on_add=lambda new: self._put(plural, new),
                             on_update=lambda old, new: self._put(plural, new),
                             on_delete=lambda old: self._drop(plural, old.key))

    def _put(self, plural: str, entry) -> None:
        try:
            obj = orjson.loads(entry.raw)
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            log.warn("RBAC: {key} does not decode; ignored", key=entry.key)
            self._drop(plural, entry.key)
            return
        namespace = entry.namespace or ""
        if plural == ROLES:
            self.roles[(namespace, entry.name)] = Role(obj.get("rules") or ())
        elif plural == CLUSTER_ROLES:
            self.cluster_roles[entry.name] = Role(obj.get("rules") or ())
        else:
            self._drop(plural, entry.key)
            binding = Binding(entry.key, namespace if plural == ROLE_BINDINGS else "", obj)
            self.bindings[entry.key] = binding
            self._scope_for_write(binding.namespace).add(binding)

    def _drop(self, plural: str, key: str) -> None:
        parts = key.split("/")
        if plural == ROLES:
            self.roles.pop((parts[3], parts[4]) if len(parts) == 5 else ("", parts[-1]), None)
        elif plural == CLUSTER_ROLES:
            self.cluster_roles.pop(parts[-1], None)
        else:
            binding = self.bindings.pop(key, None)
            if binding is not None:
                scope = self._scope(binding.namespace)
                if scope is not None:
                    scope.remove(binding)
                    if binding.namespace and scope.empty():
                        del self.namespaces[binding.namespace]

    def _scope(self, namespace: str) -> Optional[Scope]:
        return self.namespaces.get(namespace) if namespace else self.cluster_scope

    def _scope_for_write(self, namespace: str) -> Scope:
        scope = self._scope(namespace)
        if scope is None:
            scope = self.namespaces[namespace] = Scope()
        return scope

    # -- reading -----------------------------------------------------------------------

    def scopes(self, namespace: str) -> tuple:
        """The scopes whose bindings count in ``namespace`` ("" for cluster scope):
        ClusterRoleBindings always, that namespace's RoleBindings (spec 5.3)."""
        if namespace:
            scope = self.namespaces.get(namespace)
            if scope is not None:
                return (self.cluster_scope, scope)
        return (self.cluster_scope,)

    def role_of(self, binding: Binding) -> Optional[Role]:
        """The role ``binding`` refers to, or None (see ``role_error``)."""
        if binding.role_kind == CLUSTER_ROLE:
            return self.cluster_roles.get(binding.role_name)
        if binding.role_kind == ROLE:
            return self.roles.get((binding.namespace, binding.role_name))
        return None

    def lookup_role(self, kind: str, name: str, namespace: str) -> Optional[Role]:
        """The role a roleRef of ``kind`` and ``name`` in ``namespace`` refers to."""
        if kind == CLUSTER_ROLE:
            return self.cluster_roles.get(name)
        if kind == ROLE:
            return self.roles.get((namespace, name))
        return None


def role_error(kind: str, name: str, plural: bool = False) -> str:
    """
    Upstream's words for a roleRef that does not resolve.  The authorizer's lookups
    (informer listers) say ``clusterrole.rbac.authorization.platform.io "x" not found``;
    the escalation checks' lookups (the registries) name the resource in the plural,
    ``clusterroles.rbac...``.
    """
    if kind in (ROLE, CLUSTER_ROLE):
        resource = kind.lower() + ("s" if plural else "")
        return f'{resource}.{GROUP} "{name}" not found'
    return f"unsupported role reference kind: {quote(kind)}"
