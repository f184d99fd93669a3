"""
KMS v2 against a test plugin: a grpcio server on a UNIX socket in the test.  Writes are
made as a backend makes them: ``prepare`` on the reactor, then ``to_storage``.
"""

from __future__ import annotations

import os
import tempfile
import threading
from concurrent import futures

import grpc
from twisted.internet import reactor
from twisted.internet.defer import CancelledError, ensureDeferred, gatherResults
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from platformd.protos.platform.kms.apis.v2 import api_pb2, api_pb2_grpc
from platformd.storage.encryption.kms import KMSError, KMSv2Client, KMSv2Envelope
from platformd.storage.interface import TransformError

SECRET = "/registry/secrets/default/s"


class Plugin(api_pb2_grpc.KeyManagementServiceServicer):
    """
    A toy KMS: 'encrypts' by XOR with a per-key-ID byte; can be slow (each call waits
    ``delay`` seconds, or until ``released`` is set: a test's cleanup ends a hang).  Its
    status says ``healthz`` and ``version``; ``Encrypt`` answers under
    ``encrypt_key_id`` (default ``key_id``), or fails with ``encrypt_error``.
    """

    def __init__(self):
        self.key_id = "key-1"
        self.healthz = "ok"
        self.version = "v2"
        self.encrypt_key_id = None
        self.encrypt_error = None
        self.delay = 0.0
        self.statuses = 0
        self.encrypts = 0
        self.released = threading.Event()

    def _wait(self):
        self.released.wait(self.delay)

    def _xor(self, key_id, data):
        k = sum(key_id.encode()) % 251 + 1
        return bytes(b ^ k for b in data)

    def Status(self, request, context):
        self.statuses += 1
        self._wait()
        return api_pb2.StatusResponse(version=self.version, healthz=self.healthz,
                                      key_id=self.key_id)

    def Encrypt(self, request, context):
        self._wait()
        self.encrypts += 1
        if self.encrypt_error:
            context.abort(grpc.StatusCode.INTERNAL, self.encrypt_error)
        key_id = self.key_id if self.encrypt_key_id is None else self.encrypt_key_id
        return api_pb2.EncryptResponse(ciphertext=self._xor(key_id, request.plaintext),
                                       key_id=key_id, annotations={"a.example.com": b"1"})

    def Decrypt(self, request, context):
        self._wait()
        assert request.annotations["a.example.com"] == b"1"
        return api_pb2.DecryptResponse(plaintext=self._xor(request.key_id, request.ciphertext))


