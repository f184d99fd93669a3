"""
Composing the daemon from its options: storage, watch cache, stores, authentication,
the HTTPS listener — and the order they start and stop in.

Start order: listen first (so a port in use fails at once, before anything else), then
open storage, fill the cache, start controllers, create the built-in namespaces, and only
then report ready (``/readyz``); API requests before that get 503.  Stop order is the
reverse, and storage stops last so pending writes finish.
"""

from __future__ import annotations

import gc
import os
import socket
import sys

from twisted.application import service
from twisted.internet import error as net_error
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory

from platformd import errors
from platformd.api.app import APIServer
from platformd.api.documents import Documents
from platformd.api.site import make_site
from platformd.auth.authenticators import (
    AuthenticatorChain, TokenAuthenticator, TokenFileError, X509Authenticator,
)
from platformd.auth.authorizers import AlwaysAllow, AuthorizerChain
from platformd.api.reads import Reader
from platformd.api.watch import WatchServer
from platformd.cache.continuetokens import Snapshots
from platformd.cache.expiry import Expiry
from platformd.cache.watchcache import WatchCache
from platformd.codecs.cborcodec import CBORCodec
from platformd.codecs.jsoncodec import JSONCodec
from platformd.codecs.negotiation import Negotiator
from platformd.codecs.protobufcodec import ProtobufCodec
from platformd.codecs.yamlcodec import YAMLCodec
from platformd.pki import PKIError, ensure_pki
from platformd.tlstransport import PlatformTLSTransport
from platformd.registry import core
from platformd.registry.catalog import builtin
from platformd.registry.namespaces import NamespaceController
from platformd.registry.store import GenericStore, NamespaceLifecycle
from platformd.storage.sqlite import SQLiteStorage
from platformd.tlscontext import server_tls_options

log = Logger()

#: Namespaces that always exist (upstream: default, kube-system, kube-public,
#: kube-node-lease).
BUILTIN_NAMESPACES = ("default", "platform-system", "platform-public", "platform-node-lease")


def fail(message: str):
    """
    Print one line and exit non-zero (twistd would otherwise print a traceback).  Once
    twistd's logging has started, ``sys.stderr`` is redirected into the log; the line
    goes to the real standard error, where an operator and systemd's journal see it.
    """
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"platformd: {message}\n")
    stream.flush()
    raise SystemExit(1)


