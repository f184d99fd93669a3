"""
``ValidatingAdmissionPolicy`` (upstream's ``k8s.io/apiserver/pkg/admission/plugin/policy/
validating``): CEL validations from ``ValidatingAdmissionPolicy`` objects applied through
``ValidatingAdmissionPolicyBinding`` objects, both read live from their listers.

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


def build(informers) -> ValidatingAdmissionPolicy:
    """The plugin reading through ``informers`` (``informing.IInformers``)."""
    source = PolicySource(lister_of(informers, GROUP, "ValidatingAdmissionPolicy"),
                          lister_of(informers, GROUP, "ValidatingAdmissionPolicyBinding"))
    return ValidatingAdmissionPolicy(source, lister_of(informers, "", "Namespace"), informers)


def plugin_factory():
    def factory(deps, config=None):
        return build(deps.informers)
    return factory


__all__ = ["build", "plugin_factory", "ValidatingAdmissionPolicy"]
