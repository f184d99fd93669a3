"""
Admission webhooks and egress selection, as upstream chooses: a webhook called by
``clientConfig.service`` goes through the ``cluster`` selection (here an HTTP CONNECT
proxy on a UNIX socket, which alone can reach ``hooks.webhooks.svc``), one called by
``clientConfig.url`` through ``controlplane`` (none configured here: directly).  The
webhooks' caller is given its selector (``Caller(..., egress=)``; ``compose(...,
egress=)`` hands it to the plugins through ``PluginDeps.egress``): none is process-wide.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from twisted.internet import defer, reactor
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from platformd.admission.config import AdmissionConfiguration
from platformd.compose import compose
from platformd.egress import selector
from platformd.featuregates import FeatureGates
from platformd.storage.memory import MemoryStorage
from platformd.egress.config import parse_egress_config
from tests.egress.proxy import ConnectProxy
from tests.egress.test_tunnel import egress_document
from tests.webhooks.helpers import WebhookCase
from tests.stub import headers_only


class ServiceWebhookEgressTests(WebhookCase):
    def setUp(self):
        sockets = tempfile.mkdtemp(prefix="egress-")
        self.addCleanup(shutil.rmtree, sockets)
        self.proxy = ConnectProxy({"hooks.webhooks.svc": "127.0.0.1"})
        path = os.path.join(sockets, "proxy.sock")
        listening = reactor.listenUNIX(path, self.proxy)
        self.addCleanup(listening.stopListening)
        # The caller WebhookCase makes dials through this selector (no process-wide one).
        self.egress = selector.EgressSelector(parse_egress_config(
            egress_document("cluster", "HTTPConnect", uds={"udsName": path})), reactor)
        super().setUp()

    @defer.inlineCallbacks
    def test_service_reference_through_cluster(self):
        port = self.port.getHost().port
        service = {"namespace": "webhooks", "name": "hooks", "port": port, "path": "/svc"}
        self.configure("validating", self.hook(clientConfig={"service": service,
                                                             "caBundle": self.ca_bundle}))
        yield self.admit(self.attributes())
        self.assertEqual(len(self.reviews("/svc")), 1)
        self.assertEqual(self.proxy.heads,
                         [f"CONNECT hooks.webhooks.svc:{port} HTTP/1.1\r\nHost: 127.0.0.1"])

    @defer.inlineCallbacks
    def test_url_is_not_cluster(self):
        self.configure("validating", self.hook())
        yield self.admit(self.attributes())
        self.assertEqual(len(self.reviews()), 1)
        self.assertEqual(self.proxy.heads, [])


class ComposedTests(TestCase):
    def test_compose_hands_its_selector_to_the_webhooks(self):
        """Each of two servers composed in one process gives its webhook plugins its own
        selector, with an admission configuration as without."""
        clock = Clock()

        def composed(egress, configs=None):
            return compose(MemoryStorage(clock), clock, FeatureGates.parse(""), headers_only,
                           egress=egress, admission_configs=configs)

        def callers(components) -> list:
            return [plugin.caller.egress for plugin in components.admission.plugins
                    if hasattr(plugin, "caller")]

        egresses = [selector.EgressSelector(parse_egress_config(
            egress_document("cluster", "Direct")), clock) for _ in range(2)]
        for egress in [*egresses, None]:
            for configs in (None, AdmissionConfiguration()):
                server = composed(egress, configs)
                self.assertEqual(len(callers(server)), 2)
                self.assertTrue(all(c is egress for c in callers(server)))
