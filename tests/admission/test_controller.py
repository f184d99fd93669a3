"""
The service-account controller (platformd/controllers/serviceaccounts.py): ``default`` in
every namespace, existing and new, re-created when deleted; none in a terminating one.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd.compose import BUILTIN_NAMESPACES

from tests.stub import StubServer


class ControllerTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.client = self.stub.client()

    def accounts(self, namespace: str) -> list:
        r = self.client.get(f"/api/v1/namespaces/{namespace}/serviceaccounts")
        return [i["metadata"]["name"] for i in r.json()["items"]]

    def test_builtin_namespaces(self):
        for namespace in BUILTIN_NAMESPACES:
            self.assertEqual(self.accounts(namespace), ["default"], namespace)

    def test_new_namespace(self):
        self.client.post("/api/v1/namespaces", {"metadata": {"name": "team"}})
        self.assertEqual(self.accounts("team"), ["default"])

    def test_recreated_when_deleted(self):
        r = self.client.delete("/api/v1/namespaces/default/serviceaccounts/default")
        self.assertEqual(r.code, 200)
        self.stub.flush()
        self.assertEqual(self.accounts("default"), ["default"])
        again = self.client.get("/api/v1/namespaces/default/serviceaccounts/default").json()
        self.assertNotEqual(again["metadata"]["uid"], r.json()["metadata"]["uid"])

    def test_existing_namespaces_at_start(self):
        """Namespaces already stored when the server starts get theirs at start."""
        stub = StubServer()
        self.addCleanup(stub.stop)
        stub.components.service_accounts.stop()
        client = stub.client()
        client.post("/api/v1/namespaces", {"metadata": {"name": "late"}})
        self.assertEqual(client.get("/api/v1/namespaces/late/serviceaccounts").json()["items"],
                         [])
        stub.components.service_accounts.start()
        stub.flush()
        items = client.get("/api/v1/namespaces/late/serviceaccounts").json()["items"]
        self.assertEqual([i["metadata"]["name"] for i in items], ["default"])

    def test_terminating_namespace(self):
        """A namespace being deleted gets no new ``default``: it goes with the rest."""
        self.client.post("/api/v1/namespaces", {"metadata": {"name": "gone"}})
        self.client.post("/api/v1/namespaces/gone/configmaps",
                         {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}})
        self.client.delete("/api/v1/namespaces/gone")
        self.stub.flush()
        self.assertEqual(self.accounts("gone"), [])

    def test_stopped(self):
        """Once stopped it creates nothing."""
        self.stub.components.service_accounts.stop()
        self.client.delete("/api/v1/namespaces/default/serviceaccounts/default")
        self.stub.flush()
        self.assertEqual(self.accounts("default"), [])
