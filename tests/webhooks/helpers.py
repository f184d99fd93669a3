"""A real HTTPS admission webhook server on loopback, and in-memory configuration caches."""

from __future__ import annotations

import base64
import json

from twisted.internet import defer, reactor
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from twisted.web import resource, server

from platformd.admission.interfaces import AdmissionAttributes
from platformd.admission.webhooks.client import Caller
from platformd.admission.webhooks.matching import Namespaces
from platformd.admission.webhooks.mutating import MutatingAdmissionWebhook
from platformd.admission.webhooks.source import WebhookSource
from platformd.admission.webhooks.validating import ValidatingAdmissionWebhook
from platformd.cache.informers import FakeInformer
from platformd.cel.admission import compile_condition
from platformd.context import RequestContext
from platformd.files.pki import ensure_pki
from platformd.registry import core
from platformd.registry.kinds import webhookshapes
from platformd.edge.tlscontext import server_tls_options


def allow(review, **response):
    return {"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True, **response}}


def deny(review, **status):
    return {"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": False, "status": status}}


def patch(review, operations, **response):
    encoded = base64.b64encode(json.dumps(operations).encode()).decode()
    return allow(review, patchType="JSONPatch", patch=encoded, **response)


class ReviewServer(resource.Resource):
    """``handlers[path](review)`` answers (a dict, bytes, or None: never answer)."""

    isLeaf = True

    def __init__(self):
        super().__init__()
        self.handlers: dict = {}
        self.reviews: dict = {}
        self.pending: list = []
        self.code = 200

    def render_POST(self, request):
        path = request.path.decode()
        review = json.loads(request.content.read())
        self.reviews.setdefault(path, []).append(review)
        answer = self.handlers.get(path, allow)(review)
        request.setResponseCode(self.code)
        if answer is None:
            self.pending.append(request)
            return server.NOT_DONE_YET
        return answer if isinstance(answer, bytes) else json.dumps(answer).encode()


class WebhookCase(TestCase):
    timeout = 20
    #: The egress selector the webhooks' caller dials through (None: directly); a
    #: subclass sets it before ``setUp`` makes the caller.
    egress = None

    def setUp(self):
        # hooks.webhooks.svc: the host of a clientConfig.service {webhooks, hooks}.
        paths = ensure_pki(self.mktemp(), ["hooks.webhooks.svc"], [], "https://127.0.0.1:1")
        with open(paths.ca_cert, "rb") as f:
            self.ca_bundle = base64.b64encode(f.read()).decode()
        self.service = ReviewServer()
        self.site = server.Site(self.service)
        tls = server_tls_options(paths.serving_cert, paths.serving_key)
        self.port = reactor.listenSSL(0, self.site, tls, interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.base = f"https://127.0.0.1:{self.port.getHost().port}"
        self.clock = Clock()
        self.caller = Caller(self.clock, reactor, egress=self.egress)
        self.addCleanup(self._close)
        self.namespaces = FakeInformer([
            {"metadata": {"name": "default", "labels": {"env": "prod"}}},
            {"metadata": {"name": "dev", "labels": {"env": "dev"}}}], resource="namespaces")
        self.mutating_configs = FakeInformer(resource="mutatingwebhookconfigurations")
        self.validating_configs = FakeInformer(resource="validatingwebhookconfigurations")
        self.mutating = MutatingAdmissionWebhook(
            WebhookSource(self.mutating_configs.lister, compile_condition,
                          mutating=True), Namespaces(core.NAMESPACE, self.namespaces.lister),
            self.caller)
        self.validating = ValidatingAdmissionWebhook(
            WebhookSource(self.validating_configs.lister, compile_condition,
                          mutating=False), Namespaces(core.NAMESPACE, self.namespaces.lister),
            self.caller)

    def _close(self):
        for request in self.service.pending:
            if not request.finished and not request._disconnected:
                request.finish()
        return self.caller.close()

    def hook(self, name="hook.example.com", path="/check", **fields) -> dict:
        hook = {"name": name,
                "clientConfig": {"url": self.base + path, "caBundle": self.ca_bundle},
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                           "apiVersions": ["v1"], "resources": ["configmaps"]}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"]}
        hook.update(fields)
        return hook

    def clear(self, configs) -> None:
        """Delete every configuration of ``configs`` (a ``FakeInformer``)."""
        for entry in configs.lister.list():
            configs.delete(None, entry.name)

    def configure(self, kind: str, *hooks, name="config"):
        """Store a configuration (``mutating`` or ``validating``), defaulted and valid."""
        mutating = kind == "mutating"
        obj = {"metadata": {"name": name, "uid": name + "-uid"}, "webhooks": list(hooks)}
        webhookshapes.default_configuration(mutating)(obj)
        self.assertEqual(webhookshapes.configuration_validator(mutating)(obj), [])
        (self.mutating_configs if mutating else self.validating_configs).put(obj)

    def attributes(self, operation="CREATE", kind=core.CONFIG_MAP, namespace="default",
                   name="cm", obj=None, old=None, dry_run=False, subresource=""):
        if obj is None and operation != "DELETE":
            obj = {"apiVersion": "v1", "kind": kind.kind,
                   "metadata": {"name": name, "namespace": namespace}, "data": {"a": "1"}}
        context = RequestContext(None, dry_run=dry_run)
        return AdmissionAttributes(operation, kind, namespace, name, subresource, obj, old,
                                   context)

    @defer.inlineCallbacks
    def admit(self, a):
        yield defer.maybeDeferred(self.mutating.admit, a)
        yield defer.maybeDeferred(self.validating.validate, a)
        return a

    def reviews(self, path="/check") -> list:
        return self.service.reviews.get(path, [])
