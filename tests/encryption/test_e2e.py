"""A real server with --encryption-provider-config: Secrets encrypted in the database."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.e2e.harness import Client, start_server
from tests.encryption.helpers import IDENTITY, document, key, keys, write

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
          "stringData": {"password": "hunter2-plaintext"}}


def stored(data_dir: str, name: str) -> bytes:
    with closing(sqlite3.connect(os.path.join(data_dir, "platformd.db"))) as db:
        [(value,)] = db.execute(
            "SELECT value FROM revisions WHERE key = ? ORDER BY mod_revision DESC LIMIT 1",
            (f"/registry/secrets/default/{name}",))
        return value


class EndToEndTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def server(self, data_dir, doc):
        config = write(os.path.join(data_dir, "enc.json"), doc)
        server = yield start_server(self, "--encryption-provider-config", config,
                                    data_dir=data_dir)
        return server, Client(self, server.pki_dir, server.port_number)

    @inlineCallbacks
    def test_secret_encrypted_at_rest(self):
        data_dir = os.path.abspath(self.mktemp())
        os.makedirs(data_dir)
        server, client = yield self.server(
            data_dir, document((["secrets"], [keys("aesgcm", ("k1", key(32)))])))
        r = yield client.post("/api/v1/namespaces/default/secrets", SECRET)
        self.assertEqual(r.code, 201, r.body)
        r = yield client.get("/api/v1/namespaces/default/secrets/s")
        self.assertEqual(r.json()["data"]["password"], "aHVudGVyMi1wbGFpbnRleHQ=")
        value = stored(data_dir, "s")
        self.assertTrue(value.startswith(b"platform:enc:aesgcm:v1:k1:"))
        self.assertNotIn(b"hunter2", value)
        self.assertNotIn(b"aHVudGVyMi1wbGFpbnRleHQ", value)
        yield server.stopService()
        with open(os.path.join(data_dir, "platformd.db"), "rb") as f:
            self.assertNotIn(b"aHVudGVyMi1wbGFpbnRleHQ", f.read())

    @inlineCallbacks
    def test_rotation(self):
        """The documented procedure: add a key, make it first, rewrite, remove the old."""
        data_dir = os.path.abspath(self.mktemp())
        os.makedirs(data_dir)
        k1, k2 = key(32), key(32)
        server, client = yield self.server(
            data_dir, document((["secrets"], [keys("aescbc", ("k1", k1)), IDENTITY])))
        yield client.post("/api/v1/namespaces/default/secrets", SECRET)
        self.assertTrue(stored(data_dir, "s").startswith(b"platform:enc:aescbc:v1:k1:"))
        yield server.stopService()
        # 1-2. the new key added, first (a restart between each step, as upstream's HA
        # procedure restarts every server once per step)
        server, client = yield self.server(
            data_dir, document((["secrets"], [keys("aescbc", ("k2", k2), ("k1", k1))])))
        # 3. rewrite every object: GET then an unchanged PUT (what `kubectl get -o json |
        # kubectl replace -f -` does).  The value was read with a key that is no longer
        # first (stale), so the unchanged update still writes it, with the new key.
        r = yield client.get("/api/v1/namespaces/default/secrets/s")
        before = r.json()["metadata"]["resourceVersion"]
        r = yield client.put("/api/v1/namespaces/default/secrets/s", r.json())
        self.assertEqual(r.code, 200, r.body)
        self.assertNotEqual(r.json()["metadata"]["resourceVersion"], before)
        self.assertTrue(stored(data_dir, "s").startswith(b"platform:enc:aescbc:v1:k2:"))
        # Once current, an unchanged PUT writes nothing again (no new version).
        rewritten = r.json()["metadata"]["resourceVersion"]
        r = yield client.put("/api/v1/namespaces/default/secrets/s", r.json())
        self.assertEqual(r.json()["metadata"]["resourceVersion"], rewritten)
        yield server.stopService()
        # 4. the old key removed
        server, client = yield self.server(
            data_dir, document((["secrets"], [keys("aescbc", ("k2", k2))])))
        r = yield client.get("/api/v1/namespaces/default/secrets/s")
        self.assertEqual(r.json()["data"]["password"], "aHVudGVyMi1wbGFpbnRleHQ=")

    @inlineCallbacks
    def test_bad_config_refuses_start(self):
        data_dir = os.path.abspath(self.mktemp())
        os.makedirs(data_dir)
        bad = document((["secrets"], [keys("aesgcm", ("k1", key(7)))]))
        from platformd.process.startup import StartupError
        try:
            yield self.server(data_dir, bad)
        except StartupError as e:
            self.assertIn("got 7, expected one of [16 24 32]", str(e))
        else:
            self.fail("started")
