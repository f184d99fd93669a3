"""
Every class under platformd that declares an interface (``@implementer``) provides it:
``verifyObject`` on an instance built here cheaply (collaborators the constructor only
stores are stand-ins), or ``verifyClass`` where building one needs I/O or real
collaborators.  The classes are found by importing every module, so a new implementation
not listed below fails ``test_every_implementation_listed``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import SimpleNamespace

from OpenSSL import SSL
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementedBy
from zope.interface.verify import verifyClass, verifyObject

import platformd

KEY = b"k" * 32


def _builds():
    """(module, class name) -> a function making an instance, for ``verifyObject``."""
    from platformd.admission.namespacelifecycle import NamespaceLifecycle
    from platformd.admission.policy.plugin import ValidatingAdmissionPolicy
    from platformd.admission.serviceaccount import ServiceAccountPlugin
    from platformd.admission.webhooks.client import _Endpoints
    from platformd.admission.webhooks.mutating import MutatingAdmissionWebhook
    from platformd.admission.webhooks.validating import ValidatingAdmissionWebhook
    from platformd.api.http2 import APIProtocol
    from platformd.api.site import APIChannel, DirectResource
    from platformd.api.streaming import PieceWriter
    from platformd.auth import authenticators, authorizers
    from platformd.auth.rbac.authorizer import RBACAuthorizer
    from platformd.auth.serviceaccount import ServiceAccountAuthenticator
    from platformd.auth.tokencache import CachedTokenAuthenticator
    from platformd.apiextensions.schema.cost import SchemaSizes, decl
    from platformd.apiextensions.schema.node import Node
    from platformd.cache.informers import FakeInformer, FakeLister, Informers
    from platformd.cel.cost import UnknownSizes
    from platformd.cache.reads import CacheReader
    from platformd.context import RequestContext
    from platformd.registry import core
    from platformd.registry.escalation import EscalationCheck
    from platformd.registry.serviceallocation import Allocators, ServiceHooks
    from platformd.controllers.customresources import Terminating
    from platformd.registry.resource import ResourceType
    from platformd.codecs.cborcodec import CBORCodec
    from platformd.codecs.jsoncodec import JSONCodec
    from platformd.codecs.protobufcodec import ProtobufCodec
    from platformd.codecs.yamlcodec import YAMLCodec
    from platformd.egress.konnectivity import GRPCTunnel
    from platformd.egress.selector import EgressEndpoints
    from platformd.egress.tunnel import ConnectTunnel
    from platformd.util.httpclient import BytesBody
    from platformd.storage.encryption import aes, kms, kmsv1, prefix, secretbox
    from platformd.storage.encryption.reload import Swappable
    from platformd.storage.memory import MemoryStorage
    from platformd.storage import transformers
    from platformd.edge.tlscontext import ServerTLS
    from platformd.process.parentwatch import ParentWatch

    return {
        NamespaceLifecycle: lambda: NamespaceLifecycle(None, None, None),
        ValidatingAdmissionPolicy: lambda: ValidatingAdmissionPolicy(None, None, None),
        ServiceAccountPlugin: lambda: ServiceAccountPlugin(None, None, Clock(), None),
        _Endpoints: lambda: _Endpoints(Clock(), None, {}, "cluster", None),
        MutatingAdmissionWebhook: lambda: MutatingAdmissionWebhook(None, None, None),
        ValidatingAdmissionWebhook: lambda: ValidatingAdmissionWebhook(None, None, None),
        APIChannel: APIChannel,
        APIProtocol: lambda: APIProtocol(APIChannel()),
        DirectResource: lambda: DirectResource(None, None),
        PieceWriter: lambda: PieceWriter(None, [], False),
        authenticators.X509Authenticator: authenticators.X509Authenticator,
        authenticators.TokenAuthenticator: lambda: authenticators.TokenAuthenticator({}),
        authenticators.UnknownBearerToken: authenticators.UnknownBearerToken,
        authenticators.AnonymousAuthenticator: authenticators.AnonymousAuthenticator,
        authenticators.AuthenticatorChain: lambda: authenticators.AuthenticatorChain([]),
        authorizers.AlwaysAllow: authorizers.AlwaysAllow,
        authorizers.AlwaysDeny: authorizers.AlwaysDeny,
        authorizers.PrivilegedGroups: authorizers.PrivilegedGroups,
        authorizers.AuthorizerChain: lambda: authorizers.AuthorizerChain([]),
        RBACAuthorizer: lambda: RBACAuthorizer(None, Clock()),
        SchemaSizes: lambda: SchemaSizes(decl(Node({"type": "string", "maxLength": 8}))),
        UnknownSizes: UnknownSizes,
        EscalationCheck: lambda: EscalationCheck(None),
        ServiceHooks: lambda: ServiceHooks(Allocators(MemoryStorage(Clock()))),
        Terminating: lambda: Terminating("example.com", "widgets"),
        RequestContext: lambda: RequestContext(None),
        ResourceType: lambda: core.CONFIG_MAP,
        ServiceAccountAuthenticator: lambda: ServiceAccountAuthenticator(
            None, None, "https://issuer", [], Clock()),
        CachedTokenAuthenticator: lambda: CachedTokenAuthenticator(
            authenticators.UnknownBearerToken(), Clock()),
        FakeLister: lambda: FakeLister({}),
        FakeInformer: FakeInformer,
        Informers: lambda: Informers(None),
        # (its revision and clock are the watch cache's)
        CacheReader: lambda: CacheReader(SimpleNamespace(revision=0, clock=Clock(),
                                                          when_kind_removed=lambda f: None),
                                         None, None, None),
        CBORCodec: CBORCodec,
        JSONCodec: JSONCodec,
        ProtobufCodec: ProtobufCodec,
        YAMLCodec: YAMLCodec,
        GRPCTunnel: lambda: GRPCTunnel(Clock(), "konnectivity", "10.0.0.1:443"),
        EgressEndpoints: lambda: EgressEndpoints("cluster", Clock(), None, None),
        ConnectTunnel: lambda: ConnectTunnel(None, "10.0.0.1:443", "proxy"),
        BytesBody: lambda: BytesBody(b""),
        aes.GCM: lambda: aes.GCM(KEY),
        aes.CBC: lambda: aes.CBC(KEY),
        aes.HKDFExtendedNonceGCM: lambda: aes.HKDFExtendedNonceGCM(KEY),
        kms.KMSv2Envelope: lambda: kms.KMSv2Envelope(None, clock=Clock().seconds),
        kmsv1._GCMOrCBC: lambda: kmsv1._GCMOrCBC(KEY),
        kmsv1.KMSv1Envelope: lambda: kmsv1.KMSv1Envelope(None, 10),
        prefix.PrefixTransformers: lambda: prefix.PrefixTransformers(
            [(b"platform:enc:aesgcm:v1:key1:", aes.GCM(KEY))]),
        prefix.EncryptCheckIdentity: prefix.EncryptCheckIdentity,
        secretbox.Secretbox: lambda: secretbox.Secretbox(KEY),
        Swappable: lambda: Swappable(Clock()),
        MemoryStorage: lambda: MemoryStorage(Clock()),
        transformers.IdentityTransformer: transformers.IdentityTransformer,
        transformers.ByKeyPrefix: lambda: transformers.ByKeyPrefix([]),
        ServerTLS: lambda: ServerTLS(SSL.Context(SSL.TLS_METHOD)),
        ParentWatch: lambda: ParentWatch(Clock(), lambda: None),
    }


#: Classes verified as classes only, and why an instance is not built here.
CLASS_ONLY = {
    "platformd.admission.webhooks.client.BundleTLSPolicy": "needs a CA bundle's certificates",
    "platformd.api.watch.WatchStream": "needs a kind, a request and a watch server",
    "platformd.auth.jwt.JWTAuthenticator": "needs a validated issuer configuration",
    "platformd.auth.kubeconfig.ClientTLSPolicy": "loads the trust roots of a kubeconfig",
    "platformd.auth.webhook.WebhookAuthorizer": "needs a kubeconfig connection",
    "platformd.cache.informers.Informer": "needs a loaded watch cache",
    "platformd.cache.informers.Lister": "needs a kind's watch cache",
    "platformd.egress.konnectivity._Tunnel": "an open gRPC stream",
    "platformd.process.journald.JournalObserver": "opens a socket",
    "platformd.storage.etcd3.store.EtcdStorage": "needs an etcd client",
    "platformd.storage.mvcc.Watch": "registers with a store's watchers",
    "platformd.storage.sqlite.SQLiteStorage": "opens a database and its threads",
}


def _implementations() -> dict:
    """Every class of platformd (not the generated protos) declaring an interface, by
    dotted name: (class, its declared interfaces)."""
    found = {}
    for info in pkgutil.walk_packages(platformd.__path__, "platformd."):
        if info.name.startswith("platformd.protos"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                declared = list(implementedBy(value).declared)
                if declared:
                    found[f"{module.__name__}.{name}"] = (value, declared)
    return found


def _name(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class InterfaceTests(SynchronousTestCase):
    def setUp(self):
        self.found = _implementations()
        self.builds = _builds()

    def test_every_implementation_listed(self):
        """Each implementation is built below or named in ``CLASS_ONLY``, and nothing
        listed is missing."""
        listed = {_name(cls) for cls in self.builds} | set(CLASS_ONLY)
        self.assertEqual(sorted(set(self.found) - listed), [])
        self.assertEqual(sorted(listed - set(self.found)), [])
        self.assertEqual(sorted(set(CLASS_ONLY) & {_name(c) for c in self.builds}), [])

    def test_instances_provide(self):
        for cls, build in self.builds.items():
            obj = build()
            for interface in implementedBy(cls).declared:
                with self.subTest(cls=_name(cls), interface=interface.__name__):
                    self.assertTrue(verifyObject(interface, obj))

    def test_classes_implement(self):
        for name, (cls, declared) in sorted(self.found.items()):
            for interface in declared:
                with self.subTest(cls=name, interface=interface.__name__):
                    self.assertTrue(verifyClass(interface, cls))
