"""
A replaced configuration's KMS connections are closed once nothing uses them: the plugin
(behind a relay that sees platformd's connections) sees its connection closed after the
swap, not while a write's probe, a read or a health check is still inside it.
"""

from __future__ import annotations

from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from platformd.protos.platform.kms.apis.v2 import api_pb2_grpc
from platformd.storage.encryption.kms import KMSv2Client, KMSv2Envelope
from platformd.storage.encryption.reload import Swappable
from platformd.storage.transformers import IDENTITY, ByKeyPrefix
from tests.encryption.kmsv1plugin import serve
from tests.encryption.relay import Relay
from tests.encryption.test_kms import SECRET, Plugin


class SwapCloseTests(TestCase):
    timeout = 20

    def setUp(self):
        self.plugin = Plugin()
        self.addCleanup(self.plugin.released.set)
        endpoint = serve(self, self.plugin,
                         api_pb2_grpc.add_KeyManagementServiceServicer_to_server)
        self.relay = Relay(self, endpoint[len("unix://"):])
        self.swappable = Swappable(reactor)

    def use_plugin(self) -> KMSv2Envelope:
        """Swap in a configuration encrypting Secrets with the plugin."""
        envelope = KMSv2Envelope(KMSv2Client("p", self.relay.endpoint, 5.0))
        self.swappable.swap(ByKeyPrefix({"/registry/secrets/": envelope}), [envelope])
        return envelope

    async def write(self, value: bytes) -> bytes:
        prepared = self.swappable.prepare(SECRET, reactor)
        if prepared is not None:
            await prepared
        return self.swappable.to_storage(SECRET, value)

    async def still_open(self):
        """The connection stays open a while (nothing closes it behind our back)."""
        closed = self.relay.closed
        await deferLater(reactor, 0.2, lambda: None)
        self.assertEqual((len(self.relay.connections), self.relay.closed), (1, closed))

    async def test_closed_once_replaced(self):
        self.use_plugin()
        stored = await self.write(b"v")
        self.assertEqual(self.swappable.from_storage(SECRET, stored), b"v")
        closed = self.relay.next_close()
        self.swappable.swap(IDENTITY)
        await closed
        self.assertEqual((self.relay.connections, self.relay.closed), ([], 1))

    async def test_write_in_flight(self):
        """A write waiting on the old plugin's probe keeps its connection open."""
        self.use_plugin()
        self.plugin.delay = 30.0
        write = self.swappable.prepare(SECRET, reactor)
        while not self.plugin.statuses:  # the Status is with the plugin
            await deferLater(reactor, 0.01, lambda: None)
        self.swappable.swap(IDENTITY)
        await self.still_open()
        closed = self.relay.next_close()
        self.plugin.released.set()
        await write
        await closed

    async def test_read_in_flight(self):
        """A read whose Decrypt is with the old plugin keeps its connection open."""
        stored = await self.write_elsewhere()
        self.plugin.delay = 30.0
        reading = deferToThread(self.swappable.from_storage, SECRET, stored)
        while not self.relay.connections:
            await deferLater(reactor, 0.01, lambda: None)
        self.swappable.swap(IDENTITY)
        await self.still_open()
        closed = self.relay.next_close()
        self.plugin.released.set()
        self.assertEqual(await reading, b"v")
        await closed

    async def write_elsewhere(self) -> bytes:
        """A Secret sealed by another connection to the plugin; this one to read it (a
        Decrypt: its seed is not cached)."""
        other = KMSv2Envelope(KMSv2Client("p", self.relay.endpoint, 5.0))
        prepared = other.prepare(SECRET, reactor)
        await prepared
        stored = other.to_storage(SECRET, b"v")
        closed = self.relay.next_close()
        other.close()
        await closed
        self.use_plugin()
        return stored

    async def test_health_check_in_flight(self):
        """With automatic reload, the ``kms-providers`` check of the old configuration,
        under way, keeps its connection open; the next one checks the new."""
        self.use_plugin()
        [(name, check)] = self.swappable.health_checks(reload=True)
        self.assertEqual(name, "kms-providers")
        self.plugin.delay = 30.0
        checking = check()
        while not self.plugin.statuses:
            await deferLater(reactor, 0.01, lambda: None)
        self.swappable.swap(IDENTITY)
        await self.still_open()
        closed = self.relay.next_close()
        self.plugin.released.set()
        self.assertIsNone(await checking)
        await closed
        self.assertIsNone(await check())  # no KMS provider now: healthy
        self.assertEqual(self.plugin.statuses, 1)
