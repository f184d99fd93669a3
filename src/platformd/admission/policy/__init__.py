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
from platformd.admission.webhooks.matching import Namespaces


def build(deps) -> ValidatingAdmissionPolicy:
    """The plugin reading through ``deps.informers`` (``informing.IInformers``) the
    policies, their bindings and the namespaces, by the kinds ``deps``
    (``plugins.PluginDeps``) names."""
    informers = deps.informers
    source = PolicySource(informers.informer(deps.policy_kind.gvr).lister,
                          informers.informer(deps.policy_binding_kind.gvr).lister)
    return ValidatingAdmissionPolicy(source, Namespaces.of(informers, deps.namespace_kind),
                                     informers)


def plugin_factory():
    def factory(deps, config=None):
        return build(deps)
    return factory


__all__ = ["build", "plugin_factory", "ValidatingAdmissionPolicy"]
