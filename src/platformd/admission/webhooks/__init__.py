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

``build(informers, clock, reactor, egress=...)`` makes both plugins; ``matchConditions`` compile in
``cel.admission``'s environment, the one the configurations' validation checks them in.
``plugin_factory(name)`` is ``factory(deps, config)`` for a registry of plugins by name
(``deps.informers``, ``deps.clock``: the clock is the reactor in the daemon;
``deps.egress``: the server's egress selector; ``config``: the plugin's
``WebhookAdmissionConfiguration``, whose kubeconfig gives the calls' credentials).
"""

from __future__ import annotations

from platformd.admission.webhooks.authinfo import AuthInfoResolver
from platformd.admission.webhooks.client import Caller
from platformd.admission.webhooks.config import kubeconfig_file
from platformd.admission.webhooks.mutating import MutatingAdmissionWebhook
from platformd.admission.webhooks.source import WebhookSource, lister_of
from platformd.admission.webhooks.validating import ValidatingAdmissionWebhook
from platformd.cel.admission import compile_condition

GROUP = "admissionregistration.platform.io"


def build(informers, clock, reactor, *, metrics=None, authinfo=None, egress=None):
    """
    ``(MutatingAdmissionWebhook, ValidatingAdmissionWebhook)`` reading the
    configurations and the namespaces through ``informers`` (``informing.IInformers``);
    calls go out on ``reactor`` and time out on ``clock``, with the credentials
    ``authinfo`` (an ``AuthInfoResolver``; None: none) gives each webhook's host,
    through the egress selector ``egress`` (None: directly); each call is timed in
    ``metrics`` (an ``APIServerMetrics``) if given.
    """
    namespaces = lister_of(informers, "", "Namespace")
    caller = Caller(clock, reactor, authinfo, egress)
    mutating = WebhookSource(lister_of(informers, GROUP, "MutatingWebhookConfiguration"),
                             compile_condition, mutating=True)
    validating = WebhookSource(lister_of(informers, GROUP, "ValidatingWebhookConfiguration"),
                               compile_condition, mutating=False)
    return (MutatingAdmissionWebhook(mutating, namespaces, caller, metrics),
            ValidatingAdmissionWebhook(validating, namespaces, caller, metrics))


def plugin_factory(name: str):
    """``factory(deps, config)`` making the plugin ``name`` (Mutating/ValidatingAdmissionWebhook)
    with its own ``WebhookAdmissionConfiguration`` ``config`` (bytes, or None), as each
    of upstream's two plugins reads its own (``AdmissionConfigError`` when refused)."""
    index = ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook").index(name)

    def factory(deps, config=None):
        authinfo = AuthInfoResolver.load(kubeconfig_file(config), deps.clock)
        return build(deps.informers, deps.clock, deps.clock, metrics=deps.metrics,
                     authinfo=authinfo, egress=deps.egress)[index]
    return factory


__all__ = ["build", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"]
