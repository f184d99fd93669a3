"""
Objects stored under an earlier storage version, end to end on the in-memory server
with a real HTTPS conversion webhook on loopback: objects written while ``v1`` was the
storage version are shown in ``v2`` (the storage version now) as the webhook converts
them, as upstream's storage codec converts each object from the version it was stored
in; a write stores an object in ``v2``; ``status.storedVersions`` only grows; a webhook
down is upstream's error for ``v2``'s reads while ``v1``'s, stored as they are, go on.
"""

from __future__ import annotations

import json

from twisted.internet import defer

from tests.apiextensions.test_conversionwebhook import V1, V2, ConversionCase
from tests.apiextensions.test_crd import CRDS

KEY = "/registry/widgets.example.com/default/"


class StoredVersionTests(ConversionCase):
    def stored(self, name: str) -> dict:
        """The object as the storage holds it."""
        kv = self.successResultOf(self.stub.storage.get(KEY + name))
        return json.loads(kv.value)

    @defer.inlineCallbacks
    def created_in_v1(self, *sizes: str):
        """Serve the definition (storage v1) and create ``w0``, ``w1``... in v1, each
        then read in v2 (no review left on its way)."""
        yield self.serve()
        for n, size in enumerate(sizes):
            r = yield self.call("POST", V1, {"apiVersion": "example.com/v1",
                                             "kind": "Widget", "metadata": {"name": f"w{n}"},
                                             "spec": {"size": size}})
            self.assertEqual(r.code, 201, r.body)
            yield self.until_ok(f"{V2}/w{n}")

    @defer.inlineCallbacks
    def store_v2(self):
        """The definition's storage version becomes v2; the definition as answered."""
        r = yield self.call("GET", f"{CRDS}/widgets.example.com")
        crd = r.json()
        for version in crd["spec"]["versions"]:
            version["storage"] = version["name"] == "v2"
        r = yield self.call("PUT", f"{CRDS}/widgets.example.com", crd)
        self.assertEqual(r.code, 200, r.body)
        return r.json()

    @defer.inlineCallbacks
    def test_stored_v1_read_in_v2_through_webhook(self):
        """After the switch, objects still stored in v1 are read, listed and watched in
        v2 converted by the webhook (one review for both), and in v1 as stored (no
        review); an object created in v2 is stored in v2 and reviewed for v1 only."""
        yield self.created_in_v1("3", "4")
        crd = yield self.store_v2()
        self.assertEqual(crd["status"]["storedVersions"], ["v1", "v2"])
        sent = len(self.webhook.reviews)
        r = yield self.until_ok(V2 + "/w0")
        got = r.json()
        self.assertEqual((got["apiVersion"], got["spec"]), ("example.com/v2", {"replicas": 3}))
        self.assertEqual(self.stored("w0")["apiVersion"], "example.com/v1")  # not rewritten
        r = yield self.call("GET", V2)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual([(i["apiVersion"], i["spec"]) for i in r.json()["items"]],
                         [("example.com/v2", {"replicas": 3}),
                          ("example.com/v2", {"replicas": 4})])
        reviews = [review for _, review in self.webhook.reviews[sent:]]
        self.assertEqual([[o["metadata"]["name"] for o in review["request"]["objects"]]
                          for review in reviews], [["w0", "w1"]])
        self.assertEqual(reviews[0]["request"]["desiredAPIVersion"], "example.com/v2")
        r = yield self.call("GET", V1 + "/w1")
        self.assertEqual((r.json()["apiVersion"], r.json()["spec"]),
                         ("example.com/v1", {"size": "4"}))
        self.assertEqual(len(self.webhook.reviews), sent + 1)  # v1's need none
        watch2 = self.stub.client().watch(V2 + "?watch=1")
        watch1 = self.stub.client().watch(V1 + "?watch=1")
        yield self.settle(lambda: len(watch2.events) == 2 and len(watch1.events) == 2)
        self.assertEqual([e["object"]["spec"] for e in watch2.events],
                         [{"replicas": 3}, {"replicas": 4}])
        self.assertEqual([e["object"]["spec"] for e in watch1.events],
                         [{"size": "3"}, {"size": "4"}])
        # Created in v2: stored as it is (no review), shown in v1 through the webhook.
        sent = len(self.webhook.reviews)
        r = yield self.call("POST", V2, {"apiVersion": "example.com/v2", "kind": "Widget",
                                         "metadata": {"name": "w2"},
                                         "spec": {"replicas": 5}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((r.json()["apiVersion"], r.json()["spec"]),
                         ("example.com/v2", {"replicas": 5}))
        self.assertEqual(self.stored("w2")["spec"], {"replicas": 5})
        r = yield self.call("GET", V2 + "/w2")
        self.assertEqual(r.json()["spec"], {"replicas": 5})
        r = yield self.call("GET", V1 + "/w2")
        self.assertEqual(r.json()["spec"], {"size": "5"})
        yield self.settle(lambda: len(watch2.events) == 3 and len(watch1.events) == 3)
        self.assertEqual((watch2.events[2]["type"], watch2.events[2]["object"]["spec"]),
                         ("ADDED", {"replicas": 5}))
        self.assertEqual(watch1.events[2]["object"]["spec"], {"size": "5"})
        self.assertEqual(
            [review["request"]["desiredAPIVersion"]
             for _, review in self.webhook.reviews[sent:]], ["example.com/v1"])

    @defer.inlineCallbacks
    def test_writes_store_in_v2(self):
        """A patch in v2 of an object stored in v1 stores it in v2; so does an update
        that changes nothing (upstream's new bytes differ from the stored ones); a
        second such update is no write.  storedVersions keeps v1 (upstream only
        appends; the storage version migrator removes it through the status)."""
        yield self.created_in_v1("3", "4")
        yield self.store_v2()
        yield self.until_ok(V2 + "/w0")
        r = yield self.call("PATCH", V2 + "/w0", {"spec": {"replicas": 8}},
                            content_type="application/merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["spec"], {"replicas": 8})
        stored = self.stored("w0")
        self.assertEqual((stored["apiVersion"], stored["spec"]),
                         ("example.com/v2", {"replicas": 8}))
        r = yield self.call("GET", V1 + "/w0")
        self.assertEqual(r.json()["spec"], {"size": "8"})
        r = yield self.call("GET", V2 + "/w1")
        before = r.json()
        r = yield self.call("PUT", V2 + "/w1", before)
        self.assertEqual(r.code, 200, r.body)
        self.assertNotEqual(r.json()["metadata"]["resourceVersion"],
                            before["metadata"]["resourceVersion"])
        self.assertEqual(self.stored("w1")["apiVersion"], "example.com/v2")
        again = r.json()
        r = yield self.call("PUT", V2 + "/w1", again)
        self.assertEqual(r.json()["metadata"]["resourceVersion"],
                         again["metadata"]["resourceVersion"])
        r = yield self.call("GET", V1 + "/w1")
        self.assertEqual(r.json()["spec"], {"size": "4"})
        r = yield self.call("GET", f"{CRDS}/widgets.example.com")
        crd = r.json()
        self.assertEqual(crd["status"]["storedVersions"], ["v1", "v2"])
        # v1 may not go from the versions while it is listed as stored ...
        without_v1 = {**crd, "spec": {**crd["spec"], "versions": [
            v for v in crd["spec"]["versions"] if v["name"] == "v2"]}}
        r = yield self.call("PUT", f"{CRDS}/widgets.example.com", without_v1)
        self.assertEqual(r.code, 422, r.body)
        self.assertEqual(r.json()["details"]["causes"], [{
            "reason": "FieldValueInvalid", "field": "status.storedVersions[0]",
            "message": 'Invalid value: "v1": must appear in spec.versions'}])
        # ... until the storage version migrator, having rewritten every object,
        # removes it through the status.
        crd["status"]["storedVersions"] = ["v2"]
        r = yield self.call("PUT", f"{CRDS}/widgets.example.com/status", crd)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["status"]["storedVersions"], ["v2"])

    @defer.inlineCallbacks
    def test_webhook_down(self):
        """Switched while the webhook is down: v2's reads and writes of the object
        stored in v1, and its lists, answer upstream's error naming the stored version;
        an object stored in v2 is created, read, patched and deleted in v2 (upstream
        reads it from etcd, needing no conversion), and v1 reads its object as stored;
        once the webhook answers, v2's next read converts."""
        yield self.created_in_v1("3")
        number = self.port.getHost().port
        yield self.port.stopListening()
        yield self.stub.components.custom_resources.caller.close()
        yield self.store_v2()
        r = yield self.until_ok(V1 + "/w0")
        self.assertEqual(r.json()["spec"], {"size": "3"})
        message = ("conversion webhook for example.com/v1, Kind=Widget failed: "
                   f'Post "{self.url}?timeout=30s": Connection was refused by other side: '
                   "111: Connection refused.")
        r = yield self.call("GET", V2 + "/w0")
        self.assertStatus(r, message)
        r = yield self.call("GET", V2)
        self.assertStatus(r, message)
        r = yield self.call("PATCH", V2 + "/w0", {"spec": {"replicas": 9}},
                            content_type="application/merge-patch+json")
        self.assertStatus(r, message)
        r = yield self.call("POST", V2, {"apiVersion": "example.com/v2", "kind": "Widget",
                                         "metadata": {"name": "w1"},
                                         "spec": {"replicas": 5}})
        self.assertEqual(r.code, 201, r.body)
        r = yield self.call("GET", V2 + "/w1")
        self.assertEqual((r.code, r.json()["spec"]), (200, {"replicas": 5}), r.body)
        r = yield self.call("PATCH", V2 + "/w1", {"spec": {"replicas": 6}},
                            content_type="application/merge-patch+json")
        self.assertEqual((r.code, r.json()["spec"]), (200, {"replicas": 6}), r.body)
        r = yield self.call("GET", V2 + "/w1")
        self.assertEqual(r.json()["spec"], {"replicas": 6})
        r = yield self.call("GET", V2 + "/nothing")
        self.assertEqual(r.code, 404, r.body)
        r = yield self.call("GET", V1 + "/w0")
        self.assertEqual(r.json()["spec"], {"size": "3"})
        r = yield self.call("DELETE", V2 + "/w1")
        self.assertEqual(r.code, 200, r.body)
        self.port = self.listen(number)
        r = yield self.call("GET", V2 + "/w0")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["spec"], {"replicas": 3})
        r = yield self.call("GET", V2)
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["w0"])
