"""
The daemon end to end with --admission-control-config-file: a real HTTPS webhook on
loopback that answers only a caller presenting the admin client certificate and a bearer
token, both given by nothing but the WebhookAdmissionConfiguration's kubeconfig (the
validating plugin's by ``path``, the mutating one's embedded).  With the configuration
the webhook is reached with both and the write admitted; without it, neither is sent,
the webhook refuses the call and the write fails closed.
"""

from __future__ import annotations

import base64
import json
import os

import yaml
from twisted.internet import defer, reactor
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase
from twisted.web import server

from platformd.files.pki import ensure_pki
from platformd.edge.tlscontext import peer_identity, server_tls_options
from tests.e2e.harness import Client, start_server
from tests.webhooks.helpers import ReviewServer

GROUP = "admissionregistration.platform.io"
TOKEN = "s3cret-webhook-token"


class CheckingReviewServer(ReviewServer):
    """Records each call's credentials; without both, 401 (a Status, as a server would)."""

    def __init__(self):
        super().__init__()
        self.seen: list = []

    def render_POST(self, request):
        authorization = request.getHeader("Authorization")
        identity = peer_identity(request.channel.transport)
        self.seen.append((request.path.decode(), authorization, identity))
        if authorization != f"Bearer {TOKEN}" or identity is None:
            request.setResponseCode(401)
            return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                               "message": "Unauthorized", "code": 401}).encode()
        return super().render_POST(request)


class CredentialsEndToEndTests(TestCase):
    timeout = 60

    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())
        paths = ensure_pki(self.dir, [], [], "https://127.0.0.1:1")
        pki = os.path.dirname(paths.ca_cert)
        with open(paths.ca_cert, "rb") as f:
            self.ca_bundle = base64.b64encode(f.read()).decode()
        self.webhook = CheckingReviewServer()
        port = reactor.listenSSL(
            0, server.Site(self.webhook),
            server_tls_options(paths.serving_cert, paths.serving_key, paths.ca_cert),
            interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.host_port = f"127.0.0.1:{port.getHost().port}"
        self.credentials = {"token": TOKEN,
                            "client-certificate": os.path.join(pki, "admin.crt"),
                            "client-key": os.path.join(pki, "admin.key")}

    def write(self, name: str, document: dict) -> str:
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            yaml.safe_dump(document, f)
        return path

    def admission_configuration(self) -> str:
        """The user is named after the webhook's host:port; a wildcard user beside it
        must not be chosen."""
        kubeconfig = self.write("webhooks.kubeconfig", {
            "apiVersion": "v1", "kind": "Config", "users": [
                {"name": "*.example.com", "user": {"token": "wrong"}},
                {"name": self.host_port, "user": self.credentials}]})
        webhook_admission = {"apiVersion": "apiserver.config.platform.io/v1",
                             "kind": "WebhookAdmissionConfiguration",
                             "kubeConfigFile": kubeconfig}
        self.write("webhook-admission.yaml", webhook_admission)
        return self.write("admission.yaml", {
            "apiVersion": "apiserver.config.platform.io/v1", "kind": "AdmissionConfiguration",
            "plugins": [
                {"name": "ValidatingAdmissionWebhook", "path": "webhook-admission.yaml"},
                {"name": "MutatingAdmissionWebhook", "configuration": webhook_admission}]})

    @defer.inlineCallbacks
    def start(self, *args):
        platform = yield start_server(self, *args)
        self.addCleanup(self._close_webhook_connections, platform)
        self.client = Client(self, platform.pki_dir, platform.port_number)
        for plural, path in (("mutatingwebhookconfigurations", "/mutate"),
                             ("validatingwebhookconfigurations", "/validate")):
            r = yield self.client.post(f"/apis/{GROUP}/v1/{plural}", {
                "metadata": {"name": "config"},
                "webhooks": [{"name": f"{path[1:]}.example.com",
                              "clientConfig": {"url": f"https://{self.host_port}{path}",
                                               "caBundle": self.ca_bundle},
                              "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                                         "apiVersions": ["v1"], "resources": ["configmaps"]}],
                              "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})
            self.assertEqual(r.code, 201, r.body)

    @defer.inlineCallbacks
    def _close_webhook_connections(self, platform):
        for plugin in platform.components.admission.plugins:
            caller = getattr(plugin, "caller", None)
            if caller is not None:
                yield caller.close()
        yield deferLater(reactor, 0.05, lambda: None)

    @defer.inlineCallbacks
    def test_credentials_from_the_configuration(self):
        yield self.start("--admission-control-config-file", self.admission_configuration())
        r = yield self.client.post("/api/v1/namespaces/default/configmaps",
                                   {"metadata": {"name": "cm"}})
        self.assertEqual(r.code, 201, r.body)
        admin = ("admin", ("system:masters",))
        self.assertEqual(self.webhook.seen, [("/mutate", f"Bearer {TOKEN}", admin),
                                             ("/validate", f"Bearer {TOKEN}", admin)])

    @defer.inlineCallbacks
    def test_no_configuration_no_credentials(self):
        yield self.start()
        r = yield self.client.post("/api/v1/namespaces/default/configmaps",
                                   {"metadata": {"name": "cm"}})
        self.assertEqual(r.code, 500, r.body)
        self.assertEqual(r.json()["message"], 'Internal error occurred: failed calling '
                                              'webhook "mutate.example.com": failed to call '
                                              "webhook: Unauthorized")
        self.assertEqual(self.webhook.seen, [("/mutate", None, None)])
