"""A StubServer with the RBAC stores at hand, and Deferreds resolved by flushing it."""

from __future__ import annotations

from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from platformd.context import internal
from platformd.registry import rbac
from tests.stub import StubServer


class BootstrapCase(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        stores = self.stub.components.stores
        self.stores = stores
        self.roles = stores[rbac.CLUSTER_ROLE.gvr]
        self.bindings = stores[rbac.CLUSTER_ROLE_BINDING.gvr]

    def resolve(self, d):
        """The result of ``d`` once the server has run everything due."""
        out = []
        d.addBoth(out.append)
        self.stub.flush()
        self.assertTrue(out, "the Deferred never fired")
        if isinstance(out[0], Failure):
            out[0].raiseException()
        return out[0]

    def revision(self) -> int:
        return self.stub.cache.revision

    def role(self, name: str):
        entry = self.roles.cache.get(rbac.CLUSTER_ROLE.storage_key(None, name))
        return None if entry is None else entry.obj

    def binding(self, name: str):
        entry = self.bindings.cache.get(rbac.CLUSTER_ROLE_BINDING.storage_key(None, name))
        return None if entry is None else entry.obj

    def create_role(self, name: str, labels=None, rules=(), aggregate=None):
        obj = {"metadata": {"name": name, "labels": dict(labels or {})},
               "rules": list(rules)}
        if aggregate is not None:
            obj["aggregationRule"] = {"clusterRoleSelectors": aggregate}
        return self.resolve(self.roles.create(internal(), obj, None))

    def change_role(self, name: str, change):
        def updated(current):
            change(current)
            return current
        return self.resolve(self.roles.update(internal(), None, name, updated))
