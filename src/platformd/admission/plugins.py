"""
The admission plugins by name (upstream's ``admission.Plugins`` and
``pkg/kubeapiserver/options/plugins.go``): which exist, in which order they run, which
are on by default, and what ``--enable-admission-plugins`` /
``--disable-admission-plugins`` make of them.

A plugin is registered as a factory, ``factory(deps, config)``: ``deps`` is whatever
the composer hands every plugin (the informers, the clock, the kinds; see
``compose.admission_plugins``), ``config`` the plugin's configuration from
``--admission-control-config-file`` (bytes) or None.  Adding a plugin is one
``register`` call in ``builtin()``; its place in the chain comes from
``ALL_ORDERED_PLUGINS``, upstream's ``AllOrderedPlugins``, whatever order the
registrations come in.  ``compose.admission_plugins`` builds the chain from the names
enabled (the RBAC escalation check, not an admission plugin upstream, is always there).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

import attrs

from platformd.admission.config import AdmissionConfigError
from platformd.goformat.gotext import go_quote

#: Upstream's ``AllOrderedPlugins``: every admission plugin kube-apiserver knows, in the
#: order they run (mutating ones in this order, then validating ones in this order).
ALL_ORDERED_PLUGINS = (
    "AlwaysAdmit", "NamespaceAutoProvision", "NamespaceLifecycle", "NamespaceExists",
    "LimitPodHardAntiAffinityTopology", "LimitRanger", "ServiceAccount", "NodeRestriction",
    "TaintNodesByCondition", "AlwaysPullImages", "ImagePolicyWebhook", "PodSecurity",
    "PodNodeSelector", "Priority", "DefaultTolerationSeconds", "PodTolerationRestriction",
    "EventRateLimit", "ExtendedResourceToleration", "DefaultStorageClass",
    "StorageObjectInUseProtection", "PodGroupProtection",
    "OwnerReferencesPermissionEnforcement", "PersistentVolumeClaimResize", "RuntimeClass",
    "CertificateApproval", "CertificateSigning", "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction", "DefaultIngressClass", "DenyServiceExternalIPs",
    "PodTopologyLabels", "PodGroupWorkloadExists", "NodeDeclaredFeatureValidator",
    "JobValidation", "PodResizeValidator",
    # webhook, resourcequota and deny plugins go at the end
    "MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook", "ResourceQuota", "AlwaysDeny",
)

#: The plugins upstream enables by default (``DefaultOffAdmissionPlugins`` is every
#: other one).
DEFAULT_ON_PLUGINS = frozenset({
    "NamespaceLifecycle", "LimitRanger", "ServiceAccount", "DefaultStorageClass",
    "PersistentVolumeClaimResize", "DefaultTolerationSeconds", "MutatingAdmissionWebhook",
    "ValidatingAdmissionWebhook", "ResourceQuota", "StorageObjectInUseProtection",
    "PodGroupProtection", "Priority", "TaintNodesByCondition", "RuntimeClass",
    "CertificateApproval", "CertificateSigning", "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction", "DefaultIngressClass", "PodSecurity",
    "PodTopologyLabels", "MutatingAdmissionPolicy", "ValidatingAdmissionPolicy",
    "PodGroupWorkloadExists", "NodeDeclaredFeatureValidator", "JobValidation",
    "PodResizeValidator",
})

_RANK = {name: rank for rank, name in enumerate(ALL_ORDERED_PLUGINS)}

Factory = Callable[[Any, Optional[bytes]], object]


class AdmissionFlagError(Exception):
    """Bad ``--enable/--disable-admission-plugins`` (upstream's words, one line)."""


class Plugins:
    """The registered plugins: name → factory."""

    def __init__(self) -> None:
        self._factories: dict[str, Factory] = {}

    def register(self, name: str, factory: Factory) -> None:
        if name not in _RANK:
            raise ValueError(f"{name} is not in ALL_ORDERED_PLUGINS")
        self._factories[name] = factory

    def registered(self) -> list[str]:
        """The registered names, in the order they run."""
        return sorted(self._factories, key=_RANK.__getitem__)

    def default_enabled(self) -> list[str]:
        """The registered plugins upstream enables by default, in order."""
        return [n for n in self.registered() if n in DEFAULT_ON_PLUGINS]

    def enabled(self, enable: Iterable[str] = (), disable: Iterable[str] = ()) -> list[str]:
        """
        Upstream's ``AdmissionOptions.Validate`` then ``enabledPluginNames``: the
        default-on plugins, plus ``enable``, minus ``disable``, in running order.  An
        unknown name, or one both enabled and disabled, raises ``AdmissionFlagError``.
        """
        enable, disable = list(enable), list(disable)
        known = set(self._factories)
        problems = [f'enable-admission-plugins plugin "{n}" is unknown'
                    for n in enable if n not in known]
        problems += [f'disable-admission-plugins plugin "{n}" is unknown'
                     for n in disable if n not in known]
        both = sorted(set(enable) & set(disable))
        if both:
            problems.append(f"[{' '.join(both)}] in enable-admission-plugins and "
                            "disable-admission-plugins overlapped")
        if problems:
            # utilerrors.NewAggregate: one error alone, several as [a, b].
            raise AdmissionFlagError(problems[0] if len(problems) == 1
                                     else "[" + ", ".join(problems) + "]")
        off = (set(self._factories) - DEFAULT_ON_PLUGINS) | set(disable)
        off -= set(enable)
        return [n for n in self.registered() if n not in off]

    def build(self, names: Iterable[str], deps, configs=None) -> list:
        """
        The plugins named, in running order (whatever order ``names`` has); ``configs``
        (an ``AdmissionConfiguration``, or None) gives each its configuration.  Only
        these names are looked up in ``configs``: an entry for any other name is unused,
        as upstream's ``NewFromPlugins`` asks its config provider about the enabled
        plugins only.  A factory refusing its configuration (``AdmissionConfigError``)
        fails the build in upstream's ``InitPlugin`` words: ``couldn't init admission
        plugin "NAME": <why>``.
        """
        plugins = []
        for name in sorted(set(names), key=_RANK.__getitem__):
            config = configs.config_for(name) if configs is not None else None
            try:
                plugins.append(self._factories[name](deps, config))
            except AdmissionConfigError as error:
                raise AdmissionConfigError(
                    f"couldn't init admission plugin {go_quote(name)}: {error}") from None
        return plugins


@attrs.frozen
class PluginDeps:
    """What every plugin factory is given (made by ``compose``)."""

    #: The ``WatchCache``: its ``sync``, the live lookup of a name its listers miss.
    cache: Any
    #: The informers of the served kinds (``informing.IInformers``): what plugins read,
    #: each kind's through ``informer(kind.gvr)``.
    informers: Any
    clock: Any
    #: The kinds plugins refer to (``registry.core``'s and
    #: ``registry.admissionregistration``'s ``ResourceType``s): handed in, as the
    #: registry that defines them sits above admission.
    namespace_kind: Any
    service_account_kind: Any
    pod_kind: Any
    mutating_webhook_kind: Any
    validating_webhook_kind: Any
    policy_kind: Any
    policy_binding_kind: Any
    #: The server's ``APIServerMetrics`` (webhook durations); None: not measured.
    metrics: Any = None
    #: The server's ``egress.selector.EgressSelector``, which the webhooks dial through
    #: (None: directly); passed, not process-wide, so servers in one process keep theirs.
    egress: Any = None


def builtin() -> Plugins:
    """The admission plugins served here, by name."""
    from platformd.admission import policy, webhooks
    from platformd.admission.namespacelifecycle import NamespaceLifecycle
    from platformd.admission.serviceaccount import ServiceAccountPlugin

    plugins = Plugins()
    plugins.register("NamespaceLifecycle", lambda deps, config: NamespaceLifecycle(
        deps.informers.informer(deps.namespace_kind.gvr).lister, deps.namespace_kind,
        deps.cache.sync))
    plugins.register("ServiceAccount", lambda deps, config: ServiceAccountPlugin(
        deps.informers.informer(deps.service_account_kind.gvr).lister, deps.pod_kind,
        deps.clock, deps.cache.sync))
    for name in ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"):
        plugins.register(name, webhooks.plugin_factory(name))
    plugins.register("ValidatingAdmissionPolicy", policy.plugin_factory())
    return plugins