class PlatformService(service.MultiService):
    def __init__(self, options, reactor):
        super().__init__()
        self.options = options
        self.reactor = reactor
        self.ready = False
        self.port = None
        data_dir = os.path.abspath(options["data-dir"])
        try:
            os.makedirs(data_dir, mode=0o700, exist_ok=True)
        except OSError as e:
            fail(f"cannot create --data-dir {data_dir}: {e.strerror}")
        self.data_dir = data_dir
        self.catalog = builtin()
        self.storage = SQLiteStorage(reactor, os.path.join(data_dir, "platformd.db"))
        self.cache = WatchCache(self.storage, self.catalog, reactor, options["watch-history-ttl"])
        self.snapshots = Snapshots(reactor, options["continue-token-ttl"])
        self.expiry = Expiry(reactor, self.cache, self.snapshots)
        namespace_cache = self.cache.for_kind(core.NAMESPACE)
        lifecycle = NamespaceLifecycle(namespace_cache, core.NAMESPACE)
        self.stores = {id(k): GenericStore(k, self.storage, self.cache.for_kind(k), reactor,
                                           lifecycle)
                       for k in self.catalog.kinds}
        self.namespaces = NamespaceController(reactor, self.cache, self.catalog, self.stores,
                                              core.NAMESPACE)
        self.tls, self.authenticator = self._security(options)
        bind = options["bind-address"]
        gates = options["feature-gates"]
        self.api = APIServer(
            self.catalog, self.stores,
            Reader(self.cache, self.snapshots, gates, self.storage),
            WatchServer(self.cache, gates, reactor), negotiator(gates), self.authenticator,
            AuthorizerChain([AlwaysAllow()]), Documents(self.catalog, f"{bind}:{options['secure-port']}"),
            lambda: self.ready, gates)
        self.site = make_site(self.api.resource())
        # The node-local pods socket (issue 6), started once the cache has loaded.
        self.cache_loaded = Deferred()
        if gates["PodsAPI"]:
            from platformd.podinfo.service import PodsService  # grpcio only when gated on
            PodsService(reactor, self.cache.for_kind(core.POD), options["pods-socket"],
                        options["node-name"], self.cache_loaded).setServiceParent(self)

    def _security(self, options):
        """
        The TLS options and the authenticator chain.  Without given certificates the PKI
        under ``--data-dir`` is made (first start) or reused; the kubeconfig's server URL
        is written once the listening port is known (see ``privilegedStartService``).
        """
        cert, key, client_ca = (options["tls-cert-file"], options["tls-private-key-file"],
                                options["client-ca-file"])
        try:
            if not cert:
                paths = self._ensure_pki(options["secure-port"] or 6443)
                cert, key, client_ca = paths.serving_cert, paths.serving_key, paths.client_ca
            tls = server_tls_options(cert, key, client_ca)
        except PKIError as e:
            fail(str(e))
        authenticators = [X509Authenticator()]
        if options["token-auth-file"]:
            try:
                authenticators.append(TokenAuthenticator.from_file(options["token-auth-file"]))
            except TokenFileError as e:
                fail(str(e))
        return tls, AuthenticatorChain(authenticators)

    def _ensure_pki(self, port: int):
        bind = self.options["bind-address"]
        wildcard = bind in ("0.0.0.0", "::", "")
        host = "127.0.0.1" if wildcard else bind
        ips = [] if wildcard or bind in ("127.0.0.1", "::1") else [bind]
        url_host = f"[{host}]" if ":" in host else host
        return ensure_pki(self.data_dir, [socket.gethostname()], ips,
                          f"https://{url_host}:{port}")

    def privilegedStartService(self):
        # TLSMemoryBIOFactory is a WrappingFactory: it tracks live connections, which
        # stopService closes.
        self.factory = factory = TLSMemoryBIOFactory(self.tls, False, self.site)
        factory.protocol = PlatformTLSTransport
        try:
            # A deep accept queue: thousands of watch clients may connect at once.
            self.port = self.reactor.listenTCP(self.options["secure-port"], factory,
                                               backlog=1024,
                                               interface=self.options["bind-address"])
        except net_error.CannotListenError as e:
            fail(f"cannot listen on {self.options['bind-address']}:"
                 f"{self.options['secure-port']}: {e.socketError}")
        if not self.options["tls-cert-file"] and not self.options["secure-port"]:
            # An ephemeral port: point admin.kubeconfig at the port we really got.
            try:
                self._ensure_pki(self.port.getHost().port)
            except PKIError as e:
                fail(str(e))
        super().privilegedStartService()

    def startService(self):
        super().startService()
        #: Fires once booting ended (``self.ready`` says whether it succeeded).
        self.booted = self._boot().addErrback(self._boot_failed)

    @inlineCallbacks
    def _boot(self):
        yield self.storage.start()
        yield self.cache.start()
        self.cache_loaded.callback(None)
        self.expiry.start()
        self.namespaces.start()
        store = self.stores[id(core.NAMESPACE)]
        for name in BUILTIN_NAMESPACES:
            try:
                yield store.create({"metadata": {"name": name}}, None)
            except errors.StatusError as e:
                if e.reason != "AlreadyExists":
                    raise
        # Everything loaded so far (modules, the cache) lives as long as the process:
        # take it out of the collector's view so full collections stay short.
        gc.collect()
        gc.freeze()
        self.ready = True
        log.info("platformd serving on https://{host}:{port}",
                 host=self.options["bind-address"], port=self.port.getHost().port)

    def _boot_failed(self, failure):
        log.failure("platformd could not start", failure)
        sys.stderr.write(f"platformd: could not start: {failure.getErrorMessage()}\n")
        if self.reactor.running:
            self.reactor.stop()

    @inlineCallbacks
    def stopService(self):
        self.ready = False
        if self.port is not None:
            yield self.port.stopListening()
            for protocol in list(self.factory.protocols):
                protocol.transport.loseConnection()
        yield super().stopService()
        self.expiry.stop()
        self.cache.stop()
        yield self.storage.stop()


def negotiator(gates) -> Negotiator:
    """The served encodings: JSON (default), YAML and Protobuf; CBOR under its gate."""
    codecs = [JSONCodec(), YAMLCodec(), ProtobufCodec()]
    if gates["CBORServingAndStorage"]:
        codecs.append(CBORCodec())
    return Negotiator(codecs)


def make_service(options, reactor=None) -> PlatformService:
    if reactor is None:
        from twisted.internet import reactor
    return PlatformService(options, reactor)
