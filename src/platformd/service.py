"""
The daemon: ``daemon(options, reactor)`` builds ``PlatformService``, the service tree
``twistd platformd`` runs, from the parsed flags.

::

    Edge (process/startup.py: StartupError → one line, exit 1)   make_service, for twistd
    └── PlatformService "platformd"     a lifecycle.Sequence: each child starts once the
        │                               one before it has, and they stop in reverse
        ├── watchdog                    sd_notify WATCHDOG=1 pings (process/sdnotify.py)
        ├── signals                     SIGHUP reloads (the daemon only, not tests)
        ├── tracing                     (--tracing-config-file) spans flushed at stop
        ├── https                       edge/listening.py: binds in privilegedStartService
        ├── listening                   waits for the port; the kubeconfig names it
        ├── boot                        compose.boot_sequence: storage, cache, RBAC index,
        │                               expiry, controllers, [config reloads, compactor,
        │                               audit log, pods socket], built-in namespaces,
        │                               RBAC bootstrap, ready
        └── serving                     its stop is the graceful termination below

``daemon`` reads every file the flags name first (``--data-dir``, the PKI or the given
certificates, the token file, the service-account keys, the admission, egress,
tracing, audit, encryption, authentication and authorization configurations), as
upstream's ``Complete`` does before ``Run``; then ``compose.compose`` builds the API
server with all of it, the one composition root the in-memory test server uses too;
then the tree above is assembled.  No socket is opened and no thread started until
twistd starts the tree: ``privilegedStartService`` listens (a port in use fails at
once, before the reactor runs) and binds the pods socket; ``startService`` starts the
children in order; API requests before "ready" are answered 503.

Under systemd (``Type=notify``, process/sdnotify.py) each boot step is a ``STATUS=``
line, ``READY=1`` follows the ``ready`` step, and the watchdog is pinged while running.
With socket activation the one socket passed is served instead of ``--secure-port``
(``listening.activated_socket``).  SIGHUP checks the reloadable configuration files at
once.

Stopping (SIGTERM) is upstream's graceful termination, the ``serving`` step's stop:
``STOPPING=1``; ``/readyz`` fails for ``--shutdown-delay-duration`` while requests are
still served; then no new connection is accepted and each connection is closed once its
requests are answered; once only watches are left (or after ``SHUTDOWN_TIMEOUT``) every
watch ends cleanly, with a bookmark at the last revision if it asked for bookmarks, so
its client resumes from there without a relist; then the boot sequence stops in
reverse: the pods socket, ..., storage last; then the spans still queued are exported.

Every error an operator must fix is a ``StartupError``; only the edge (``make_service``,
which the twistd plugin calls, and ``startup.Edge`` around the daemon) turns it into one
line on standard error and a non-zero exit.
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import socket
from typing import TYPE_CHECKING, Optional

import attrs
from twisted.internet.defer import inlineCallbacks
from twisted.internet.endpoints import serverFromString
from twisted.internet.task import deferLater
from twisted.logger import Logger

from platformd.admission import plugins as admission_plugins
from platformd.admission.config import AdmissionConfigError, read_admission_configuration
from platformd.api import health
from platformd.audit.fromflags import build as audit_from_flags
from platformd.auth import serviceaccount
from platformd.auth.authenticators import (
    AuthenticatorChain, TokenAuthenticator, TokenFileError, X509Authenticator,
)
from platformd.auth.authorizers import AlwaysAllow, AuthorizerChain
from platformd.auth.fromflags import (
    AuthFlagError, authenticators_from_flags, authorizers_from_flags,
)
from platformd.auth.interfaces import IAuthenticator
from platformd.bulklane import BulkLane
from platformd.controllers.platformservice import advertise_address
from platformd.compose import (
    Authentication, Authorization, Components, Internals, Limits, boot_sequence, compose,
)
from platformd.edge.listening import (
    DRAIN_POLL, ListenerService, activated_socket, adopted_socket, listen_description,
    tls_factory,
)
from platformd.edge.tlscontext import server_tls_options
from platformd.files import privatefiles
from platformd.files.pki import PKIError, ensure_pki
from platformd.metrics.configreloads import ConfigReloads
from platformd.process.lifecycle import Sequence, Step
from platformd.process.sdnotify import Notifier, WatchdogService
from platformd.process.startup import Edge, StartupError, exit_with
from platformd.process.workers import LISTENING_FD, Workers
from platformd.registry import core
from platformd.registry.catalog import builtin
from platformd.storage.sqlite import SQLiteStorage
from platformd.util.ids import apiserver_id

if TYPE_CHECKING:
    from platformd.audit.record import Auditor
    from platformd.podinfo.service import PodsService
    from platformd.tracing.provider import Tracing

log = Logger()

#: How long shutdown waits for the requests in flight: upstream's ``ShutdownTimeout``
#: (60 s, the request timeout, which bounds every request but watches).
SHUTDOWN_TIMEOUT = 60.0
#: How long ended watches have to send what they still hold before they are cut.
WATCH_END_TIMEOUT = 5.0


class PlatformService(Sequence):
    """
    The daemon's tree (see module docstring), made by ``daemon``: its children are
    parented here and started and stopped by ``Sequence``; this class only names the
    parts for the daemon's own callbacks, tests and tools.
    """

    name = "platformd"

    def __init__(self, options, reactor, components: Components, listener: ListenerService,
                 notifier: Notifier, host: str, serving_port: int, data_dir: str, *,
                 reloaders: list, pods: Optional[PodsService] = None,
                 tracing: Optional[Tracing] = None, auditor: Optional[Auditor] = None,
                 workers: Optional[Workers] = None):
        super().__init__()
        self.options = options
        self.reactor = reactor
        self.components = components
        self.listener = listener
        self.notifier = notifier
        #: Where HTTPS is served: the socket passed (socket activation), or
        #: --bind-address:--secure-port (0: a port the system picks).
        self.host, self.serving_port = host, serving_port
        self.data_dir = data_dir
        #: The reloadable configuration files' reloaders (checked at SIGHUP).
        self.reloaders = reloaders
        #: The pods socket (feature gate PodsAPI), the tracer and the audit stages, or
        #: None; the boot sequence.
        self.pods = pods
        self.tracing = tracing
        self.auditor = auditor
        #: ``--workers``' other processes (worker 0 only), or None.
        self.workers = workers
        self.boot: Sequence

    # The composed parts, as tests and tools reach them.
    catalog = property(lambda self: self.components.catalog)
    storage = property(lambda self: self.components.storage)
    cache = property(lambda self: self.components.cache)
    snapshots = property(lambda self: self.components.snapshots)
    expiry = property(lambda self: self.components.expiry)
    namespaces = property(lambda self: self.components.namespaces)
    stores = property(lambda self: self.components.stores)
    api = property(lambda self: self.components.api)
    site = property(lambda self: self.components.site)
    #: The ``IListeningPort`` and the TLS factory, once listening.
    port = property(lambda self: self.listener.port)
    factory = property(lambda self: self.listener.factory)
    #: Fires once booting ended: ready, or failed (with the failure).
    booted = property(lambda self: self.started)

    @property
    def ready(self) -> bool:
        return self.components.ready

    def _listened(self, port) -> None:
        if not self.options["tls-cert-file"] and not self.serving_port:
            # An ephemeral port: point admin.kubeconfig at the port we really got.
            try:
                _ensure_pki(self.data_dir, self.host, port.getHost().port)
            except PKIError as e:
                raise StartupError(str(e)) from None

    def _on_ready(self) -> None:
        # Everything loaded so far (modules, the cache) lives as long as the process:
        # take it out of the collector's view so full collections stay short.  Only the
        # young generations are collected first (~1 ms): a full collection here took
        # ~50 ms of the time to ready to find ~230 objects (~23 KB, twistd's plugin cache
        # and logging setup), which are frozen with the rest instead.
        gc.collect(1)
        gc.freeze()
        url = f"https://{self.host}:{self.serving_port or self.port.getHost().port}"
        log.info("platformd serving on {url}", url=url)
        self.notifier.ready(f"serving on {url}")

    def _handle_sighup(self) -> None:
        signal.signal(signal.SIGHUP, self._sighup)

    def _restore_signals(self) -> None:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        # A graceful shutdown is a success: exit 0, as kube-apiserver does (twistd
        # would end the process with the signal it received).
        self.reactor._exitSignal = None

    def _sighup(self, signum, frame) -> None:
        # A signal handler runs between two bytecodes of the reactor's thread: leave the
        # work to the reactor.
        self.reactor.callFromThread(self.reload)

    def reload(self) -> None:
        """
        Check every reloadable configuration file now instead of at its next poll
        (SIGHUP): ``--authentication-config``, ``--authorization-config`` and, with
        ``--encryption-provider-config-automatic-reload``, the encryption configuration.
        A file that does not load is logged and the one in use stays, as at a poll.
        """
        if not self.ready:
            log.info("SIGHUP before the server is ready: nothing reloaded")
            return
        self.notifier.notify("RELOADING=1", "STATUS=reloading configuration files")
        changed = [type(r).__name__ for r in self.reloaders if r.check()]
        if self.workers is not None:
            self.workers.reload()
        log.info("SIGHUP: reloaded {changed}", changed=", ".join(changed) or "nothing")
        self.notifier.ready(f"serving on https://{self.host}:{self.port.getHost().port}")

    def _start_reloading(self) -> None:
        for reloader in self.reloaders:
            reloader.start()

    def _stop_reloading(self) -> None:
        for reloader in self.reloaders:
            reloader.stop()

    @inlineCallbacks
    def _terminate(self):
        """Graceful termination (see module docstring): the ``serving`` step's stop."""
        api = self.components.api
        # The workers terminate as this process does, at the same time.
        workers = self.workers.terminate() if self.workers is not None else None
        # /readyz's ``shutdown`` check fails from now on; requests are still served.
        self.components.health.shutdown.initiated = True
        delay = self.options["shutdown-delay-duration"]
        if delay > 0 and self.ready:
            log.info("shutting down: /readyz fails for {delay}s before accepting stops",
                     delay=delay)
            yield deferLater(self.reactor, delay)
        self.notifier.status("shutting down: finishing requests in flight")
        listener, watcher = self.listener, api.watcher
        yield listener.stop_listening()
        # Writes in flight finish first, so every watch has seen them (the cache offers
        # a write's event to watchers in the reactor turn after it is acknowledged: give
        # that turn time to come)...
        yield listener.drain(self.reactor, SHUTDOWN_TIMEOUT,
                             settled=lambda: listener.in_flight() <= len(watcher.streams))
        yield deferLater(self.reactor, DRAIN_POLL)
        # ...then each watch ends with a bookmark at the last revision.
        watcher.end_all()
        yield listener.drain(self.reactor, WATCH_END_TIMEOUT)
        yield listener.stopService()
        if workers is not None:
            self.notifier.status("shutting down: waiting for the workers")
            yield workers
        self.components.begin_shutdown()
        self.notifier.status("shutting down: closing storage")


