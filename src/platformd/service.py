"""
The daemon: ``PlatformService``, the service tree ``twistd platformd`` runs.

::

    Edge (startup.py: StartupError → one line, exit 1)          make_service, for twistd
    └── PlatformService
        ├── ListenerService "https"     listening.py: an endpoint description, TLS factory
        └── Sequence "boot"             lifecycle.py / compose.boot_sequence
            ├── storage                 SQLite: open, recover; or etcd: connect, follow
            ├── cache                   load every object at one revision, follow storage
            ├── expiry                  history/snapshot expiry LoopingCall
            ├── namespace-controller
            ├── pods-socket             (feature gate PodsAPI)
            ├── builtin-namespaces
            └── ready                   /readyz answers 200 from here on

Constructing it does no I/O (``compose`` only builds objects).  ``privilegedStartService``
reads and writes the files (``prepare``: ``--data-dir``, the PKI, TLS options, the token
file), then listens — first of all, so a port in use fails at once — then binds the
pods socket.  ``startService`` starts the boot sequence, each step once the previous
one has finished (``MultiService`` alone would not wait for storage to open before
loading the cache); API requests before "ready" are answered 503.

Under systemd (``Type=notify``, sdnotify.py) each boot step is a ``STATUS=`` line,
``READY=1`` follows the ``ready`` step, and the watchdog is pinged while running.  With
socket activation the one socket passed is served instead of ``--secure-port``
(``listening.activated_socket``).  SIGHUP checks the reloadable configuration files at
once.

``stopService`` (SIGTERM) is upstream's graceful termination: ``STOPPING=1``; ``/readyz``
fails for ``--shutdown-delay-duration`` while requests are still served; then no new
connection is accepted and each connection is closed once its requests are answered;
once only watches are left (or after ``SHUTDOWN_TIMEOUT``) every watch ends cleanly, with
a bookmark at the last revision if it asked for bookmarks, so its client resumes from
there without a relist; then the boot sequence stops in reverse: the pods socket, ...,
storage last.

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
from typing import TYPE_CHECKING, Optional, Union

from twisted.application import service
from twisted.internet.defer import Deferred, inlineCallbacks, succeed
from twisted.internet.endpoints import serverFromString
from twisted.internet.task import deferLater
from twisted.logger import Logger

from platformd.api import health
from platformd.api.site import make_site
from platformd.audit.fromflags import build as audit_from_flags
from platformd.auth.authenticators import (
    AuthenticatorChain, TokenAuthenticator, TokenFileError, X509Authenticator,
)
from platformd.auth import serviceaccount
from platformd.auth.interfaces import IAuthenticator
from platformd.auth.fromflags import (
    AuthFlagError, authenticators_from_flags, authorizers_from_flags,
)
from platformd.admission import plugins as admission_plugins
from platformd.admission.config import AdmissionConfigError, read_admission_configuration
from platformd.compose import Components, boot_sequence, compose
from platformd.util.ids import apiserver_id
from platformd.process.lifecycle import Step
from platformd.edge.listening import (
    DRAIN_POLL, ListenerService, activated_socket, listen_description, tls_factory,
)
from platformd.files import privatefiles
from platformd.metrics.configreloads import ConfigReloads
from platformd.files.pki import PKIError, ensure_pki
from platformd.registry import core
from platformd.process.sdnotify import Notifier, WatchdogService
from platformd.process.startup import Edge, StartupError, exit_with
from platformd.storage.sqlite import SQLiteStorage
from platformd.edge.tlscontext import ServerTLS, server_tls_options

if TYPE_CHECKING:
    from platformd.audit.record import Auditor
    from platformd.auth.authnreload import AuthenticationReloader
    from platformd.auth.reloading import AuthorizationReloader
    from platformd.egress.selector import EgressSelector
    from platformd.podinfo.service import PodsService
    from platformd.storage.encryption.reload import EncryptionReloader, Swappable
    from platformd.tracing.provider import Tracing

log = Logger()

#: How long shutdown waits for the requests in flight: upstream's ``ShutdownTimeout``
#: (60 s, the request timeout, which bounds every request but watches).
SHUTDOWN_TIMEOUT = 60.0
#: How long ended watches have to send what they still hold before they are cut.
WATCH_END_TIMEOUT = 5.0


class PlatformService(service.MultiService):
    """The daemon (see module docstring)."""

    def __init__(self, options, reactor, notifier: Notifier | None = None,
                 handle_signals: bool = False):
        super().__init__()
        self.options = options
        self.reactor = reactor
        self.data_dir = os.path.abspath(options["data-dir"])
        #: systemd's notifications (nothing is sent unless started with $NOTIFY_SOCKET).
        self.notifier = notifier or Notifier(reactor)
        self.watchdog = WatchdogService(self.notifier, reactor)
        #: SIGHUP is handled only by the daemon (make_service), not by services that
        #: tests start in their own process.
        self.handle_signals = handle_signals
        inherited = activated_socket(reactor)
        #: Where HTTPS is served: the socket passed (socket activation), or
        #: --bind-address:--secure-port.
        self.host: str
        self.serving_port: int
        self.host, self.serving_port = (
            (inherited.host, inherited.port) if inherited
            else (options["bind-address"], options["secure-port"]))
        bind, port = self.host, self.serving_port
        #: The TLS options, read by ``prepare``.
        self.tls: Optional[ServerTLS] = None
        #: The authenticators are chosen by ``prepare`` (the token file is read there);
        #: the chain itself is what the API holds.
        self.authenticator = AuthenticatorChain([])
        #: ``--encryption-provider-config``'s transformer, filled by ``prepare`` (or None).
        self.encryption: Optional[Swappable] = None
        if options["encryption-provider-config"]:
            from platformd.storage.encryption.reload import Swappable
            self.encryption = Swappable(reactor)
        self.encryption_reloader: Optional[EncryptionReloader] = None
        #: ``--egress-selector-config-file``'s selector once read (``_egress_selector``).
        self._selector: Optional[EgressSelector] = None
        storage = self._storage(**({"transformer": self.encryption} if self.encryption
                                   else {}))
        self.components: Components = compose(
            storage, reactor, options["feature-gates"], self.authenticator,
            watch_history_ttl=options["watch-history-ttl"],
            continue_token_ttl=options["continue-token-ttl"],
            address=f"{bind}:{port}", admission_names=_admission_names(options),
            egress=self._egress_selector())
        api = self.components.api
        api.max_in_flight.readonly = options["max-requests-inflight"]
        api.max_in_flight.mutating = options["max-mutating-requests-inflight"]
        api.request_deadline.maximum = options["request-timeout"]
        self.site = make_site(self.components.resource())
        self.listener = ListenerService(
            reactor, inherited.endpoint if inherited
            else serverFromString(reactor, listen_description(options)),
            lambda: tls_factory(self.tls, self.site), address=f"{bind}:{port}")
        self.listener.setServiceParent(self)
        #: The ``--authentication-config`` and ``--authorization-config`` reloaders, made
        #: by ``prepare`` (or None).
        self.authentication_reloader: Optional[AuthenticationReloader] = None
        self.authorization_reloader: Optional[AuthorizationReloader] = None
        after_cache: list[Union[Step, PodsService]] = [
            Step("config-reload", self._start_reloading, self._stop_reloading)]
        #: The pods socket (feature gate PodsAPI), or None.
        self.pods: Optional[PodsService] = None
        if options["storage-backend"] == "etcd3":
            from platformd.storage.etcd3.compactor import Compactor
            compactor = Compactor(storage.client, options["etcd-compaction-interval"], reactor)
            after_cache.append(Step("etcd-compactor", compactor.start, compactor.stop))
        #: The audit stages (``audit.record.Auditor``), made by ``prepare`` (or None).
        self.auditor: Optional[Auditor] = None
        if options.get("audit-policy-file") and options.get("audit-log-path"):
            after_cache.append(Step("audit-log", self._start_audit, self._stop_audit))
        if options["feature-gates"]["PodsAPI"]:
            from platformd.podinfo.service import PodsService  # grpcio only when gated on
            self.pods = PodsService(reactor, self.components.informers.for_kind(core.POD),
                                    options["pods-socket"], options["node-name"])
            after_cache.append(self.pods)
        #: ``--tracing-config-file``'s tracer (``tracing.provider.Tracing``), made by
        #: ``prepare``; None: nothing is traced.
        self.tracing: Optional[Tracing] = None
        self.boot = boot_sequence(self.components, after_cache=after_cache,
                                  on_ready=self._on_ready)
        self.boot.name = "boot"
        self.boot.on_step = lambda step: self.notifier.status(f"starting: {step}")
        self.boot.setServiceParent(self)
        #: Fires once booting ended: ready, or failed (with the failure).
        self.booted: Deferred | None = None
        self._until_listening: Deferred = succeed(None)

    def _storage(self, **transformer):
        """``--storage-backend``: SQLite in ``--data-dir``, or etcd (docs/etcd.md)."""
        options = self.options
        if options["storage-backend"] != "etcd3":
            return SQLiteStorage(self.reactor, os.path.join(self.data_dir, "platformd.db"),
                                 **transformer)
        from platformd.storage.etcd3.client import Client, TLSFiles
        from platformd.storage.etcd3.store import EtcdStorage
        tls = TLSFiles(options["etcd-cafile"] or "", options["etcd-certfile"] or "",
                       options["etcd-keyfile"] or "")
        try:
            client = Client(self.reactor, options["etcd-servers"], tls,
                            timeout=options["request-timeout"],
                            channel_options=self._etcd_channel())
        except ValueError as e:
            raise StartupError(str(e)) from None
        return EtcdStorage(self.reactor, client, prefix=options["etcd-prefix"],
                           root="/registry", **transformer)

    # The composed parts, as tests and tools reach them.
    catalog = property(lambda self: self.components.catalog)
    storage = property(lambda self: self.components.storage)
    cache = property(lambda self: self.components.cache)
    snapshots = property(lambda self: self.components.snapshots)
    stores = property(lambda self: self.components.stores)
    api = property(lambda self: self.components.api)
    expiry = property(lambda self: self.components.expiry)
    namespaces = property(lambda self: self.components.namespaces)
    #: The ``IListeningPort`` and the TLS factory, once listening.
    port = property(lambda self: self.listener.port)
    factory = property(lambda self: self.listener.factory)

    @property
    def ready(self) -> bool:
        return self.components.ready

    def prepare(self) -> None:
        """
        The daemon's files: make ``--data-dir``; make (first start) or reuse the PKI
        under it unless certificates are given; read the TLS options; read the token
        file.  Raises ``StartupError``.  The kubeconfig's server URL is rewritten once
        the listening port is known (``privilegedStartService``).
        """
        narrowed = privatefiles.directory(self.data_dir, "--data-dir")
        if narrowed is not None:
            log.warn("--data-dir {path} was mode {mode}, open to other users: made 0700",
                     path=self.data_dir, mode=f"{narrowed:04o}")
        options = self.options
        self._encryption()
        cert, key, client_ca = (options["tls-cert-file"], options["tls-private-key-file"],
                                options["client-ca-file"])
        try:
            if not cert:
                paths = self._ensure_pki(self.serving_port or 6443)
                cert, key, client_ca = paths.serving_cert, paths.serving_key, paths.client_ca
            self.tls = server_tls_options(cert, key, client_ca,
                                          http2=bool(options["enable-http2-serving"]
                                                     and not options["disable-http2-serving"]))
        except PKIError as e:
            raise StartupError(str(e)) from None
        self._admission_config()
        self._tracing()
        self.auditor = audit_from_flags(options, self.reactor)
        if self.auditor is not None:
            self.components.api.audit(self.auditor)
        static: list[IAuthenticator] = [X509Authenticator()]
        if options["token-auth-file"]:
            try:
                static.append(TokenAuthenticator.from_file(options["token-auth-file"]))
            except TokenFileError as e:
                raise StartupError(str(e)) from None
        try:
            token_issuer, service_accounts = serviceaccount.build(
                self.components.informers, self.components.cache.sync, self.reactor, self.data_dir,
                options["service-account-signing-key-file"],
                [options["service-account-key-file"]] if options["service-account-key-file"]
                else (), options["service-account-issuer"] or serviceaccount.DEFAULT_ISSUER)
        except (serviceaccount.SigningKeyError, PKIError) as e:
            raise StartupError(f"service-account keys: {e}") from None
        self.components.api.serve_tokens(token_issuer)
        reloads = functools.partial(ConfigReloads, self.components.metrics.registry,
                                    apiserver_id(), self.reactor)
        try:
            self.authentication_reloader = authenticators_from_flags(
                options, self.authenticator, static, (service_accounts,), self.reactor,
                self.reactor, reloads, egress=self._egress_selector())
            self.authorization_reloader = authorizers_from_flags(
                options, self.components.api.authorizer, self.components.rbac, self.reactor,
                reloads, egress=self._egress_selector())
        except AuthFlagError as e:
            raise StartupError(str(e)) from None

    def _encryption(self) -> None:
        """Read ``--encryption-provider-config`` into the storage's transformer."""
        if self.encryption is None:
            return
        from platformd.storage.encryption.errors import EncryptionConfigError
        from platformd.storage.encryption.reload import EncryptionReloader, load_into
        path = self.options["encryption-provider-config"]
        served = lambda: [(k.plural, k.group) for k in self.components.catalog.kinds]  # noqa: E731
        kms_v1 = self.options["feature-gates"]["KMSv1"]
        reload = self.options["encryption-provider-config-automatic-reload"]
        try:
            load_into(self.encryption, path, served(), reload, kms_v1)
        except EncryptionConfigError as e:
            raise StartupError(f"--encryption-provider-config: {e}") from None
        self.components.health.checks.add_checks(
            self.encryption.health_checks(reload), (health.HEALTHZ, health.READYZ),
            after=health.STORAGE_CHECKS)
        if reload:
            self.encryption_reloader = EncryptionReloader(path, self.encryption, served,
                                                          self.reactor, kms_v1=kms_v1)

    def _egress_selector(self):
        """The selector of ``--egress-selector-config-file`` (None without it), read
        once, with the daemon (its etcd channel and admission webhooks are made then),
        and handed to each client that connects (docs/egress.md): never process-wide, so
        two daemons in one process each keep theirs.  Raises ``StartupError``."""
        path = self.options.get("egress-selector-config-file")
        if self._selector is None and path:
            from platformd.egress import selector
            from platformd.egress.config import EgressConfigError, load_egress_config
            try:
                self._selector = selector.EgressSelector(load_egress_config(path),
                                                         self.reactor)
            except EgressConfigError as e:
                raise StartupError(str(e)) from None
        return self._selector

    def _etcd_channel(self) -> tuple:
        """grpcio's options that take the etcd client through the ``etcd`` egress
        selection (an ``http://`` CONNECT proxy, ``grpc.http_proxy``); a selection
        grpcio cannot follow (a UNIX-socket or TLS proxy, GRPC) stops the server."""
        egress = self._egress_selector()
        if egress is None:
            return ()
        from platformd.egress.config import ETCD
        from platformd.egress.selector import EgressUnsupported
        try:
            return egress.grpc_channel_options(ETCD)
        except EgressUnsupported as e:
            raise StartupError(f"--storage-backend etcd3: {e}") from None

    def _tracing(self) -> None:
        """Read ``--tracing-config-file``: spans for requests and what they call
        (docs/tracing.md).  The SDK is imported only when tracing is configured."""
        path = self.options.get("tracing-config-file")
        if not path:
            return
        from platformd.tracing.config import TracingConfigError, load_tracing_config
        from platformd.tracing.provider import Tracing
        from platformd.tracing.requests import RequestTracing
        try:
            config = load_tracing_config(path)
        except TracingConfigError as e:
            raise StartupError(str(e)) from None
        self.tracing = Tracing(config, channel_options=self._collector_channel())
        self.components.api.trace_with(RequestTracing(self.tracing))
        if self.pods is not None:
            self.pods.tracing = self.tracing

    def _collector_channel(self) -> tuple:
        """The OTLP exporter goes through the controlplane egress selection, as
        upstream's; where grpcio cannot follow it, directly (with a warning)."""
        egress = self._egress_selector()
        if egress is None:
            return ()
        from platformd.egress.config import CONTROLPLANE
        from platformd.egress.selector import EgressUnsupported
        try:
            return egress.grpc_channel_options(CONTROLPLANE)
        except EgressUnsupported as e:
            log.warn("tracing: {error}; the collector is dialled directly", error=str(e))
            return ()

    def _admission_config(self) -> None:
        """Read ``--admission-control-config-file`` and give each plugin its part."""
        path = self.options.get("admission-control-config-file")
        if not path:
            return
        try:
            configs = read_admission_configuration(path)
        except AdmissionConfigError as e:
            raise StartupError(f"failed to read plugin config: {e}") from None
        try:
            self.components.configure_admission(configs)
        except AdmissionConfigError as e:
            raise StartupError(str(e)) from None

    def _start_audit(self) -> None:
        if self.auditor is not None:
            self.auditor.sink.start()

    def _stop_audit(self):
        """The events handed over are written before the daemon stops (a Deferred)."""
        if self.auditor is not None:
            return self.auditor.sink.stop()
        return None

    def _reloaders(self) -> list:
        return [r for r in (self.authentication_reloader, self.authorization_reloader,
                            self.encryption_reloader) if r is not None]

    def _start_reloading(self) -> None:
        for reloader in self._reloaders():
            reloader.start()

    def _stop_reloading(self) -> None:
        for reloader in self._reloaders():
            reloader.stop()

    def _ensure_pki(self, port: int):
        bind = self.host
        wildcard = bind in ("0.0.0.0", "::", "")
        host = "127.0.0.1" if wildcard else bind
        ips = [] if wildcard or bind in ("127.0.0.1", "::1") else [bind]
        url_host = f"[{host}]" if ":" in host else host
        return ensure_pki(self.data_dir, [socket.gethostname()], ips,
                          f"https://{url_host}:{port}")

    def privilegedStartService(self):
        """Files, then listen (a port in use fails here), then the pods socket."""
        self.prepare()
        self.listener.privilegedStartService()
        if self.listener.port is not None:  # every stream endpoint answers at once
            self._listened(self.listener.port)
        else:
            self._until_listening = self.listener.listening().addCallback(self._listened)
        self.boot.privilegedStartService()
        service.Service.privilegedStartService(self)

    def _listened(self, port) -> None:
        if not self.options["tls-cert-file"] and not self.serving_port:
            # An ephemeral port: point admin.kubeconfig at the port we really got.
            try:
                self._ensure_pki(port.getHost().port)
            except PKIError as e:
                raise StartupError(str(e)) from None

    def startService(self):
        """
        Start the boot sequence once listening (``MultiService.startService`` would start
        the children without waiting); ``booted`` fires when it has finished.
        """
        service.Service.startService(self)
        self.listener.startService()
        self.watchdog.startService()
        if self.handle_signals:
            signal.signal(signal.SIGHUP, self._sighup)
        self.booted = self._until_listening.addCallback(lambda _: self._start_boot())

    def _start_boot(self):
        if not self.running:
            return None  # stopped before listening
        return self.boot.startService()

    def _on_ready(self) -> None:
        # Everything loaded so far (modules, the cache) lives as long as the process:
        # take it out of the collector's view so full collections stay short.  Only the
        # young generations are collected first (~1 ms): a full collection here took
        # ~50 ms of the time to ready to find ~230 objects (~23 KB, twistd's plugin cache
        # and logging setup), which are frozen with the rest instead.
        gc.collect(1)
        gc.freeze()
        url = f"https://{self.host}:{self.port.getHost().port}"
        log.info("platformd serving on {url}", url=url)
        self.notifier.ready(f"serving on {url}")

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
        changed = [type(r).__name__ for r in self._reloaders() if r.check()]
        log.info("SIGHUP: reloaded {changed}", changed=", ".join(changed) or "nothing")
        self.notifier.ready(f"serving on https://{self.host}:{self.port.getHost().port}")

    @inlineCallbacks
    def stopService(self):
        """Graceful termination (see module docstring)."""
        service.Service.stopService(self)
        if self.handle_signals:
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
        self.notifier.stopping()
        api = self.components.api
        # /readyz's ``shutdown`` check fails from now on; requests are still served.
        self.components.health.shutdown.initiated = True
        delay = self.options["shutdown-delay-duration"]
        if delay > 0 and self.ready:
            log.info("shutting down: /readyz fails for {delay}s before accepting stops",
                     delay=delay)
            yield deferLater(self.reactor, delay)
        self.notifier.status("shutting down: finishing requests in flight")
        if self.listener.running:
            listener, watcher = self.listener, api.watcher
            yield listener.stop_listening()
            # Writes in flight finish first, so every watch has seen them (the cache
            # offers a write's event to watchers in the reactor turn after it is
            # acknowledged: give that turn time to come)...
            yield listener.drain(self.reactor, SHUTDOWN_TIMEOUT,
                                 settled=lambda: listener.in_flight() <= len(watcher.streams))
            yield deferLater(self.reactor, DRAIN_POLL)
            # ...then each watch ends with a bookmark at the last revision.
            watcher.end_all()
            yield listener.drain(self.reactor, WATCH_END_TIMEOUT)
            yield listener.stopService()
        self.components.begin_shutdown()
        if self.boot.running:
            self.notifier.status("shutting down: closing storage")
            yield self.boot.stopService()
        if self.tracing is not None:
            yield self.tracing.shutdown()  # the spans still queued are exported
        self.watchdog.stopService()
        if self.handle_signals:
            # A graceful shutdown is a success: exit 0, as kube-apiserver does (twistd
            # would end the process with the signal it received).
            self.reactor._exitSignal = None


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
        return Edge(PlatformService(options, reactor, handle_signals=True), reactor)
    except StartupError as e:
        exit_with(e)
