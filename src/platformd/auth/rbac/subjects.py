"""
Who a binding's subject is (upstream's ``appliesToUser`` in
``pkg/registry/rbac/validation/rule.go`` and ``serviceaccount.MatchesUsername``), the
keys the index files a subject under, and what is wrong with a subject (spec 2.2, 7.4).

A ``User`` subject names a user, a ``Group`` one of the user's groups (the
authenticator adds ``system:authenticated``, ``system:unauthenticated``,
``system:serviceaccounts`` and ``system:serviceaccounts:<ns>`` to the user's groups), a
``ServiceAccount`` the user ``system:serviceaccount:<ns>:<name>``; a service account
subject without a namespace means the binding's own namespace (and, in a
ClusterRoleBinding, nobody).
"""

from __future__ import annotations

from typing import Optional

from platformd.goformat.gotext import quote

USER, GROUP, SERVICE_ACCOUNT = "User", "Group", "ServiceAccount"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
#: Upstream's ``user.SystemPrivilegedGroup``.
PRIVILEGED_GROUP = "system:masters"


def service_accounts_of(username: str) -> tuple:
    """
    Every ``(namespace, name)`` whose service account ``username`` is, as
    ``MatchesUsername`` would answer: one for ``system:serviceaccount:ns:name`` (names
    with more colons split at each of them), none for other users.
    """
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return ()
    rest = username[len(SERVICE_ACCOUNT_PREFIX):]
    found = []
    at = rest.find(":")
    while at > 0:
        found.append((rest[:at], rest[at + 1:]))
        at = rest.find(":", at + 1)
    return tuple(found)


def service_account_namespace(subject: dict, binding_namespace: str) -> str:
    return subject.get("namespace") or binding_namespace


def applies_to(user, subject: dict, binding_namespace: str) -> bool:
    """Upstream's ``appliesToUser``."""
    kind = subject.get("kind")
    name = subject.get("name", "")
    if kind == USER:
        return user.name == name
    if kind == GROUP:
        return name in user.groups
    if kind == SERVICE_ACCOUNT:
        namespace = service_account_namespace(subject, binding_namespace)
        return bool(namespace) and (namespace, name) in service_accounts_of(user.name)
    return False


def subject_error(subject: dict) -> Optional[str]:
    """
    What the authorizer reports for this subject (spec 2.2: an unknown kind, a namespace
    on a User or Group), or None.  Upstream reports neither, so these words are ours.
    """
    kind = subject.get("kind", "")
    if kind in (USER, GROUP):
        if subject.get("namespace"):
            return (f"{kind} subject {quote(subject.get('name', ''))} must not have a "
                    f"namespace (has {quote(subject['namespace'])})")
        return None
    if kind == SERVICE_ACCOUNT:
        return None
    return f"unsupported subject kind: {quote(kind)}"


def describe(subject: dict, binding_namespace: str) -> str:
    """Upstream's ``describeSubject``: ``User "jane"``, ``ServiceAccount "name/ns"``."""
    kind = subject.get("kind", "")
    name = subject.get("name", "")
    if kind == SERVICE_ACCOUNT:
        return f"{kind} {quote(name + '/' + service_account_namespace(subject, binding_namespace))}"
    return f"{kind} {quote(name)}"