def daemon(options, reactor, notifier: Notifier | None = None,
           handle_signals: bool = False) -> PlatformService:
    """
    The daemon for ``options`` (see module docstring): every file read, every part
    built, nothing listening or running yet.  Raises ``StartupError``.  ``notifier``:
    systemd's notifications (nothing is sent unless started with $NOTIFY_SOCKET);
    ``handle_signals``: SIGHUP reloads (the daemon only, not servers a test starts in
    its own process).
    """
    data_dir = os.path.abspath(options["data-dir"])
    narrowed = privatefiles.directory(data_dir, "--data-dir")
    if narrowed is not None:
        log.warn("--data-dir {path} was mode {mode}, open to other users: made 0700",
                 path=data_dir, mode=f"{narrowed:04o}")
    notifier = notifier or Notifier(reactor)
    worker = options["worker"]  # workers 1..N-1 of --workers (process/workers.py)
    inherited = (adopted_socket(reactor, LISTENING_FD) if worker
                 else activated_socket(reactor))
    host, serving_port = ((inherited.host, inherited.port) if inherited
                          else (options["bind-address"], options["secure-port"]))
    catalog = builtin()
    egress = _egress_selector(options, reactor)
    encryption = _encryption(options, reactor, catalog)
    # Events' writes wait for the others' (bulklane.py): in the storage and the requests.
    lane = BulkLane(reactor)
    storage = _storage(options, reactor, data_dir, egress, lane,
                       **({"transformer": encryption.transformer} if encryption else {}))
    tls = _tls(options, data_dir, host, serving_port)
    tracing = _tracing(options, reactor, egress)
    auditor = audit_from_flags(options, reactor)
    request_tracing = None
    if tracing is not None:
        from platformd.tracing.requests import RequestTracing
        request_tracing = RequestTracing(tracing)
    # The server's own Service's endpoints (controllers/platformservice.py): where
    # others reach this server, once it listens.
    advertised = advertise_address(host, options["advertise-address"])
    placed: dict = {}
    try:
        components = compose(
            storage, reactor, options["feature-gates"],
            functools.partial(_authentication, options, reactor, data_dir, egress),
            authorization=functools.partial(_authorization, options, reactor, egress),
            watch_history_ttl=options["watch-history-ttl"],
            continue_token_ttl=options["continue-token-ttl"],
            event_ttl=options["event-ttl"],
            address=f"{host}:{serving_port}", catalog=catalog,
            admission_names=_admission_names(options),
            admission_configs=_admission_configs(options), egress=egress, auditor=auditor,
            request_tracing=request_tracing, bulk_lane=lane,
            limits=Limits(options["max-requests-inflight"],
                          options["max-mutating-requests-inflight"],
                          options["request-timeout"]),
            health_checks=[encryption.checks] if encryption else [],
            service_network=options["service-network"],
            master=lambda: (advertised,
                            serving_port or placed["daemon"].port.getHost().port))
    except AdmissionConfigError as e:
        raise StartupError(str(e)) from None
    listener = ListenerService(
        reactor, inherited.endpoint if inherited
        else serverFromString(reactor, listen_description(options)),
        lambda: tls_factory(tls, components.site), address=f"{host}:{serving_port}",
        at_start=not worker, shared=options["workers"] > 1 or bool(worker))
    pods = None
    if options["feature-gates"]["PodsAPI"] and not worker:
        from platformd.podinfo.service import PodsService  # grpcio only when gated on
        pods = PodsService(reactor, components.informers.for_kind(core.POD),
                           options["pods-socket"], options["node-name"], tracing=tracing)
    reloaders = [*components.reloaders,
                 *([encryption.reloader] if encryption and encryption.reloader else [])]
    workers = None
    if options["workers"] > 1:
        workers = Workers(reactor, options["workers"], options.argv,
                          lambda: placed["daemon"].port.fileno(),
                          relay=auditor.sink.relay if auditor is not None else None)
    daemon = placed["daemon"] = PlatformService(
        options, reactor, components, listener, notifier, host, serving_port, data_dir,
        reloaders=reloaders, pods=pods, tracing=tracing, auditor=auditor, workers=workers)
    after_cache: list = [Step("config-reload", daemon._start_reloading, daemon._stop_reloading)]
    if options["storage-backend"] == "etcd3":
        from platformd.storage.etcd3.compactor import Compactor
        compactor = Compactor(storage.client, options["etcd-compaction-interval"], reactor)
        after_cache.append(Step("etcd-compactor", compactor.start, compactor.stop))
    if auditor is not None:
        after_cache.append(Step("audit-log", auditor.sink.start, auditor.sink.stop))
    if pods is not None:
        after_cache.append(pods)
    boot = daemon.boot = boot_sequence(components, after_cache=after_cache,
                                       on_ready=daemon._on_ready)
    boot.name = "boot"
    boot.on_step = lambda step: notifier.status(f"starting: {step}")
    daemon.on_stopping = notifier.stopping
    listening = [
        listener,
        Step("listening", lambda: listener.listening().addCallback(daemon._listened))]
    children = [
        WatchdogService(notifier, reactor),
        *([Step("signals", daemon._handle_sighup, daemon._restore_signals)]
          if handle_signals else []),
        *([Step("tracing", None, tracing.shutdown)] if tracing is not None else []),
        # A worker accepts once ready; worker 0 (or a server alone) listens first of
        # all, answering 503 until ready, so a port in use fails at once.
        *(listening if not worker else []),
        boot,
        *(listening if worker else []),
        *([workers] if workers is not None else []),
        *([_parent_watch(reactor)] if worker else []),
        Step("serving", None, daemon._terminate)]
    for child in children:
        child.setServiceParent(daemon)
    return daemon


