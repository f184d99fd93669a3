"""
A real server's KMS health checks on ``/healthz`` and ``/readyz`` (not ``/livez``, as
upstream since 1.29), with real plugins on UNIX sockets; with automatic reload, the old
configuration's connection closed once replaced.
"""

from __future__ import annotations

import os

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from platformd.protos.platform.kms.apis.v2 import api_pb2_grpc as v2_grpc
from tests.e2e.harness import Client, start_server
from tests.encryption.helpers import document, write
from tests.encryption.kmsv1plugin import V1Plugin, serve, serve_v1
from tests.encryption.relay import Relay
from tests.encryption.test_e2e import SECRET
from tests.encryption.test_kms import Plugin as V2Plugin
from tests.encryption.test_kmsv1_e2e import GATE, kms

DEADLINE = "rpc error: code = DeadlineExceeded desc = Deadline Exceeded"
STATUS_HUNG = ("failed to perform status section of the healthz check for KMS Provider "
               f"{{}}, error: {DEADLINE}")


class KMSHealthEndToEndTests(TestCase):
    timeout = 60

    def setUp(self):
        self.data_dir = os.path.abspath(self.mktemp())
        os.makedirs(self.data_dir)
        self.config = os.path.join(self.data_dir, "enc.json")

    def v2(self, name: str, timeout: str = "3s", relay: bool = False, **state) -> dict:
        """A KMS v2 provider whose plugin's attributes are ``state`` (``delay``: hung)."""
        plugin = V2Plugin()
        plugin.__dict__.update(state)
        self.addCleanup(plugin.released.set)
        endpoint = serve(self, plugin, v2_grpc.add_KeyManagementServiceServicer_to_server)
        if relay:
            self.relay = Relay(self, endpoint[len("unix://"):])
            endpoint = self.relay.endpoint
        return kms("v2", name, endpoint, timeout=timeout)

    def v1(self, name: str, timeout: str = "3s", **state) -> dict:
        plugin = V1Plugin()
        plugin.__dict__.update(state)
        self.addCleanup(plugin.released.set)
        return kms("v1", name, serve_v1(self, plugin), timeout=timeout)

    @inlineCallbacks
    def server(self, *providers, args=()):
        write(self.config, document((["secrets"], providers)))
        server = yield start_server(self, "--encryption-provider-config", self.config,
                                    *args, data_dir=self.data_dir)
        return server, Client(self, server.pki_dir, server.port_number, identity=None)

    @inlineCallbacks
    def test_one_check_per_provider_with_v1(self):
        """With a KMS v1 provider, each provider is its own kms-provider-<i>; the
        reasons go to the check's own path only."""
        server, anonymous = yield self.server(
            self.v2("good"),
            self.v2("bad", healthz="not ready", version="v1", key_id=""),
            self.v2("hung", timeout="300ms", delay=30.0),
            self.v1("old"),
            self.v1("refusing", failing={"Decrypt"}),
            self.v1("stuck", timeout="300ms", delay=30.0), args=GATE)
        checks = [f"kms-provider-{i}" for i in range(6)]
        failed = {"kms-provider-1", "kms-provider-2", "kms-provider-4", "kms-provider-5"}
        lines = "".join(f"[-]{c} failed: reason withheld\n" if c in failed else f"[+]{c} ok\n"
                        for c in checks)
        r = yield anonymous.get("/healthz?verbose")
        self.assertEqual(r.code, 500)
        self.assertTrue(r.body.decode().startswith(
            "[+]ping ok\n[+]log ok\n[+]etcd ok\n" + lines + "[+]poststarthook/"), r.body)
        r = yield anonymous.get("/readyz?verbose")
        self.assertIn("[+]etcd-readiness ok\n" + lines + "[+]informer-sync ok\n",
                      r.body.decode())
        r = yield anonymous.get("/livez?verbose")
        self.assertEqual(r.code, 200)
        self.assertNotIn(b"kms", r.body)
        for root in ("healthz", "readyz"):
            r = yield anonymous.get(f"/{root}/kms-provider-0")
            self.assertEqual((r.code, r.body), (200, b"ok"))
        for check, reason in [
            ("kms-provider-1", "kmsv2 Provider bad is not healthy, error: [got unexpected "
             "healthz status: not ready, expected KMSv2 API version v2, got v1, got invalid "
             'KMSv2 KeyID hash "": keyID is empty]'),
            ("kms-provider-2", STATUS_HUNG.format("hung")),
            ("kms-provider-4", "failed to perform decrypt section of the healthz check for "
             "KMS Provider refusing, error: rpc error: code = Internal desc = Decrypt "
             "refused"),
            ("kms-provider-5", "failed to perform encrypt section of the healthz check for "
             "KMS Provider stuck, error: failed get version from remote KMS provider: "
             f"{DEADLINE}"),
        ]:
            r = yield anonymous.get(f"/readyz/{check}")
            self.assertEqual((r.code, r.body.decode()),
                             (500, f"internal server error: {reason}\n"))
        r = yield anonymous.get("/livez/kms-provider-0")
        self.assertEqual(r.code, 401)  # no such check: the API's answer to anonymous

    @inlineCallbacks
    def test_v2_only_one_check(self):
        """KMS v2 providers alone are one kms-providers check, each failure named."""
        server, anonymous = yield self.server(
            self.v2("good"), self.v2("hung", timeout="300ms", delay=30.0))
        r = yield anonymous.get("/readyz?verbose")
        self.assertIn("[+]etcd-readiness ok\n[-]kms-providers failed: reason withheld\n"
                      "[+]informer-sync ok\n", r.body.decode())
        r = yield anonymous.get("/healthz/kms-providers")
        self.assertEqual(r.body.decode(), "internal server error: kms-provider-1: "
                                          + STATUS_HUNG.format("hung") + "\n")

    @inlineCallbacks
    def test_reload(self):
        """
        With automatic reload, kms-providers checks the configuration in use; once a
        new one is loaded, the old plugin sees its connection closed.
        """
        server, anonymous = yield self.server(
            self.v2("one", relay=True), args=("--encryption-provider-config-automatic-reload",))
        admin = Client(self, server.pki_dir, server.port_number)
        r = yield admin.post("/api/v1/namespaces/default/secrets", SECRET)
        self.assertEqual(r.code, 201, r.body)
        r = yield anonymous.get("/healthz/kms-providers")
        self.assertEqual((r.code, r.body), (200, b"ok"))
        self.assertEqual(len(self.relay.connections), 1)
        closed = self.relay.next_close()
        write(self.config, document((["secrets"], [self.v2("two", healthz="down"),
                                                   self.v2("one")])))
        server.reload()
        yield closed
        r = yield anonymous.get("/readyz/kms-providers")
        self.assertEqual(r.body.decode(), (
            "internal server error: kms-provider-0: kmsv2 Provider two is not healthy, error: "
            "got unexpected healthz status: down\n"))
        r = yield admin.get("/api/v1/namespaces/default/secrets/s")
        self.assertEqual(r.code, 200, r.body)  # read by the new configuration's "one"
