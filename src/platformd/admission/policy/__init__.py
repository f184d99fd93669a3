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
from platformd.admission.webhooks.source import find_kind

GROUP = "admissionregistration.platform.io"


def build(cache) -> ValidatingAdmissionPolicy:
    """The plugin over ``cache`` (the ``WatchCache``)."""
    source = PolicySource(
        cache.for_kind(find_kind(cache, GROUP, "ValidatingAdmissionPolicy")),
        cache.for_kind(find_kind(cache, GROUP, "ValidatingAdmissionPolicyBinding")))
    return ValidatingAdmissionPolicy(source, cache.for_kind(find_kind(cache, "", "Namespace")),
                                     cache)


def plugin_factory():
    def factory(deps, config=None):
        return build(deps.cache)
    return factory


__all__ = ["build", "plugin_factory", "ValidatingAdmissionPolicy"]