def _parent_watch(reactor) -> Step:
    """A worker stops gracefully once worker 0 is gone (process/parentwatch.py)."""
    from platformd.process.parentwatch import ParentWatch
    watch = ParentWatch(reactor, lambda: reactor.callLater(0, reactor.stop))
    return Step("parent-watch", watch.start, watch.stop)


def _authentication(options, reactor, data_dir: str, egress,
                    internals: Internals) -> Authentication:
    """Client certificates, ``--token-auth-file``, the JWT issuers (their keys fetched
    through ``egress``), service-account tokens (their issuer served too) and anonymous
    access, as the flags say."""
    static: list[IAuthenticator] = [X509Authenticator()]
    if options["token-auth-file"]:
        try:
            static.append(TokenAuthenticator.from_file(options["token-auth-file"]))
        except TokenFileError as e:
            raise StartupError(str(e)) from None
    try:
        token_issuer, service_accounts = serviceaccount.build(
            internals.informers, internals.sync, reactor, data_dir,
            options["service-account-signing-key-file"],
            [options["service-account-key-file"]] if options["service-account-key-file"]
            else (), options["service-account-issuer"] or serviceaccount.DEFAULT_ISSUER)
    except (serviceaccount.SigningKeyError, PKIError) as e:
        raise StartupError(f"service-account keys: {e}") from None
    chain = AuthenticatorChain([])
    try:
        reloader = authenticators_from_flags(options, chain, static, (service_accounts,),
                                             reactor, reactor, _reloads(internals, reactor),
                                             egress=egress)
    except AuthFlagError as e:
        raise StartupError(str(e)) from None
    return Authentication(chain, token_issuer, reloader)


