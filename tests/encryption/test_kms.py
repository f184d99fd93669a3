"""KMS v2 against a test plugin: a grpcio server on a UNIX socket in the test."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from concurrent import futures

import grpc
from twisted.trial.unittest import TestCase

from platformd.protos.platform.kms.apis.v2 import api_pb2, api_pb2_grpc
from platformd.storage.encryption.kms import KMSError, KMSv2Client, KMSv2Envelope
from platformd.storage.interface import TransformError

SECRET = "/registry/secrets/default/s"


class Plugin(api_pb2_grpc.KeyManagementServiceServicer):
    """A toy KMS: 'encrypts' by XOR with a per-key-ID byte; can be slow."""

    def __init__(self):
        self.key_id = "key-1"
        self.delay = 0.0
        self.encrypts = 0

    def _xor(self, key_id, data):
        k = sum(key_id.encode()) % 251 + 1
        return bytes(b ^ k for b in data)

    def Status(self, request, context):
        time.sleep(self.delay)
        return api_pb2.StatusResponse(version="v2", healthz="ok", key_id=self.key_id)

    def Encrypt(self, request, context):
        time.sleep(self.delay)
        self.encrypts += 1
        return api_pb2.EncryptResponse(ciphertext=self._xor(self.key_id, request.plaintext),
                                       key_id=self.key_id, annotations={"a.example.com": b"1"})

    def Decrypt(self, request, context):
        time.sleep(self.delay)
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

    def test_roundtrip_and_dek_cached(self):
        e = self.envelope()
        stored = [e.to_storage(SECRET, b"plaintext-%d" % i) for i in range(5)]
        self.assertEqual(self.plugin.encrypts, 1)  # one seed for every write
        self.assertTrue(all(b"plaintext" not in s for s in stored))
        self.assertEqual(e.from_storage(SECRET, stored[3]), b"plaintext-3")
        self.assertEqual(e.decrypt_calls, 0)  # the write's seed is cached
        fresh = self.envelope()  # a restarted server: asks the plugin once
        self.assertEqual([fresh.from_storage(SECRET, s) for s in stored],
                         [b"plaintext-%d" % i for i in range(5)])
        self.assertEqual(fresh.decrypt_calls, 1)

    def test_aad(self):
        e = self.envelope()
        stored = e.to_storage(SECRET, b"v")
        self.assertRaises(TransformError, e.from_storage, "/registry/secrets/default/t", stored)

    def test_new_key_id(self):
        e = self.envelope()
        old = e.to_storage(SECRET, b"old")
        self.plugin.key_id = "key-2"
        self.now += 30
        self.assertEqual(self.plugin.encrypts, 1)
        e.to_storage(SECRET, b"x")  # status not asked again yet
        self.assertEqual(self.plugin.encrypts, 1)
        self.now += 31
        new = e.to_storage(SECRET, b"new")
        self.assertEqual(self.plugin.encrypts, 2)
        self.assertIn(b"key-2", new)
        self.assertEqual(e.from_storage(SECRET, old), b"old")
        self.assertEqual(e.from_storage(SECRET, new), b"new")

    def test_down(self):
        e = self.envelope()
        stored = e.to_storage(SECRET, b"v")
        self.server.stop(None).wait()
        # The seed is cached: reads and writes go on; a new server cannot read.
        self.assertEqual(e.from_storage(SECRET, stored), b"v")
        self.now += 61
        self.assertEqual(e.from_storage(SECRET, e.to_storage(SECRET, b"w")), b"w")
        fresh = self.envelope(timeout=0.5)
        error = self.assertRaises(KMSError, fresh.from_storage, SECRET, stored)
        self.assertIn("failed to decrypt DEK with KMS provider p", str(error))
        self.assertRaises(KMSError, fresh.to_storage, SECRET, b"v")

    def test_slow(self):
        e = self.envelope(timeout=0.2)
        self.plugin.delay = 0.5
        error = self.assertRaises(KMSError, e.to_storage, SECRET, b"v")
        self.assertIn("DEADLINE_EXCEEDED", str(error))
        self.plugin.delay = 0
        threading.Event().wait(0.6)  # let the slow calls end
        self.assertEqual(e.from_storage(SECRET, e.to_storage(SECRET, b"v")), b"v")
