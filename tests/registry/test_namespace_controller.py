"""
The namespace controller does no work after stop(): pending calls are cancelled; the
namespace kind's ``finalize``, with which it removes an emptied namespace.
"""

from twisted.trial.unittest import SynchronousTestCase

from platformd.context import internal
from platformd.registry import core
from platformd.registry.kinds.namespace import finalize

from tests.stub import StubServer


class StopTests(SynchronousTestCase):
    def test_nothing_runs_after_stop(self):
        stub = StubServer()
        self.addCleanup(stub.stop)
        client = stub.client()
        self.assertEqual(client.post("/api/v1/namespaces", {"metadata": {"name": "t"}}).code, 201)
        self.assertEqual(client.post("/api/v1/namespaces/t/configmaps",
                                     {"metadata": {"name": "c"}}).code, 201)
        controller = stub.components.namespaces
        controller.stop()
        before = set(stub.clock.getDelayedCalls())
        self.assertEqual(client.delete("/api/v1/namespaces/t").code, 200)
        # The namespace is terminating, but its content stays: the controller stopped.
        self.assertEqual(client.get("/api/v1/namespaces/t/configmaps/c").code, 200)
        self.assertEqual([c for c in stub.clock.getDelayedCalls()
                          if c not in before and c.active()], [])
        controller.start()  # started again, it picks the namespace up
        stub.flush()
        self.assertEqual(client.get("/api/v1/namespaces/t/configmaps/c").code, 404)


class FinalizeTests(SynchronousTestCase):
    """``namespace.finalize`` (the namespace kind's own operation, not the generic
    store's): it removes a namespace whose ``metadata.finalizers`` are gone and leaves
    one that still has some."""

    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.stub.components.namespaces.stop()  # finalize is called here, not by it
        self.client = self.stub.client()
        self.store = self.stub.components.store_for(core.NAMESPACE)

    def terminating(self, name: str, finalizers=()) -> None:
        body = {"metadata": {"name": name, "finalizers": list(finalizers)}}
        self.assertEqual(self.client.post("/api/v1/namespaces", body).code, 201)
        self.assertEqual(self.client.delete(f"/api/v1/namespaces/{name}").code, 200)

    def test_removes(self):
        self.terminating("t")
        self.assertEqual(self.client.get("/api/v1/namespaces/t").code, 200)  # spec.finalizers
        self.successResultOf(finalize(self.store, internal(), "t"))
        self.assertEqual(self.client.get("/api/v1/namespaces/t").code, 404)

    def test_metadata_finalizers_hold_it_back(self):
        self.terminating("t", ["example.com/hold"])
        self.successResultOf(finalize(self.store, internal(), "t"))
        r = self.client.get("/api/v1/namespaces/t")
        self.assertEqual(r.code, 200)
        self.assertTrue(r.json()["metadata"]["deletionTimestamp"])

    def test_absent(self):
        self.successResultOf(finalize(self.store, internal(), "nope"))