class KMSv2Tests(TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kms", dir="/tmp")  # short: UNIX socket path
        self.socket = os.path.join(self.dir, "kms.sock")
        self.plugin = Plugin()
        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        api_pb2_grpc.add_KeyManagementServiceServicer_to_server(self.plugin, self.server)
        self.server.add_insecure_port(f"unix://{self.socket}")
        self.server.start()
        self.addCleanup(self.server.stop, None)
        self.now = 0.0

    def envelope(self, timeout=2.0, **kw):
        envelope = KMSv2Envelope(KMSv2Client("p", f"unix://{self.socket}", timeout),
                                 clock=lambda: self.now, **kw)
        self.addCleanup(envelope.close)
        return envelope

    async def write(self, envelope, value: bytes) -> bytes:
        """A write as a backend makes it: prepared on the reactor, then transformed."""
        prepared = envelope.prepare(SECRET, reactor)
        if prepared is not None:
            await prepared
        return envelope.to_storage(SECRET, value)

    async def test_roundtrip_and_dek_cached(self):
        e = self.envelope()
        stored = [await self.write(e, b"plaintext-%d" % i) for i in range(5)]
        self.assertEqual((self.plugin.statuses, self.plugin.encrypts), (1, 1))  # one seed
        self.assertTrue(all(b"plaintext" not in s for s in stored))
        self.assertEqual(e.from_storage(SECRET, stored[3]), b"plaintext-3")
        self.assertEqual(e.decrypt_calls, 0)  # the write's seed is cached
        fresh = self.envelope()  # a restarted server: asks the plugin once
        self.assertEqual([fresh.from_storage(SECRET, s) for s in stored],
                         [b"plaintext-%d" % i for i in range(5)])
        self.assertEqual(fresh.decrypt_calls, 1)

    async def test_aad(self):
        e = self.envelope()
        stored = await self.write(e, b"v")
        self.assertRaises(TransformError, e.from_storage, "/registry/secrets/default/t", stored)

    async def test_unprepared(self):
        """Without a seed, to_storage refuses in upstream's words; it never calls."""
        e = self.envelope()
        error = self.assertRaises(KMSError, e.to_storage, SECRET, b"v")
        self.assertEqual(str(error), "got unexpected nil transformer")
        self.assertEqual(self.plugin.statuses, 0)

    async def test_first_seed_shared(self):
        """Writes waiting for the first seed share one Status and one Encrypt."""
        self.plugin.delay = 0.2
        e = self.envelope()
        waits = [e.prepare(SECRET, reactor) for _ in range(10)]
        self.assertTrue(all(w is not None and not w.called for w in waits))
        await gatherResults(waits)
        self.assertEqual((self.plugin.statuses, self.plugin.encrypts), (1, 1))
        self.assertIsNone(e.prepare(SECRET, reactor))

    async def test_new_key_id(self):
        """
        The status is asked again once a minute has passed, in the background: the
        write that finds it due goes on with the current seed, later ones use the new
        key's.
        """
        e = self.envelope()
        old = await self.write(e, b"old")
        self.plugin.key_id = "key-2"
        self.now += 30
        self.assertIsNone(e.prepare(SECRET, reactor))  # status not asked again yet
        self.assertEqual(self.plugin.statuses, 1)
        self.now += 31
        self.assertIsNone(e.prepare(SECRET, reactor))
        self.assertIn(b"key-1", e.to_storage(SECRET, b"during"))
        while self.plugin.encrypts < 2 or e._probe.running:
            await deferLater(reactor, 0.01, lambda: None)
        new = await self.write(e, b"new")
        self.assertIn(b"key-2", new)
        self.assertEqual(e.from_storage(SECRET, old), b"old")
        self.assertEqual(e.from_storage(SECRET, new), b"new")

    async def test_down(self):
        e = self.envelope(timeout=0.5)
        stored = await self.write(e, b"v")
        self.server.stop(None).wait()
        # The seed is cached: reads and writes go on; a new server cannot read or write.
        self.assertEqual(e.from_storage(SECRET, stored), b"v")
        self.now += 61
        self.assertEqual(e.from_storage(SECRET, await self.write(e, b"w")), b"w")
        fresh = self.envelope(timeout=0.5)
        error = self.assertRaises(KMSError, fresh.from_storage, SECRET, stored)
        self.assertIn("failed to decrypt DEK with KMS provider p", str(error))
        error = await self.assertFailure(ensureDeferred(self.write(fresh, b"v")), KMSError)
        self.assertEqual(str(error), "failed to perform status section of the healthz check "
                                     "for KMS Provider p, error: rpc error: code = "
                                     "DeadlineExceeded desc = Deadline Exceeded")

    async def test_slow(self):
        """A plugin slower than the timeout fails the writes that wait; then serves."""
        e = self.envelope(timeout=0.2)
        self.plugin.delay = 0.5
        error = await self.assertFailure(ensureDeferred(self.write(e, b"v")), KMSError)
        self.assertEqual(str(error), "failed to perform status section of the healthz check "
                                     "for KMS Provider p, error: rpc error: code = "
                                     "DeadlineExceeded desc = Deadline Exceeded")
        self.plugin.delay = 0
        self.plugin.released.set()  # end the slow call
        self.assertEqual(e.from_storage(SECRET, await self.write(e, b"v")), b"v")

    async def test_cancelled_wait(self):
        """A write that stops waiting (its request's deadline) leaves the others be."""
        self.plugin.delay = 0.2
        e = self.envelope()
        gone, kept = e.prepare(SECRET, reactor), e.prepare(SECRET, reactor)
        gone.cancel()
        self.failureResultOf(gone, CancelledError)
        await kept
        self.assertEqual(e.from_storage(SECRET, e.to_storage(SECRET, b"v")), b"v")