def _authorization(options, reactor, egress, internals: Internals) -> Authorization:
    """``--authorization-mode`` or ``--authorization-config`` (webhooks dialled through
    ``egress``)."""
    chain = AuthorizerChain([AlwaysAllow()])
    try:
        reloader = authorizers_from_flags(options, chain, internals.rbac, reactor,
                                          _reloads(internals, reactor), egress=egress)
    except AuthFlagError as e:
        raise StartupError(str(e)) from None
    return Authorization(chain, reloader)


def _reloads(internals: Internals, reactor):
    """Counts each configuration file's reloads in the server's metrics."""
    return functools.partial(ConfigReloads, internals.metrics.registry, apiserver_id(),
                             reactor)


def _storage(options, reactor, data_dir: str, egress, lane: BulkLane, **transformer):
    """``--storage-backend``: SQLite in ``--data-dir`` (shared with other processes:
    ``--shared-data-dir``, docs/storage.md), or etcd (docs/etcd.md); SQLite commits and
    acknowledges bulk writes through ``lane``."""
    if options["storage-backend"] != "etcd3":
        return SQLiteStorage(reactor, os.path.join(data_dir, "platformd.db"),
                             shared=bool(options["shared-data-dir"]), lane=lane,
                             **transformer)
    from platformd.storage.etcd3.client import Client, TLSFiles
    from platformd.storage.etcd3.store import EtcdStorage
    tls = TLSFiles(options["etcd-cafile"] or "", options["etcd-certfile"] or "",
                   options["etcd-keyfile"] or "")
    try:
        client = Client(reactor, options["etcd-servers"], tls,
                        timeout=options["request-timeout"],
                        channel_options=_etcd_channel(egress))
    except ValueError as e:
        raise StartupError(str(e)) from None
    return EtcdStorage(reactor, client, prefix=options["etcd-prefix"], root="/registry",
                       **transformer)


