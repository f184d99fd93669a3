"""
``ValidatingAdmissionPolicy`` (upstream's ``k8s.io/apiserver/pkg/admission/plugin/policy/
validating``): CEL validations from ``ValidatingAdmissionPolicy`` objects applied through
``ValidatingAdmissionPolicyBinding`` objects, both read live from the watch cache.

- ``source``:    the policies with their bindings, compiled once per object version;
- ``compiled``:  one policy's expressions in the policy CEL environment;
- ``matching``:  ``matchConstraints`` / ``matchResources``;
- ``params``:    the parameter objects of a binding (``paramKind`` + ``paramRef``);
- ``validator``: one evaluation: match conditions, validations, audit annotations;
- ``plugin``:    the admission plugin: actions, failure policy, upstream's messages.

``plugin_factory()`` is ``factory(deps, config)`` for the registry of plugins by name.
"""

from __future__ import annotations

from platformd.admission.policy.plugin import ValidatingAdmissionPolicy
from platformd.admission.policy.source import PolicySource
from platformd.admission.webhooks.source import lister_of

GROUP = "admissionregistration.platform.io"


def find_kind(cache, group: str, kind: str):
    for kind_cache in cache.kinds.values():
        if kind_cache.kind.group == group and kind_cache.kind.kind == kind:
            return kind_cache.kind
    raise LookupError(f"{group}/{kind} is not served")


def build(cache, informers) -> ValidatingAdmissionPolicy:
    """The plugin over ``cache`` (the ``WatchCache``); namespaces from ``informers``."""
    source = PolicySource(
        cache.for_kind(find_kind(cache, GROUP, "ValidatingAdmissionPolicy")),
        cache.for_kind(find_kind(cache, GROUP, "ValidatingAdmissionPolicyBinding")))
    return ValidatingAdmissionPolicy(source, lister_of(informers, "", "Namespace"), cache)


def plugin_factory():
    def factory(deps, config=None):
        return build(deps.cache, deps.informers)
    return factory


__all__ = ["build", "plugin_factory", "ValidatingAdmissionPolicy"]
