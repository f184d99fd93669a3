"""KMS v1 against a real test plugin (grpcio on a UNIX socket): upstream's envelope."""

from __future__ import annotations

import os
import struct

from twisted.trial.unittest import TestCase

from platformd.storage.encryption.aes import CBC
from platformd.storage.encryption.kms import KMSError
from platformd.storage.encryption.kmsv1 import KMSv1Client, KMSv1Envelope
from platformd.storage.interface import TransformError
from tests.encryption.kmsv1plugin import V1Plugin, serve_v1

SECRET = "/registry/secrets/default/s"


class KMSv1Tests(TestCase):
    def setUp(self):
        self.plugin = V1Plugin()
        self.endpoint = serve_v1(self, self.plugin)

    def envelope(self, cache_size=1000, timeout=2.0, endpoint=None):
        envelope = KMSv1Envelope(KMSv1Client("one", endpoint or self.endpoint, timeout),
                                 cache_size)
        self.addCleanup(envelope.close)
        return envelope

    def test_wire_format(self):
        """uint16 BE length ‖ sealed DEK ‖ nonce(12) ‖ AES-GCM(data) + tag(16)."""
        stored = self.envelope().to_storage(SECRET, b"plaintext")
        (length,) = struct.unpack(">H", stored[:2])
        sealed = stored[2:2 + length]
        self.assertEqual(length, len(b"sealed:") + 32)  # a fresh 32-byte DEK, sealed
        self.assertTrue(sealed.startswith(b"sealed:"))
        self.assertEqual(len(stored), 2 + length + 12 + len(b"plaintext") + 16)
        self.assertNotIn(b"plaintext", stored)

    def test_dek_per_write_and_cache(self):
        e = self.envelope()
        stored = [e.to_storage(SECRET, b"v%d" % i) for i in range(3)]
        self.assertEqual(self.plugin.calls, {"Version": 1, "Encrypt": 3, "Decrypt": 0})
        self.assertEqual(len({s[:41] for s in stored}), 3)  # three different DEKs
        self.assertEqual(e.from_storage(SECRET, stored[1]), b"v1")
        self.assertEqual(e.decrypt_calls, 0)  # the write cached its DEK
        fresh = self.envelope()  # a restarted server: one Decrypt per DEK, then cached
        for _ in range(2):
            self.assertEqual([fresh.from_storage(SECRET, s) for s in stored],
                             [b"v0", b"v1", b"v2"])
        self.assertEqual(fresh.decrypt_calls, 3)
        self.assertEqual(self.plugin.calls["Decrypt"], 3)
        self.assertEqual(self.plugin.calls["Version"], 2)  # once per client

    def test_cache_disabled_and_bounded(self):
        writer = self.envelope()
        stored = [writer.to_storage(SECRET, b"v%d" % i) for i in range(2)]
        off = self.envelope(cache_size=-1)
        for _ in range(3):
            off.from_storage(SECRET, stored[0])
        self.assertEqual(off.decrypt_calls, 3)
        one = self.envelope(cache_size=1)
        for s in (stored[0], stored[0], stored[1], stored[0]):
            one.from_storage(SECRET, s)
        self.assertEqual(one.decrypt_calls, 3)  # stored[1] evicted stored[0]

    def test_aad_and_bad_data(self):
        e = self.envelope()
        stored = e.to_storage(SECRET, b"v")
        error = self.assertRaises(TransformError, e.from_storage,
                                  "/registry/secrets/default/t", stored)
        # Upstream's unionTransformers: GCM's error, then CBC's, aggregated.
        self.assertTrue(str(error).startswith("[cipher: message authentication failed, "),
                        str(error))
        error = self.assertRaises(TransformError, e.from_storage, SECRET, b"\x00\x09abc")
        self.assertEqual(str(error), "invalid data encountered by envelope transformer: "
                                     "failed to read uint16 length prefixed data")

    def test_reads_cbc(self):
        """Data written by AES-CBC under the DEK (upstream before 1.25) still reads."""
        dek = os.urandom(32)
        sealed = b"sealed:" + bytes(b ^ 0x5A for b in dek)
        stored = struct.pack(">H", len(sealed)) + sealed + CBC(dek).to_storage(SECRET, b"old")
        e = self.envelope()
        self.assertEqual(e.from_storage(SECRET, stored), b"old")
        self.assertTrue(e.stale(SECRET, stored))  # an unchanged update rewrites it with GCM
        current = e.to_storage(SECRET, b"new")
        self.assertEqual(e.from_storage(SECRET, current), b"new")
        self.assertFalse(e.stale(SECRET, current))

    def test_version_checked(self):
        self.plugin.version = "v2"
        error = self.assertRaises(KMSError, self.envelope().to_storage, SECRET, b"v")
        self.assertEqual(str(error), "KMS provider api version v2 is not supported, only "
                                     "v1beta1 is supported now")
        self.assertEqual(self.plugin.calls["Encrypt"], 0)

    def test_plugin_errors(self):
        error = self.assertRaises(KMSError, self.envelope().from_storage, SECRET,
                                  b"\x00\x03xyzdata")
        self.assertEqual(str(error), "rpc error: code = InvalidArgument desc = not sealed by me")

    def test_plugin_down(self):
        """Waits for the plugin (wait-for-ready) until the timeout, then fails."""
        e = self.envelope(timeout=0.3)
        stored = e.to_storage(SECRET, b"v")
        self.plugin_server.stop(None).wait()
        self.assertEqual(e.from_storage(SECRET, stored), b"v")  # cached DEK
        error = self.assertRaises(KMSError, e.to_storage, SECRET, b"w")  # each write seals
        self.assertEqual(str(error), "rpc error: code = DeadlineExceeded desc = "
                                     "Deadline Exceeded")
        fresh = self.envelope(timeout=0.3)
        error = self.assertRaises(KMSError, fresh.from_storage, SECRET, stored)
        self.assertIn("failed get version from remote KMS provider: rpc error: code = "
                      "DeadlineExceeded", str(error))

    def test_slow_plugin(self):
        """A call slower than ``timeout`` fails; the next one, in time, works."""
        e = self.envelope(timeout=0.2)
        e.to_storage(SECRET, b"v")  # Version checked
        self.plugin.delay = 0.4
        error = self.assertRaises(KMSError, e.to_storage, SECRET, b"w")
        self.assertEqual(str(error), "rpc error: code = DeadlineExceeded desc = "
                                     "Deadline Exceeded")
        self.plugin.delay = 0
        self.assertEqual(e.from_storage(SECRET, e.to_storage(SECRET, b"w")), b"w")
