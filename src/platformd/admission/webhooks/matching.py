"""
Which webhooks a write is sent to (upstream's ``generic.Webhook.ShouldCallHook`` and
``rules.Matcher``, ``namespace.Matcher``, ``object.Matcher``, ``matchconditions``):

- ``rules``: operation, API group, version, resource with subresource (``pods``,
  ``pods/status``, ``pods/*``, ``*/status``, ``*`` = every resource without a
  subresource, ``*/*``) and scope (``Cluster`` also holds namespaces themselves);
- ``namespaceSelector``: the labels of the object's namespace (of the namespace itself
  when the object is one: the new labels on create and update); cluster-scoped objects
  other than namespaces always match.  What matching knows of namespaces, their kind
  and lister, comes in as ``Namespaces`` (the admission layer sits below the registry
  that defines the kind);
- ``objectSelector``: the labels of the new or the old object (either matching);
- ``matchConditions``: CEL, each with ``object``, ``oldObject`` and ``request``; the
  first false skips the webhook; an error with none false is a call error (the failure
  policy decides).

``matchPolicy: Equivalent`` matches as ``Exact`` here: every resource is served at one
group and version, so there is no other equivalent request to convert to.
The webhook configurations themselves are never sent to webhooks (upstream's
``IsExemptAdmissionConfigurationResource``).
"""

from __future__ import annotations

from typing import Any

import attrs

from platformd import errors
from platformd.admission.webhooks.errors import CallError
from platformd.cel import matchconditions
from platformd.util.labelselectors import labels_of

EXEMPT = frozenset({("admissionregistration.platform.io", "mutatingwebhookconfigurations"),
                    ("admissionregistration.platform.io", "validatingwebhookconfigurations")})


@attrs.frozen
class Namespaces:
    """
    The Namespace kind and its ``ILister``: whether a write is of a namespace itself
    (matched as cluster-scoped, by its own labels; upstream's ``namespaceResource``
    compared by GVR) and the labels of a namespaced write's namespace.
    """

    #: The Namespace ``ResourceType`` (``registry.core.NAMESPACE``).
    kind: Any
    #: Its ``informing.ILister``.
    lister: Any

    @classmethod
    def of(cls, informers, kind) -> "Namespaces":
        """Over ``informers`` (``informing.IInformers``): ``kind``'s informer's lister."""
        return cls(kind, informers.informer(kind.gvr).lister)

    def holds(self, a) -> bool:
        """Whether ``a`` (``AdmissionAttributes``) writes a namespace itself."""
        return a.kind.gvr == self.kind.gvr

    def get(self, namespace, name: str):
        """The lister's ``get``."""
        return self.lister.get(namespace, name)


def exempt(a) -> bool:
    return (a.kind.group, a.kind.plural) in EXEMPT


def _one_of(values, value: str) -> bool:
    return "*" in values or value in values


def _resource(resources, plural: str, subresource: str) -> bool:
    for entry in resources:
        res, _, sub = entry.partition("/")
        if (res == "*" or res == plural) and (sub == "*" or sub == subresource):
            return True
    return False


def _scope(scope: str, a, namespaces: Namespaces) -> bool:
    if scope in ("*", "", None):
        return True
    namespaced = bool(a.namespace) and not namespaces.holds(a)
    if scope == "Cluster":
        return not namespaced
    if scope == "Namespaced":
        return namespaced
    return False


def rule_matches(rule: dict, a, namespaces: Namespaces) -> bool:
    return (_one_of(rule.get("operations") or (), a.operation)
            and _one_of(rule.get("apiGroups") or (), a.kind.group)
            and _one_of(rule.get("apiVersions") or (), a.kind.version)
            and _resource(rule.get("resources") or (), a.kind.plural, a.subresource or "")
            and _scope(rule.get("scope") or "*", a, namespaces))


def namespace_labels(a, namespaces: Namespaces):
    """The labels the namespaceSelector is matched against, or None: always matches."""
    if namespaces.holds(a):
        if not a.subresource and a.operation in ("CREATE", "UPDATE"):
            return labels_of(a.obj)
        name = a.name
    else:
        name = a.namespace
        if not name:
            return None
    entry = namespaces.get(None, name)
    if entry is None:
        if namespaces.holds(a) and a.old is not None:
            return labels_of(a.old)
        raise errors.internal(f'namespaces "{name}" not found')
    return labels_of(entry.obj)


def should_call(hook, a, namespaces: Namespaces) -> bool:
    """Rules, then the namespace selector, then the object selector."""
    if not any(rule_matches(rule, a, namespaces) for rule in hook.rules):
        return False
    if hook.namespace_selector is not None:
        if isinstance(hook.namespace_selector, str):
            raise errors.internal(hook.namespace_selector)
        labels = namespace_labels(a, namespaces)
        if labels is not None and not hook.namespace_selector(labels):
            return False
    if hook.object_selector is not None:
        if isinstance(hook.object_selector, str):
            raise errors.internal(hook.object_selector)
        selector = hook.object_selector
        if not ((a.obj is not None and selector(labels_of(a.obj)))
                or (a.old is not None and selector(labels_of(a.old)))):
            return False
    return True


def conditions_match(hook, variables: dict) -> bool:
    """The match conditions: False skips; ``CallError`` when one failed, none false."""
    if isinstance(hook.conditions, str):
        raise CallError(hook.name, hook.conditions)
    try:
        return matchconditions.evaluate([program for _name, program in hook.conditions],
                                        variables)
    except matchconditions.ConditionError as error:
        raise CallError(hook.name, str(error)) from None
