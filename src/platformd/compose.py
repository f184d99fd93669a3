"""
The one composition root: the daemon (``service.py``, from its flags) and the in-memory
test server (``tests/stub.py``) both build the API server with ``compose``, and every
constructor of the API's parts (catalog, stores and the admission chain, watch cache,
informers, reader, watcher, negotiator, authorizer and authenticator chains, documents,
``APIServer``, the site, the controllers, expiry) is called here and nowhere else.
Nothing is changed after it is built: the flag-driven parts (limits, audit, tracing,
admission configuration, the egress selection, authentication and authorization with
their reloaders, service-account tokens) are arguments.

``compose`` touches no file, socket or thread itself: what differs between the daemon
and a test is passed in, read beforehand (the storage, the clock, the feature gates,
the TTLs, the address the documents name, the admission plugins and their
configuration).  Authentication and authorization need parts made here (the informers
the service-account authenticator reads, the RBAC authorizer, the metrics registry that
counts reloads), so they are given as builders called with ``Internals`` once those
exist, as upstream's ``Config.Complete`` hands its informer factory to the
authenticator's construction.

``boot_sequence`` is the order the parts start in once composed (storage → cache →
RBAC index, expiry, controllers, [pods socket] → built-in namespaces → ready), as a
``lifecycle.Sequence``; see docs/architecture.md, "Startup".
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

import attrs
from twisted.internet.defer import inlineCallbacks

from platformd import errors
from platformd.admission.chain import AdmissionChain
from platformd.admission.webhooks.client import Caller
from platformd.admission import plugins as admission_registry
from platformd.api.app import APIServer
from platformd.api.documents import Documents
from platformd.api import health
from platformd.api.deadline import REQUEST_TIMEOUT
from platformd.api.filters import MAX_MUTATING_IN_FLIGHT, MAX_READONLY_IN_FLIGHT, MaxInFlight
from platformd.api.reads import Reader
from platformd.api.site import make_site
from platformd.api.watch import WatchServer
from platformd.auth import rbac
from platformd.auth.authorizers import AlwaysAllow, AuthorizerChain
from platformd.auth.interfaces import IAuthenticator
from platformd.auth.rbac import RBACAuthorizer, RBACIndex
from platformd.bulklane import BulkLane, BulkRequests
from platformd.cache.continuetokens import Snapshots
from platformd.cache.eventttl import DEFAULT_TTL as DEFAULT_EVENT_TTL, EventExpiry
from platformd.cache.expiry import Expiry
from platformd.cache.informers import Informers
from platformd.cache.reads import CacheReader
from platformd.cache.watchcache import WatchCache
from platformd.codecs.cborcodec import CBORCodec
from platformd.codecs.jsoncodec import JSONCodec
from platformd.codecs.negotiation import Negotiator
from platformd.codecs.protobufcodec import ProtobufCodec
from platformd.codecs.yamlcodec import YAMLCodec
from platformd.context import internal
from platformd.edge.timeouts import ConnectionTimeouts
from platformd.controllers.aggregation import ClusterRoleAggregator
from platformd.controllers.customresources import CustomResourceController
from platformd.controllers.disruption import DisruptionController
from platformd.controllers.namespaces import NamespaceController
from platformd.controllers.platformservice import PlatformServiceController
from platformd.controllers.serviceaccounts import ServiceAccountsController
from platformd.util.deferreds import then
from platformd.util.servicenetwork import ServiceNetwork
from platformd.process.lifecycle import Sequence, Step, storage_service
from platformd.metrics import sources
from platformd.metrics.apiserver import APIServerMetrics
from platformd.registry import admissionregistration, apiextensions, core, escalation
from platformd.registry.bootstrap import reconcile_bootstrap_policy
from platformd.registry.catalog import Catalog, builtin
from platformd.registry.serviceallocation import Allocators, Repair, ServiceHooks
from platformd.registry.store import GenericStore

#: Namespaces that always exist (upstream: default, kube-system, kube-public,
#: kube-node-lease).
BUILTIN_NAMESPACES = ("default", "platform-system", "platform-public", "platform-node-lease")


class Readiness:
    """``readiness()`` is True once the server serves (what ``/readyz`` answers)."""

    ready = False

    def __call__(self) -> bool:
        return self.ready


@attrs.frozen
class Internals:
    """The parts made inside ``compose`` that the authentication and authorization
    builders need (see module docstring)."""

    clock: object
    informers: Informers
    #: ``WatchCache.sync``: a Deferred firing once the cache has seen every write so far.
    sync: Callable
    metrics: APIServerMetrics
    rbac: RBACAuthorizer


@attrs.frozen
class Authentication:
    """What an authentication builder gives ``compose``."""

    authenticator: IAuthenticator
    #: Service-account tokens (``auth/serviceaccount.TokenIssuer``); None: the
    #: ``serviceaccounts/<name>/token`` subresource is 404.
    token_issuer: Any = None
    #: The ``--authentication-config`` reloader (not started), or None.
    reloader: object = None


@attrs.frozen
class Authorization:
    """What an authorization builder gives ``compose``."""

    authorizer: object
    #: The ``--authorization-config`` reloader (not started), or None.
    reloader: object = None


def allow_all(_internals: Internals) -> Authorization:
    """Every request allowed (the in-memory test server's default)."""
    return Authorization(AuthorizerChain([AlwaysAllow()]))


@attrs.frozen
class Limits:
    """``--max-requests-inflight``, ``--max-mutating-requests-inflight`` and
    ``--request-timeout`` (0: not limited)."""

    readonly: int = MAX_READONLY_IN_FLIGHT
    mutating: int = MAX_MUTATING_IN_FLIGHT
    request_timeout: float = REQUEST_TIMEOUT


@attrs.define(eq=False)
class Components:
    """The composed API server (see ``compose``)."""

    clock: object
    gates: object
    catalog: Catalog
    storage: object
    cache: WatchCache
    #: One informer per GVR over the cache (``cache/informers.py``), for the controllers
    #: and the admission plugins.
    informers: Informers
    snapshots: Snapshots
    #: The generic store of each kind, by ``kind.gvr``.
    stores: dict
    #: The admission chain every write goes through.
    admission: AdmissionChain
    #: The enabled admission plugins' names.
    admission_names: list
    api: APIServer
    #: The HTTP site over ``api`` (connection deadlines on ``clock``).
    site: object
    #: Services started once the cache has loaded.
    expiry: Expiry
    namespaces: NamespaceController
    #: Creates the ``default`` ServiceAccount in every namespace.
    service_accounts: ServiceAccountsController
    #: The RBAC authorizer (in the chain for --authorization-mode RBAC) and the index of
    #: roles and bindings it reads (the RBAC stores' escalation check reads it too,
    #: whatever the authorization mode).
    rbac: RBACAuthorizer
    rbac_index: RBACIndex
    #: Keeps aggregated ClusterRoles' rules the union of the roles they select.
    aggregator: ClusterRoleAggregator
    #: Serves the kinds CustomResourceDefinitions define (names, establishing, cleanup).
    custom_resources: CustomResourceController
    #: Keeps PodDisruptionBudgets' status (issue 32).
    disruption: DisruptionController
    readiness: Readiness
    #: /metrics (``metrics.apiserver``) and the health checks with the switches the
    #: boot sequence and shutdown turn (``api.health.StandardChecks``).
    metrics: APIServerMetrics
    health: health.StandardChecks
    #: The configuration files' reloaders (authentication, authorization), not started.
    reloaders: list
    #: Removes stored Events ``--event-ttl`` after their last write (issue 32).
    event_expiry: Optional[EventExpiry] = None
    #: Services' cluster IPs and node ports (``registry/serviceallocation.py``), the
    #: repair of their bitmaps and the API server's own Service; None when the catalog
    #: serves no services.
    allocators: Optional[Allocators] = None
    service_repair: Optional[Repair] = None
    platform_service: Optional[PlatformServiceController] = None

    @property
    def ready(self) -> bool:
        return self.readiness.ready

    @ready.setter
    def ready(self, value: bool) -> None:
        self.readiness.ready = value

    def begin_shutdown(self) -> None:
        """Not ready any more: API requests are 503 and /readyz's ``shutdown`` fails."""
        self.ready = False
        self.health.shutdown.initiated = True

    def store_for(self, kind):
        return self.stores[kind.gvr]


def compose(storage, clock, gates, authentication: Callable[[Internals], Authentication], *,
            authorization: Callable[[Internals], Authorization] = allow_all,
            watch_history_ttl: float = 300.0, continue_token_ttl: float = 300.0,
            address: str = "127.0.0.1:6443", catalog=None, admission_names=None,
            admission_configs=None, egress=None, auditor=None, request_tracing=None,
            limits: Limits = Limits(), timeouts: ConnectionTimeouts = ConnectionTimeouts(),
            health_checks: Iterable[tuple] = (),
            event_ttl: float = DEFAULT_EVENT_TTL,
            service_network: ServiceNetwork = ServiceNetwork(),
            master: Optional[Callable[[], tuple]] = None,
            conversion_reactor=None, bulk_lane: Optional[BulkLane] = None) -> Components:
    """
    The API server over ``storage`` (an ``IStorage``, not yet started) on ``clock`` (the
    reactor, or a ``Clock`` in tests).

    ``gates`` are the feature gates; ``authentication`` and ``authorization`` build who a
    request is and what it may do from ``Internals`` (default: everything allowed);
    ``address`` is the host:port the OpenAPI documents name; ``catalog`` defaults to the
    built-in kinds; ``admission_names`` are the admission plugins to run (default:
    upstream's default-enabled ones among those served) and ``admission_configs`` their
    configuration (``admission.config.AdmissionConfiguration``); ``egress`` the
    ``egress.selector.EgressSelector`` the admission webhooks dial through (None:
    directly); ``auditor`` the audit stages
    (``audit.record.Auditor``) and ``request_tracing`` the tracing filter
    (``tracing.requests.RequestTracing``), or None; ``health_checks`` more checks, as
    ``(checks, endpoints, after)`` for ``HealthChecks.add_checks``; ``event_ttl`` how
    long a stored Event lives after its last write (``--event-ttl``);
    ``service_network`` the services' ranges (``--service-cluster-ip-range``,
    ``--service-node-port-range``); ``master()`` gives ``(address, port)`` the server's
    own Service points at (default: no address, the port of ``address``);
    ``conversion_reactor`` the reactor the custom resources' conversion webhooks are
    called on (default: ``clock``; the in-memory test server's clock has no sockets);
    ``bulk_lane`` the lane writes to the bulk kinds' resources wait in
    (``bulklane.BulkRequests``; None: none does).
    """
    catalog = catalog if catalog is not None else builtin()
    cache = WatchCache(storage, catalog, clock, watch_history_ttl)
    informers = Informers(cache)
    snapshots = Snapshots(clock, continue_token_ttl)
    rbac_authorizer, rbac_index = rbac.build(informers, clock)
    metrics = APIServerMetrics()
    internals = Internals(clock, informers, cache.sync, metrics, rbac_authorizer)
    authn = authentication(internals)
    authz = authorization(internals)
    if admission_names is None:
        admission_names = admission_registry.builtin().default_enabled()
    deps = admission_deps(cache, informers, clock, metrics, egress)
    admission = AdmissionChain(
        admission_plugins(deps, admission_names, admission_configs), metrics)
    write_checks = escalation.checks(rbac_index)
    stores = {k.gvr: GenericStore(k, storage, cache, clock, admission, write_checks.get(k.gvr))
              for k in catalog.kinds if k.stored and k.gvr != core.SERVICE.gvr}
    allocators = service_repair = platform_service = None
    if catalog.lookup(*core.SERVICE.gvr) is not None:
        # A storage no other server shares (SQLite, memory): the bitmaps are decided in
        # memory and written behind; a shared one's (etcd, SQLite with --shared-data-dir)
        # are compare-and-swapped at each change.
        shared = getattr(storage, "shared", False)
        allocators = Allocators(storage, service_network, clock=None if shared else clock)
        stores[core.SERVICE.gvr] = services = GenericStore(
            core.SERVICE, storage, cache, clock, admission,
            hooks=ServiceHooks(allocators, stores.get(core.ENDPOINTS.gvr)))
        service_repair = Repair(clock, allocators,
                                lambda: [entry.obj for entry in services.list(None)])
        if core.ENDPOINTS.gvr in stores and core.ENDPOINT_SLICE.gvr in stores:
            port = int(address.rsplit(":", 1)[-1])
            platform_service = PlatformServiceController(
                clock, stores, (core.SERVICE, core.ENDPOINTS, core.ENDPOINT_SLICE),
                service_network.ranges[0].first, master or (lambda: (None, port)),
                leases=storage if shared else None)
    readiness = Readiness()
    reader = CacheReader(cache, snapshots, storage, gates)
    checks = health.standard_checks(storage, clock)
    for extra in health_checks:
        checks.checks.add_checks(*extra)
    documents = Documents(catalog, address)
    if authn.token_issuer is not None:
        for path, value in authn.token_issuer.documents().items():
            documents.add(path, value)
    max_in_flight = MaxInFlight(limits.readonly, limits.mutating)
    api = APIServer(
        catalog, stores,
        Reader(reader, gates), WatchServer(reader, gates, clock, metrics=metrics),
        negotiator(gates), authn.authenticator, authz.authorizer, documents,
        readiness, gates, max_in_flight=max_in_flight, clock=clock, metrics=metrics,
        health=checks.checks, request_timeout=limits.request_timeout, auditor=auditor,
        request_tracing=request_tracing, token_issuer=authn.token_issuer, admission=admission,
        bulk=None if bulk_lane is None else BulkRequests(bulk_lane, frozenset(
            (kind.group, kind.plural) for kind in catalog.kinds
            if kind.storage_prefix.startswith(bulk_lane.prefixes))))
    sources.install(metrics, cache, max_in_flight.in_flight, clock,
                    getattr(storage, "path", ""))
    return Components(
        clock=clock, gates=gates, catalog=catalog, storage=storage, cache=cache,
        informers=informers, snapshots=snapshots, stores=stores, admission=admission,
        admission_names=list(admission_names), api=api,
        site=make_site(api.resource(), timeouts, reactor=clock),
        expiry=Expiry(clock, cache, snapshots),
        namespaces=NamespaceController(clock, informers, catalog, stores, core.NAMESPACE),
        service_accounts=ServiceAccountsController(clock, informers, stores, core.NAMESPACE,
                                                   core.SERVICE_ACCOUNT),
        rbac=rbac_authorizer, rbac_index=rbac_index,
        aggregator=ClusterRoleAggregator(clock, informers, stores),
        custom_resources=CustomResourceController(
            clock, informers, cache, catalog, stores, storage, admission,
            apiextensions.CUSTOM_RESOURCE_DEFINITION,
            Caller(clock, conversion_reactor or clock, egress=egress)),
        disruption=DisruptionController(clock, informers, stores, core.POD_DISRUPTION_BUDGET,
                                        core.POD),
        readiness=readiness, metrics=metrics, health=checks,
        reloaders=[r for r in (authn.reloader, authz.reloader) if r is not None],
        event_expiry=(EventExpiry(clock, cache, storage, core.EVENT, event_ttl)
                      if any(k.gvr == core.EVENT.gvr for k in catalog.kinds) else None),
        allocators=allocators, service_repair=service_repair,
        platform_service=platform_service)


def admission_deps(cache, informers, clock, metrics=None,
                   egress=None) -> admission_registry.PluginDeps:
    """What every admission plugin factory is given: the cache, its informers, the clock,
    the kinds the plugins read (by ``gvr``), the metrics and the egress selector."""
    return admission_registry.PluginDeps(
        cache, informers, clock, core.NAMESPACE, core.SERVICE_ACCOUNT, core.POD,
        admissionregistration.MUTATING_WEBHOOK_CONFIGURATION,
        admissionregistration.VALIDATING_WEBHOOK_CONFIGURATION,
        admissionregistration.VALIDATING_ADMISSION_POLICY,
        admissionregistration.VALIDATING_ADMISSION_POLICY_BINDING, metrics, egress)


def admission_plugins(deps, names, configs=None) -> list:
    """
    The one place the admission chain's plugins are built: the plugins ``names`` in
    upstream's order (the webhooks last: mutating after the other mutating plugins,
    validating after the other validating ones), each given its configuration from
    ``configs``.  (The RBAC escalation check is no plugin: the RBAC kinds' stores make
    it, ``registry/escalation.py``.)
    """
    return admission_registry.builtin().build(names, deps, configs)


def negotiator(gates) -> Negotiator:
    """The served encodings: JSON (default), YAML and Protobuf; CBOR under its gate."""
    codecs = [JSONCodec(), YAMLCodec(), ProtobufCodec()]
    if gates["CBORServingAndStorage"]:
        codecs.append(CBORCodec())
    return Negotiator(codecs)


def boot_sequence(components: Components, *, after_cache=(), on_ready=None,
                  rbac_policy: bool = True) -> Sequence:
    """
    The services of ``components`` in start order, as one ``Sequence``:

    1. storage (opened, recovered),
    2. the watch cache (every object loaded at one revision, then following storage),
    3. the RBAC index, expiry, the namespace, service-account and disruption controllers,
       ClusterRole aggregation and
       ``after_cache`` (the daemon's pods socket), then the services' address and port
       bitmaps repaired from the stored services (``service-allocation-repair``),
    4. the built-in namespaces (created unless they exist), the server's own Service
       (``platform-service``), then the RBAC bootstrap
       policy reconciled (upstream's PostStartHook),
       (``rbac_policy=False``, for tests that want an empty server: neither the
       policy nor ClusterRole aggregation),
    5. ready: ``components.ready`` becomes True (after ``on_ready()``, if given); it is
       False again as soon as stopping begins.

    Stopping goes in reverse, each after the one started after it has stopped: storage
    last, so writes still pending finish.
    """
    boot = Sequence()
    checks = components.health
    hooks = checks.hooks
    if not rbac_policy:
        hooks[health.BOOTSTRAP_ROLES].set()
    services = [storage_service(components.storage),
                Step("customresource-preload", components.custom_resources.preload,
                     components.custom_resources.close),
                Step("cache", _marking(components.cache.start, checks.informers,
                                       hooks[health.INFORMERS]), components.cache.stop),
                Step("rbac-index", components.rbac_index.start, components.rbac_index.stop),
                Step("expiry", components.expiry.start, components.expiry.stop),
                *([Step("event-ttl", components.event_expiry.start,
                        components.event_expiry.stop)] if components.event_expiry else []),
                Step("namespace-controller", components.namespaces.start,
                     components.namespaces.stop),
                Step("serviceaccount-controller", components.service_accounts.start,
                     components.service_accounts.stop),
                Step("customresource-controller", components.custom_resources.start,
                     components.custom_resources.stop),
                Step("disruption-controller", components.disruption.start,
                     components.disruption.stop),
                *([Step("clusterrole-aggregation", components.aggregator.start,
                        components.aggregator.stop)] if rbac_policy else []),
                *after_cache,
                *([Step("service-allocation-repair", components.service_repair.start,
                        components.service_repair.stop)]
                  if components.service_repair is not None else []),
                Step("builtin-namespaces", _marking(lambda: create_builtin_namespaces(components),
                                                    hooks[health.NAMESPACES])),
                *([Step("platform-service", components.platform_service.start,
                        components.platform_service.stop)]
                  if components.platform_service is not None else []),
                *([Step("rbac-bootstrap",
                        _marking(lambda: reconcile_bootstrap_policy(components.stores),
                                 hooks[health.BOOTSTRAP_ROLES]))]
                  if rbac_policy else []),
                Step("ready", lambda: _ready(components, on_ready), components.begin_shutdown)]
    for child in services:
        child.setServiceParent(boot)
    return boot


def _marking(start: Callable, *flags: health.Flag) -> Callable:
    """``start``, after which (once its Deferred has fired) the health ``flags`` pass."""
    def mark(_) -> None:
        for flag in flags:
            flag.set()

    def started():
        return then(start(), mark)
    return started


def _ready(components: Components, on_ready: Optional[Callable]) -> None:
    if on_ready is not None:
        on_ready()
    components.ready = True


@inlineCallbacks
def create_builtin_namespaces(components: Components):
    """Create each of ``BUILTIN_NAMESPACES`` that does not exist (a Deferred)."""
    store = components.store_for(core.NAMESPACE)
    for name in BUILTIN_NAMESPACES:
        try:
            yield store.create(internal(), {"metadata": {"name": name}}, None)
        except errors.StatusError as e:
            if e.reason != "AlreadyExists":
                raise
