"""The providers, their prefixes and key lengths, and the per-resource combination."""

from __future__ import annotations

import json

from twisted.trial.unittest import TestCase

from platformd.storage.encryption.build import build
from platformd.storage.encryption.config import load
from platformd.storage.encryption.aes import CBC, GCM
from platformd.storage.encryption.secretbox import Secretbox
from platformd.storage.interface import TransformError
from tests.encryption.helpers import IDENTITY, document, key, keys

SECRET = "/registry/secrets/default/s"
SERVED = [("secrets", ""), ("configmaps", ""), ("roles", "rbac.authorization.platform.io"),
          ("namespaces", "")]


def transformer(*entries):
    t, _ = build(load(json.dumps(document(*entries)).encode()), SERVED)
    return t


class ProviderTests(TestCase):
    def roundtrip(self, t, value=b'{"data":"hunter2"}'):
        stored = t.to_storage(SECRET, value)
        self.assertNotIn(b"hunter2", stored)
        self.assertEqual(t.from_storage(SECRET, stored), value)
        return stored

    def test_aesgcm_every_key_length(self):
        for size in (16, 24, 32):
            t = transformer((["secrets"], [keys("aesgcm", ("k1", key(size)))]))
            stored = self.roundtrip(t)
            self.assertTrue(stored.startswith(b"platform:enc:aesgcm:v1:k1:"))

    def test_aescbc(self):
        t = transformer((["secrets"], [keys("aescbc", ("k1", key(32)))]))
        self.assertTrue(self.roundtrip(t).startswith(b"platform:enc:aescbc:v1:k1:"))
        for value in (b"", b"x" * 16, b"y" * 33):
            self.assertEqual(t.from_storage(SECRET, t.to_storage(SECRET, value)), value)

    def test_secretbox(self):
        t = transformer((["secrets"], [keys("secretbox", ("k1", key(32)))]))
        self.assertTrue(self.roundtrip(t).startswith(b"platform:enc:secretbox:v1:k1:"))

    def test_identity_first_writes_plaintext_and_reads_encrypted(self):
        k = key(32)
        encrypted = transformer((["secrets"], [keys("aesgcm", ("k1", k))])).to_storage(
            SECRET, b"v")
        t = transformer((["secrets"], [IDENTITY, keys("aesgcm", ("k1", k))]))
        self.assertEqual(t.to_storage(SECRET, b"v"), b"v")
        self.assertEqual(t.from_storage(SECRET, encrypted), b"v")

    def test_plaintext_read_by_identity_after_encryption_added(self):
        t = transformer((["secrets"], [keys("aesgcm", ("k1", key(16))), IDENTITY]))
        self.assertEqual(t.from_storage(SECRET, b'{"old":1}'), b'{"old":1}')

    def test_without_identity_plaintext_fails(self):
        t = transformer((["secrets"], [keys("aesgcm", ("k1", key(16)))]))
        self.assertRaises(TransformError, t.from_storage, SECRET, b'{"old":1}')

    def test_identity_alone_refuses_encrypted(self):
        encrypted = transformer((["secrets"], [keys("aesgcm", ("k1", key(16)))])).to_storage(
            SECRET, b"v")
        t = transformer((["secrets"], [IDENTITY]))
        e = self.assertRaises(TransformError, t.from_storage, SECRET, encrypted)
        self.assertEqual(str(e), "identity transformer tried to read encrypted data")

    def test_second_key_reads_first_writes(self):
        k1, k2 = key(32), key(32)
        old = transformer((["secrets"], [keys("aesgcm", ("k1", k1))]))
        new = transformer((["secrets"], [keys("aesgcm", ("k2", k2), ("k1", k1))]))
        stored = old.to_storage(SECRET, b"v")
        self.assertEqual(new.from_storage(SECRET, stored), b"v")
        self.assertTrue(new.to_storage(SECRET, b"v").startswith(b"platform:enc:aesgcm:v1:k2:"))
        gone = transformer((["secrets"], [keys("aesgcm", ("k2", k2))]))
        e = self.assertRaises(TransformError, gone.from_storage, SECRET, stored)
        self.assertEqual(str(e), "no matching key was found for the provided AES transformer")

    def test_moved_ciphertext_fails_aad(self):
        t = transformer((["secrets"], [keys("aesgcm", ("k1", key(32)))]))
        stored = t.to_storage(SECRET, b"v")
        e = self.assertRaises(TransformError, t.from_storage, SECRET + "2", stored)
        self.assertEqual(str(e), "cipher: message authentication failed")

    def test_tampered(self):
        for kind in ("aesgcm", "secretbox", "aescbc"):
            t = transformer((["secrets"], [keys(kind, ("k1", key(32)))]))
            stored = bytearray(t.to_storage(SECRET, b"v" * 40))
            stored[-1] ^= 1
            if kind == "aescbc":  # unauthenticated: at best a padding error
                continue
            self.assertRaises(TransformError, t.from_storage, SECRET, bytes(stored))
        self.assertRaises(TransformError, GCM(b"k" * 16).from_storage, SECRET, b"short")
        self.assertRaises(TransformError, CBC(b"k" * 32).from_storage, SECRET, b"x" * 17)
        self.assertRaises(TransformError, Secretbox(b"k" * 32).from_storage, SECRET, b"x")

    def test_unknown_prefix(self):
        t = transformer((["secrets"], [keys("aesgcm", ("k1", key(32)))]))
        e = self.assertRaises(TransformError, t.from_storage, SECRET, b"platform:enc:zz:")
        self.assertEqual(str(e), "no matching prefix found")