def _tls(options, data_dir: str, host: str, serving_port: int):
    """The serving certificate and client CA: the flags' files, or the PKI made (first
    start) or reused under ``--data-dir``."""
    cert, key, client_ca = (options["tls-cert-file"], options["tls-private-key-file"],
                            options["client-ca-file"])
    try:
        if not cert:
            paths = _ensure_pki(data_dir, host, serving_port or 6443)
            cert, key, client_ca = paths.serving_cert, paths.serving_key, paths.client_ca
        return server_tls_options(cert, key, client_ca,
                                  http2=bool(options["enable-http2-serving"]
                                             and not options["disable-http2-serving"]))
    except PKIError as e:
        raise StartupError(str(e)) from None


def _ensure_pki(data_dir: str, bind: str, port: int):
    wildcard = bind in ("0.0.0.0", "::", "")
    host = "127.0.0.1" if wildcard else bind
    ips = [] if wildcard or bind in ("127.0.0.1", "::1") else [bind]
    url_host = f"[{host}]" if ":" in host else host
    return ensure_pki(data_dir, [socket.gethostname()], ips, f"https://{url_host}:{port}")


@attrs.frozen
class _Encryption:
    """``--encryption-provider-config`` read: the storage's transformer, its health
    checks and (with automatic reload) its reloader."""

    transformer: object
    checks: tuple
    reloader: object


