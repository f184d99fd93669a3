"""
Admission webhooks (upstream's ``k8s.io/apiserver/pkg/admission/plugin/webhook``):
``MutatingAdmissionWebhook`` and ``ValidatingAdmissionWebhook`` call the webhooks the
``MutatingWebhookConfiguration`` and ``ValidatingWebhookConfiguration`` objects describe,
read live from their informers' listers, with an ``AdmissionReview`` POSTed over HTTPS.

- ``source``:   the webhooks of every configuration, compiled once per object version;
- ``matching``: rules, namespace and object selectors, match conditions (``WebhookAccessor``);
- ``review``:   the AdmissionReview sent and the answer's checks;
- ``client``:   the HTTPS call (caBundle, timeout on the injected clock by cancellation);
- ``config``, ``authinfo``, ``credentials``: the plugins' ``WebhookAdmissionConfiguration``,
  the kubeconfig user chosen per webhook host, and what a call carries as that user;
- ``errors``:   upstream's messages (denied, failed calling, dry run);
- ``mutating``, ``validating``: the two plugins (see docs/admission.md, "Webhooks").

``build(deps, reactor)`` makes both plugins; ``matchConditions`` compile in
``cel.admission``'s environment, the one the configurations' validation checks them in.
``plugin_factory(name)`` is ``factory(deps, config)`` for a registry of plugins by name
(``deps.informers`` and the kinds read through them, ``deps.clock``: the clock is the
reactor in the daemon; ``deps.egress``: the server's egress selector; ``config``: the
plugin's ``WebhookAdmissionConfiguration``, whose kubeconfig gives the calls'
credentials).
"""

from __future__ import annotations

from platformd.admission.webhooks.authinfo import AuthInfoResolver
from platformd.admission.webhooks.client import Caller
from platformd.admission.webhooks.config import kubeconfig_file
from platformd.admission.webhooks.matching import Namespaces
from platformd.admission.webhooks.mutating import MutatingAdmissionWebhook
from platformd.admission.webhooks.source import WebhookSource
from platformd.admission.webhooks.validating import ValidatingAdmissionWebhook
from platformd.cel.admission import compile_condition


def build(deps, reactor, *, authinfo=None):
    """
    ``(MutatingAdmissionWebhook, ValidatingAdmissionWebhook)`` reading the
    configurations and the namespaces through ``deps.informers``
    (``informing.IInformers``), by the kinds ``deps`` (``plugins.PluginDeps``) names;
    calls go out on ``reactor`` and time out on ``deps.clock``, with the credentials
    ``authinfo`` (an ``AuthInfoResolver``; None: none) gives each webhook's host,
    through the egress selector ``deps.egress`` (None: directly); each call is timed in
    ``deps.metrics`` (an ``APIServerMetrics``) if given.
    """
    informers = deps.informers
    namespaces = Namespaces.of(informers, deps.namespace_kind)
    caller = Caller(deps.clock, reactor, authinfo, deps.egress)
    mutating = WebhookSource(informers.informer(deps.mutating_webhook_kind.gvr).lister,
                             compile_condition, mutating=True)
    validating = WebhookSource(informers.informer(deps.validating_webhook_kind.gvr).lister,
                               compile_condition, mutating=False)
    return (MutatingAdmissionWebhook(mutating, namespaces, caller, deps.metrics),
            ValidatingAdmissionWebhook(validating, namespaces, caller, deps.metrics))


def plugin_factory(name: str):
    """``factory(deps, config)`` making the plugin ``name`` (Mutating/ValidatingAdmissionWebhook)
    with its own ``WebhookAdmissionConfiguration`` ``config`` (bytes, or None), as each
    of upstream's two plugins reads its own (``AdmissionConfigError`` when refused)."""
    index = ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook").index(name)

    def factory(deps, config=None):
        authinfo = AuthInfoResolver.load(kubeconfig_file(config), deps.clock)
        return build(deps, deps.clock, authinfo=authinfo)[index]
    return factory


__all__ = ["build", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"]
