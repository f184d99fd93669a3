"""
The KMS providers' health checks (upstream's ``kmsPluginProbe``, ``kmsv2PluginProbe``,
``kmsHealthChecker``) against test plugins on UNIX sockets, their answers kept on a
``Clock`` (20 s healthy, 3 s not), in upstream's words.
"""

from __future__ import annotations

import hashlib
import re

from twisted.internet import reactor
from twisted.internet.defer import gatherResults, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase, TestCase

from platformd.protos.platform.kms.apis.v2 import api_pb2_grpc
from platformd.storage.encryption.kms import KMSv2Client, KMSv2Envelope
from platformd.storage.encryption.kmsv1 import KMSv1Client, KMSv1Probe
from platformd.storage.encryption.probes import ProviderChecks
from tests.encryption.kmsv1plugin import V1Plugin, serve, serve_v1
from tests.encryption.test_kms import SECRET, Plugin

NOT_HEALTHY = "kmsv2 Provider p is not healthy, error: "
DEADLINE = "rpc error: code = DeadlineExceeded desc = Deadline Exceeded"


def sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class KMSv2HealthTests(TestCase):
    def setUp(self):
        self.plugin = Plugin()
        self.addCleanup(self.plugin.released.set)
        self.endpoint = serve(self, self.plugin,
                              api_pb2_grpc.add_KeyManagementServiceServicer_to_server)
        self.clock = Clock()

    def envelope(self, timeout=2.0) -> KMSv2Envelope:
        envelope = KMSv2Envelope(KMSv2Client("p", self.endpoint, timeout),
                                 clock=self.clock.seconds)
        self.addCleanup(envelope.close)
        return envelope

    async def test_healthy_and_cached(self):
        """Healthy is kept 20 s, unhealthy 3 s; the first check seals a seed."""
        e = self.envelope()
        check = e.health_check(reactor)
        self.assertIsNone(await check())
        self.assertEqual((self.plugin.statuses, self.plugin.encrypts), (1, 1))
        self.assertIsNone(e.prepare(SECRET, reactor))  # writes go on with that seed
        self.plugin.healthz = "starting"
        self.clock.advance(19.9)
        self.assertIsNone(await check())
        self.assertEqual(self.plugin.statuses, 1)
        self.clock.advance(0.1)
        reason = NOT_HEALTHY + "got unexpected healthz status: starting"
        self.assertEqual(await check(), reason)
        self.clock.advance(2.9)
        self.assertEqual(await check(), reason)
        self.assertEqual(self.plugin.statuses, 2)
        self.plugin.healthz = "ok"
        self.clock.advance(0.1)
        self.assertIsNone(await check())
        self.assertEqual((self.plugin.statuses, self.plugin.encrypts), (3, 1))

    async def test_status_messages(self):
        """Each of upstream's complaints about a status, alone and aggregated."""
        long_id = "k" * 1025
        for healthz, version, key_id, reason in [
            ("not ready", "v2", "key-1", "got unexpected healthz status: not ready"),
            ("ok", "v1", "key-1", "expected KMSv2 API version v2, got v1"),
            ("ok", "v2", "", 'got invalid KMSv2 KeyID hash "": keyID is empty'),
            ("ok", "v2", long_id, f'got invalid KMSv2 KeyID hash "{sha256(long_id)}": '
                                  "keyID is 1025 bytes, which exceeds the max size of 1024"),
            ("no", "v3", "", '[got unexpected healthz status: no, expected KMSv2 API version '
                             'v2, got v3, got invalid KMSv2 KeyID hash "": keyID is empty]'),
        ]:
            self.plugin.healthz, self.plugin.version, self.plugin.key_id = \
                healthz, version, key_id
            self.assertEqual(await self.envelope().check(reactor), NOT_HEALTHY + reason)

    async def test_version_kept(self):
        """v2beta1 is healthy too; the version may not change after the first answer."""
        self.plugin.version = "v2beta1"
        e = self.envelope()
        self.assertIsNone(await e.check(reactor))
        self.plugin.version = "v2"
        self.clock.advance(20)
        self.assertEqual(await e.check(reactor), NOT_HEALTHY + (
            "KMSv2 API version should not change after the initial status response version "
            "v2beta1, got v2"))

    async def test_rotation_failures(self):
        """
        A key ID that cannot be sealed under is upstream's failed rotation (its
        ``expirationTimestamp`` left out: platformd's seeds do not expire); the seed in
        use stays.
        """
        self.plugin.encrypt_error = "sealing refused"
        e = self.envelope()
        first = await e.check(reactor)
        uid = re.search(r'uid="([0-9a-f-]{36})"', first).group(1)
        self.assertEqual(first, NOT_HEALTHY + (
            f'failed to rotate DEK uid="{uid}", useSeed=true, errState=got unexpected nil '
            "transformer, errGen=failed to encrypt DEK, error: rpc error: code = Internal "
            f'desc = sealing refused, statusKeyIDHash="{sha256("key-1")}", '
            'encryptKeyIDHash="", stateKeyIDHash=""'))
        self.plugin.encrypt_error = None
        self.clock.advance(3)
        self.assertIsNone(await e.check(reactor))
        self.plugin.key_id, self.plugin.encrypt_key_id = "key-2", "key-3"
        self.clock.advance(20)
        reason = await e.check(reactor)
        uid = re.search(r'uid="([0-9a-f-]{36})"', reason).group(1)
        self.assertEqual(reason, NOT_HEALTHY + (
            f'failed to rotate DEK uid="{uid}", useSeed=true, errState=<nil>, errGen=<nil>, '
            f'statusKeyIDHash="{sha256("key-2")}", encryptKeyIDHash="{sha256("key-3")}", '
            f'stateKeyIDHash="{sha256("key-1")}"'))
        self.assertIsNone(e.prepare(SECRET, reactor))
        self.assertIn(b"key-1", e.to_storage(SECRET, b"v"))

    async def test_hung(self):
        """A plugin that never answers fails the check after the timeout; checks and
        writes waiting meanwhile share one Status."""
        self.plugin.delay = 30.0
        e = self.envelope(timeout=0.3)
        started = reactor.seconds()
        write = e.prepare(SECRET, reactor)
        reasons = await gatherResults([e.check(reactor), e.check(reactor)])
        self.assertLess(reactor.seconds() - started, 1.5)
        reason = ("failed to perform status section of the healthz check for KMS Provider "
                  f"p, error: {DEADLINE}")
        self.assertEqual(reasons, [reason, reason])
        error = self.failureResultOf(write).value
        self.assertEqual(str(error), reason)
        self.assertEqual(self.plugin.statuses, 1)