def _encryption(options, reactor, catalog) -> Optional[_Encryption]:
    path = options["encryption-provider-config"]
    if not path:
        return None
    from platformd.storage.encryption.errors import EncryptionConfigError
    from platformd.storage.encryption.reload import EncryptionReloader, Swappable, load_into
    transformer = Swappable(reactor)
    served = lambda: [(k.plural, k.group) for k in catalog.kinds]  # noqa: E731
    kms_v1 = options["feature-gates"]["KMSv1"]
    reload = options["encryption-provider-config-automatic-reload"]
    try:
        load_into(transformer, path, served(), reload, kms_v1)
    except EncryptionConfigError as e:
        raise StartupError(f"--encryption-provider-config: {e}") from None
    checks = (transformer.health_checks(reload), (health.HEALTHZ, health.READYZ),
              health.STORAGE_CHECKS)
    reloader = (EncryptionReloader(path, transformer, served, reactor, kms_v1=kms_v1)
                if reload else None)
    return _Encryption(transformer, checks, reloader)


def _egress_selector(options, reactor):
    """The selector of ``--egress-selector-config-file`` (None without it)."""
    path = options.get("egress-selector-config-file")
    if not path:
        return None
    from platformd.egress import selector
    from platformd.egress.config import EgressConfigError, load_egress_config
    try:
        return selector.EgressSelector(load_egress_config(path), reactor)
    except EgressConfigError as e:
        raise StartupError(str(e)) from None


def _etcd_channel(egress) -> tuple:
    """grpcio's options that take the etcd client through the ``etcd`` egress
    selection (an ``http://`` CONNECT proxy, ``grpc.http_proxy``); a selection grpcio
    cannot follow (a UNIX-socket or TLS proxy, GRPC) stops the server."""
    if egress is None:
        return ()
    from platformd.egress.config import ETCD
    from platformd.egress.selector import EgressUnsupported
    try:
        return egress.grpc_channel_options(ETCD)
    except EgressUnsupported as e:
        raise StartupError(f"--storage-backend etcd3: {e}") from None


def _tracing(options, reactor, egress):
    """``--tracing-config-file``'s tracer: spans for requests and what they call
    (docs/tracing.md), or None.  The SDK is imported only when tracing is configured."""
    path = options.get("tracing-config-file")
    if not path:
        return None
    from platformd.tracing.config import TracingConfigError, load_tracing_config
    from platformd.tracing.provider import Tracing
    try:
        config = load_tracing_config(path)
    except TracingConfigError as e:
        raise StartupError(str(e)) from None
    return Tracing(config, reactor, channel_options=_collector_channel(egress))


def _collector_channel(egress) -> tuple:
    """The OTLP exporter goes through the controlplane egress selection, as upstream's;
    where grpcio cannot follow it, directly (with a warning)."""
    if egress is None:
        return ()
    from platformd.egress.config import CONTROLPLANE
    from platformd.egress.selector import EgressUnsupported
    try:
        return egress.grpc_channel_options(CONTROLPLANE)
    except EgressUnsupported as e:
        log.warn("tracing: {error}; the collector is dialled directly", error=str(e))
        return ()


def _admission_configs(options):
    """``--admission-control-config-file`` read (None without it)."""
    path = options.get("admission-control-config-file")
    if not path:
        return None
    try:
        return read_admission_configuration(path)
    except AdmissionConfigError as e:
        raise StartupError(f"failed to read plugin config: {e}") from None


def _admission_names(options) -> list:
    """The admission plugins enabled by ``--enable/--disable-admission-plugins`` (upstream's
    ``AdmissionOptions.Validate`` and its words for an unknown name)."""
    try:
        return admission_plugins.builtin().enabled(
            options.get("enable-admission-plugins") or (),
            options.get("disable-admission-plugins") or ())
    except admission_plugins.AdmissionFlagError as e:
        raise StartupError(str(e)) from None


def make_service(options, reactor=None) -> Edge:
    """
    What ``twistd platformd`` runs (the plugin's ``makeService``): the daemon for
    ``options`` inside ``Edge``, where a ``StartupError`` — here or when it starts —
    becomes one line on standard error and exit status 1.  No I/O happens here.  Tests
    and tools that want exceptions construct ``PlatformService`` directly.
    """
    if reactor is None:
        from twisted.internet import reactor
    try:
        return Edge(daemon(options, reactor, handle_signals=True), reactor)
    except StartupError as e:
        exit_with(e)
