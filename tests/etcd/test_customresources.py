"""
CustomResourceDefinitions over two replicas on etcd: a definition created through one
replica is served by the other within a second (its controller hears the definition
through its own watch cache), objects written through either are read through both,
and deleting the definition through the other replica removes the objects and the kind
from both.
"""

from __future__ import annotations

import json
import time

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater

from tests.apiextensions.test_conversionwebhook import (
    V1, V2, ConversionServer, https_webhook, webhook_definition)
from tests.apiextensions.test_crd import CRDS, definition
from tests.etcd.test_replicas import ReplicasTestCase

WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


@inlineCallbacks
def until(check, seconds: float, what: str):
    """Poll ``check()`` (a Deferred of a bool) until true; the seconds it took."""
    started = time.monotonic()
    while True:
        if (yield check()):
            return time.monotonic() - started
        if time.monotonic() - started > seconds:
            raise AssertionError(f"{what}: not within {seconds}s")
        yield deferLater(reactor, 0.02, lambda: None)


class CustomResourceReplicaTests(ReplicasTestCase):
    @inlineCallbacks
    def test_definition_on_one_served_by_both(self):
        a, b = yield self.replicas()
        r = yield a.post(CRDS, definition())
        self.assertEqual(r.code, 201, r.body)

        @inlineCallbacks
        def served_by(client):
            r = yield client.get(WIDGETS)
            return r.code == 200
        took_a = yield until(lambda: served_by(a), 5, "served by A")
        took_b = yield until(lambda: served_by(b), 5, "served by B")
        self.assertLess(max(took_a, took_b), 1.0)
        r = yield a.post(WIDGETS, {"metadata": {"name": "one"}, "spec": {"size": 1}})
        self.assertEqual(r.code, 201, r.body)
        r = yield b.get(WIDGETS + "/one")
        self.assertEqual(r.json()["spec"], {"size": 1})
        r = yield b.post(WIDGETS, {"metadata": {"name": "two"}})
        self.assertEqual(r.code, 201, r.body)
        r = yield a.get(WIDGETS)
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["one", "two"])
        crd = (yield a.get(f"{CRDS}/widgets.example.com")).json()
        established = [c for c in crd["status"]["conditions"] if c["type"] == "Established"]
        self.assertEqual(established[0]["status"], "True")
        r = yield b.delete(f"{CRDS}/widgets.example.com")
        self.assertEqual(r.code, 200, r.body)

        @inlineCallbacks
        def gone_from(client):
            r = yield client.get(f"{CRDS}/widgets.example.com")
            s = yield client.get(WIDGETS)
            return r.code == 404 and s.code == 404
        yield until(lambda: gone_from(a), 10, "gone from A")
        yield until(lambda: gone_from(b), 10, "gone from B")
        # Created again: clean, on both.
        r = yield a.post(CRDS, definition())
        self.assertEqual(r.code, 201, r.body)
        yield until(lambda: served_by(b), 5, "served again by B")
        r = yield b.get(WIDGETS)
        self.assertEqual(r.json()["items"], [])


class StoredVersionReplicaTests(ReplicasTestCase):
    @inlineCallbacks
    def test_switched_storage_version_converted_on_every_replica(self):
        """Objects stored in v1 before the definition stores v2 are read in v2 through
        the webhook on both replicas and on one started after the switch (its objects
        preloaded with the cache); a patch in v2 through B stores it in v2, which A
        shows in v1 through the webhook."""
        webhook = ConversionServer()
        ca_bundle, url = https_webhook(self, webhook)
        a, b = yield self.replicas()
        r = yield a.post(CRDS, webhook_definition(ca_bundle, url))
        self.assertEqual(r.code, 201, r.body)

        @inlineCallbacks
        def shows(client, path: str, spec=None):
            r = yield client.get(path)
            return r.code == 200 and (spec is None or r.json()["spec"] == spec)
        yield until(lambda: shows(a, V2), 5, "served by A")
        r = yield a.post(V1, {"apiVersion": "example.com/v1", "kind": "Widget",
                              "metadata": {"name": "w0"}, "spec": {"size": "3"}})
        self.assertEqual(r.code, 201, r.body)
        crd = (yield a.get(f"{CRDS}/widgets.example.com")).json()
        for version in crd["spec"]["versions"]:
            version["storage"] = version["name"] == "v2"
        r = yield a.put(f"{CRDS}/widgets.example.com", crd)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["status"]["storedVersions"], ["v1", "v2"])
        for name, client in (("A", a), ("B", b)):
            yield until(lambda: shows(client, V2 + "/w0", {"replicas": 3}), 5,
                        f"converted by {name}")
        c = yield self.another()
        yield until(lambda: shows(c, V2 + "/w0", {"replicas": 3}), 5, "converted by C")
        r = yield c.get(V2 + "/w0")
        self.assertEqual(r.json()["apiVersion"], "example.com/v2")
        r = yield b.patch(V2 + "/w0", {"spec": {"replicas": 8}})
        self.assertEqual(r.code, 200, r.body)
        storage = self.servers[0].components.storage
        stored = yield storage.get("/registry/widgets.example.com/default/w0")
        self.assertEqual(json.loads(stored.value)["apiVersion"], "example.com/v2")
        yield until(lambda: shows(a, V1 + "/w0", {"size": "8"}), 5, "v1 on A")
        desired = [review["request"]["desiredAPIVersion"] for _, review in webhook.reviews]
        self.assertIn("example.com/v1", desired)  # the v2-stored object shown in v1