class ResourceMatchingTests(TestCase):
    def chosen(self, t, key_):
        return t.choose(key_)

    def test_only_listed_resources(self):
        t = transformer((["secrets"], [keys("aesgcm", ("k1", key(32)))]))
        self.assertEqual(t.to_storage("/registry/configmaps/default/c", b"v"), b"v")
        self.assertNotEqual(t.to_storage(SECRET, b"v"), b"v")

    def test_core_wildcard(self):
        t = transformer((["*."], [keys("aesgcm", ("k1", key(32)))]))
        for k in ("/registry/configmaps/d/c", SECRET, "/registry/namespaces/n"):
            self.assertNotEqual(t.to_storage(k, b"v"), b"v")
        role = "/registry/roles.rbac.authorization.platform.io/d/r"
        self.assertEqual(t.to_storage(role, b"v"), b"v")

    def test_group_wildcard(self):
        t = transformer((["*.rbac.authorization.platform.io"],
                         [keys("aesgcm", ("k1", key(32)))]))
        role = "/registry/roles.rbac.authorization.platform.io/d/r"
        self.assertNotEqual(t.to_storage(role, b"v"), b"v")
        self.assertEqual(t.to_storage(SECRET, b"v"), b"v")

    def test_all_wildcard_and_precedence(self):
        t = transformer((["secrets"], [keys("secretbox", ("s", key(32)))]),
                        (["*.*"], [keys("aesgcm", ("g", key(32)))]))
        self.assertTrue(t.to_storage(SECRET, b"v").startswith(b"platform:enc:secretbox:"))
        role = "/registry/roles.rbac.authorization.platform.io/d/r"
        self.assertTrue(t.to_storage(role, b"v").startswith(b"platform:enc:aesgcm:"))
        self.assertEqual(t.to_storage("/other", b"v"), b"v")

    def test_wildcards_cover_resources_served_later(self):
        """``*.*`` and ``*.<group>`` encrypt a custom resource's objects although it was
        not served when the configuration was read (upstream's wildcards)."""
        t = transformer((["*.example.com"], [keys("secretbox", ("s", key(32)))]),
                        (["*.*"], [keys("aesgcm", ("g", key(32)))]))
        widget = "/registry/widgets.example.com/d/w"
        self.assertTrue(t.to_storage(widget, b"v").startswith(b"platform:enc:secretbox:"))
        other = "/registry/gizmos.other.org/g"
        self.assertTrue(t.to_storage(other, b"v").startswith(b"platform:enc:aesgcm:"))
        only_group = transformer((["*.example.com"], [keys("aesgcm", ("k", key(32)))]))
        self.assertEqual(only_group.to_storage(other, b"v"), b"v")

    def test_resource_with_group(self):
        t = transformer((["roles.rbac.authorization.platform.io"],
                         [keys("aesgcm", ("k1", key(32)))]))
        role = "/registry/roles.rbac.authorization.platform.io/d/r"
        self.assertNotEqual(t.to_storage(role, b"v"), b"v")


class StaleTests(TestCase):
    """upstream's stale answer: read by other than the first provider or key."""

    def test_stale_values_are_remembered_until_rewritten(self):
        from platformd.storage.memory import MemoryStorage
        from platformd.storage.transformers import is_stale
        k1, k2 = key(32), key(32)
        old = transformer((["secrets"], [keys("aesgcm", ("k1", k1)), IDENTITY]))
        new = transformer((["secrets"], [keys("aesgcm", ("k2", k2), ("k1", k1)), IDENTITY]))
        secret, configmap = "/registry/secrets/ns/s", "/registry/configmaps/ns/c"
        written = old.to_storage(secret, b"v")
        self.assertFalse(is_stale(old, secret, written))
        self.assertTrue(is_stale(new, secret, written))  # k1 is no longer first
        self.assertTrue(is_stale(new, secret, b"plain"))  # identity is not first
        self.assertFalse(is_stale(new, secret, new.to_storage(secret, b"v")))
        self.assertFalse(is_stale(new, configmap, b"plain"))  # not encrypted at all
        storage = MemoryStorage(None, transformer=old)
        storage.start()
        self.successResultOf(storage.create(secret, b"v"))
        storage._values.value(secret, written)
        self.assertFalse(storage.needs_rewrite(secret))
        reading = MemoryStorage(None, transformer=new)
        reading._values.value(secret, written)
        self.assertTrue(reading.needs_rewrite(secret))
        reading._values.stored(secret, b"v")
        self.assertFalse(reading.needs_rewrite(secret))
