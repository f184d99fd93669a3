"""The namespace controller does no work after stop(): pending calls are cancelled."""

from twisted.trial.unittest import SynchronousTestCase

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