class KMSv1ProbeTests(TestCase):
    def setUp(self):
        self.plugin = V1Plugin()
        self.addCleanup(self.plugin.released.set)
        self.endpoint = serve_v1(self, self.plugin)
        self.clock = Clock()

    def probe(self, timeout=2.0) -> KMSv1Probe:
        client = KMSv1Client("one", self.endpoint, timeout)
        self.addCleanup(client.close)
        return KMSv1Probe(client, reactor, self.clock.seconds)

    async def test_healthy_and_cached(self):
        probe = self.probe()
        self.assertIsNone(await probe())
        self.assertEqual(self.plugin.calls, {"Version": 1, "Encrypt": 1, "Decrypt": 1})
        self.plugin.failing = {"Encrypt"}
        self.clock.advance(19.9)
        self.assertIsNone(await probe())
        self.clock.advance(0.1)
        reason = ("failed to perform encrypt section of the healthz check for KMS Provider "
                  "one, error: rpc error: code = Internal desc = Encrypt refused")
        self.assertEqual(await probe(), reason)
        self.clock.advance(2.9)
        self.assertEqual(await probe(), reason)
        self.assertEqual(self.plugin.calls["Encrypt"], 2)
        self.plugin.failing = {"Decrypt"}
        self.clock.advance(0.1)
        self.assertEqual(await probe(), (
            "failed to perform decrypt section of the healthz check for KMS Provider one, "
            "error: rpc error: code = Internal desc = Decrypt refused"))

    async def test_hung(self):
        self.plugin.delay = 30.0
        probe = self.probe(timeout=0.3)
        started = reactor.seconds()
        reasons = await gatherResults([probe(), probe()])
        self.assertLess(reactor.seconds() - started, 1.5)
        self.assertEqual(reasons, [(
            "failed to perform encrypt section of the healthz check for KMS Provider one, "
            f"error: failed get version from remote KMS provider: {DEADLINE}")] * 2)
        self.assertEqual(self.plugin.calls["Version"], 1)


class _Envelope:
    """Stands for a KMS envelope: its version and a check answering ``reason``."""

    def __init__(self, api_version: str, reason=None):
        self.api_version, self.reason = api_version, reason

    def health_check(self, reactor):
        return lambda: succeed(self.reason)


class ServedChecksTests(SynchronousTestCase):
    """Which checks are served, by upstream's ``LoadEncryptionConfig``."""

    def served(self, *envelopes, reload=False):
        checks = ProviderChecks.of(envelopes, reactor)
        return [(name, self.successResultOf(check()))
                for name, check in checks.served(reload, lambda: succeed("dynamic"))]

    def test_names(self):
        v1, v2, bad = _Envelope("v1"), _Envelope("v2"), _Envelope("v2", "down")
        self.assertEqual(self.served(), [])
        self.assertEqual(self.served(v2, bad, v1), [
            ("kms-provider-0", None), ("kms-provider-1", "down"), ("kms-provider-2", None)])
        self.assertEqual(self.served(v2, bad), [("kms-providers", "kms-provider-1: down")])
        self.assertEqual(self.served(bad, _Envelope("v2", "hung")), [
            ("kms-providers", "[kms-provider-0: down, kms-provider-1: hung]")])
        self.assertEqual(self.served(v2), [("kms-providers", None)])
        for envelopes in ((), (v1, v2)):
            self.assertEqual(self.served(*envelopes, reload=True),
                             [("kms-providers", "dynamic")])
