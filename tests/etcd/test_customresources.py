"""
CustomResourceDefinitions over two replicas on etcd: a definition created through one
replica is served by the other within a second (its controller hears the definition
through its own watch cache), objects written through either are read through both,
and deleting the definition through the other replica removes the objects and the kind
from both.
"""

from __future__ import annotations

import time

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater

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
