"""
/metrics and the health checks of a real daemon over HTTPS: authorized as upstream
(``system:monitoring``), the SQLite file's size, the process collector, the reloads of
--authentication-config; health open to anyone.
"""

from __future__ import annotations

import os

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from platformd.util.ids import apiserver_id
from platformd.metrics.configreloads import config_hash
from platformd.metrics.core import CONTENT_TYPE

from tests.authn.helpers import document, jwt_entry
from tests.e2e.harness import Client, start_server, start_token_server, token_client
from tests.metrics.test_metrics import parse


class MetricsOverHTTPSTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def setUp(self):
        self.server = yield start_token_server(
            self, 'prom-token,prometheus,1,"system:monitoring"\njane-token,jane,2\n')

    @inlineCallbacks
    def test_metrics_authorized_as_upstream(self):
        r = yield token_client(self, self.server, "prom-token").get("/metrics")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.header("Content-Type"), CONTENT_TYPE)
        samples, types = parse(r.body.decode())
        size = samples[("apiserver_storage_size_bytes", (("storage_cluster_id", ""),))]
        self.assertGreater(size, 4096)  # the SQLite file and its write-ahead log
        self.assertEqual(types["process_resident_memory_bytes"], "gauge")
        self.assertEqual(samples[("authorization_attempts_total", (("result", "allowed"),))],
                         1.0)
        r = yield token_client(self, self.server, "jane-token").get("/metrics")
        self.assertEqual((r.code, r.json()["reason"]), (403, "Forbidden"))
        self.assertEqual(r.json()["message"], 'forbidden: User "jane" cannot get path "/metrics"')

    @inlineCallbacks
    def test_health_open_to_anyone(self):
        anonymous = Client(self, self.server.pki_dir, self.server.port_number, identity=None)
        r = yield anonymous.get("/readyz?verbose")
        self.assertEqual(r.code, 200)
        self.assertTrue(r.body.startswith(b"[+]ping ok\n[+]log ok\n[+]etcd ok\n"), r.body)
        self.assertTrue(r.body.endswith(b"[+]shutdown ok\nreadyz check passed\n"), r.body)
        r = yield anonymous.get("/livez/etcd")
        self.assertEqual((r.code, r.body), (200, b"ok"))


class ConfigReloadMetricsTests(TestCase):
    """The daemon counts --authentication-config's reloads in upstream's families."""

    timeout = 60

    @inlineCallbacks
    def test_refused_reload_counted(self):
        path = os.path.abspath(self.mktemp())
        good = document(jwt_entry("https://127.0.0.1:1"))
        with open(path, "wb") as f:
            f.write(good)
        server = yield start_server(self, "--authentication-config", path)
        client = Client(self, server.pki_dir, server.port_number)
        prefix = "apiserver_authentication_config_controller_"
        identity = config_hash(apiserver_id().encode())
        samples, _ = parse((yield client.get("/metrics")).body.decode())
        self.assertEqual(samples[(prefix + "last_config_info", (
            ("apiserver_id_hash", identity), ("hash", config_hash(good))))], 1)
        self.assertFalse([key for key in samples if key[0].startswith(prefix + "automatic")])
        with open(path, "wb") as f:
            f.write(document(jwt_entry("http://127.0.0.1:1")))
        server.reload()
        samples, _ = parse((yield client.get("/metrics")).body.decode())
        failure = (("apiserver_id_hash", identity), ("status", "failure"))
        self.assertEqual(samples[(prefix + "automatic_reloads_total", failure)], 1)
        self.assertIn((prefix + "automatic_reload_last_timestamp_seconds", failure), samples)
        self.assertEqual(samples[(prefix + "last_config_info", (
            ("apiserver_id_hash", identity), ("hash", config_hash(good))))], 1)
