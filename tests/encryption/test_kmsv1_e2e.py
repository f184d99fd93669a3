"""A real server with a KMS v1 provider and real plugins on UNIX sockets."""

from __future__ import annotations

import os

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from platformd.protos.platform.kms.apis.v2 import api_pb2_grpc as v2_grpc
from platformd.process.startup import StartupError
from tests.e2e.harness import Client, start_server
from tests.encryption.helpers import document, write
from tests.encryption.kmsv1plugin import V1Plugin, serve, serve_v1
from tests.encryption.test_e2e import SECRET, stored
from tests.encryption.test_kms import Plugin as V2Plugin

GATE = ("--feature-gates", "KMSv1=true")


def kms(version: str, name: str, endpoint: str, **more) -> dict:
    return {"kms": {"apiVersion": version, "name": name, "endpoint": endpoint, **more}}


class KMSv1EndToEndTests(TestCase):
    timeout = 60

    def setUp(self):
        self.data_dir = os.path.abspath(self.mktemp())
        os.makedirs(self.data_dir)

    @inlineCallbacks
    def server(self, *providers, args=GATE):
        config = write(os.path.join(self.data_dir, "enc.json"),
                       document((["secrets"], providers)))
        server = yield start_server(self, "--encryption-provider-config", config, *args,
                                    data_dir=self.data_dir)
        return server, Client(self, server.pki_dir, server.port_number)

    @inlineCallbacks
    def test_encrypt_down_and_rotate_to_v2(self):
        plugin = V1Plugin()
        v1 = kms("v1", "one", serve_v1(self, plugin), cachesize=10, timeout="500ms")
        server, client = yield self.server(v1)
        r = yield client.post("/api/v1/namespaces/default/secrets", SECRET)
        self.assertEqual(r.code, 201, r.body)
        value = stored(self.data_dir, "s")
        self.assertTrue(value.startswith(b"platform:enc:kms:v1:one:\x00\x27sealed:"), value)
        self.assertNotIn(b"hunter2", value)
        self.assertNotIn(b"aHVudGVyMi1wbGFpbnRleHQ", value)
        r = yield client.get("/api/v1/namespaces/default/secrets/s")
        self.assertEqual(r.json()["data"]["password"], "aHVudGVyMi1wbGFpbnRleHQ=")
        self.assertEqual(plugin.calls["Decrypt"], 0)  # the write cached its DEK
        yield server.stopService()

        # The plugin down: the object reads as corrupt, a write fails.
        self.plugin_server.stop(None).wait()
        server, client = yield self.server(v1)
        r = yield client.get("/api/v1/namespaces/default/secrets/s")
        self.assertEqual((r.code, r.json()["reason"]), (500, "StorageReadError"), r.body)
        r = yield client.post("/api/v1/namespaces/default/secrets",
                              {**SECRET, "metadata": {"name": "t"}})
        self.assertEqual((r.code, r.json()["reason"], r.json()["message"]), (
            500, "InternalError", "Internal error occurred: failed get version from remote "
            "KMS provider: rpc error: code = DeadlineExceeded desc = Deadline Exceeded"))
        yield server.stopService()

        # v1 → v2: the v2 provider first, v1 still reads; rewrite; v1 removed.
        v1 = kms("v1", "one", serve_v1(self, plugin))
        v2 = kms("v2", "two", serve(self, V2Plugin(),
                                   v2_grpc.add_KeyManagementServiceServicer_to_server))
        server, client = yield self.server(v2, v1)
        r = yield client.get("/api/v1/namespaces/default/secrets/s")
        r = yield client.put("/api/v1/namespaces/default/secrets/s", r.json())
        self.assertEqual(r.code, 200, r.body)
        self.assertTrue(stored(self.data_dir, "s").startswith(b"platform:enc:kms:v2:two:"))
        yield server.stopService()
        server, client = yield self.server(v2, args=())
        r = yield client.get("/api/v1/namespaces/default/secrets/s")
        self.assertEqual(r.json()["data"]["password"], "aHVudGVyMi1wbGFpbnRleHQ=")

    @inlineCallbacks
    def test_gate_off_refuses_start(self):
        error = yield self.assertFailure(
            self.server(kms("v1", "one", "unix:///nonexistent.sock"), args=()), StartupError)
        self.assertEqual(str(error), (
            "--encryption-provider-config: KMSv1 is deprecated and will only receive security "
            "updates going forward. Use KMSv2 instead.  Set --feature-gates=KMSv1=true to use "
            "the deprecated KMSv1 feature."))
