"""
The admission seam (platformd/admission): mutating then validating plugins on every
write, with the request context, the old object and dry run; plugins that answer later;
NamespaceLifecycle as the first plugin, with upstream's messages.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from platformd import errors
from platformd.admission.interfaces import IMutatingPlugin, IValidatingPlugin

from tests.stub import StubServer

CM = "/api/v1/namespaces/default/configmaps"


@implementer(IMutatingPlugin)
class Labeller:
    """Adds a label; records what it saw. With ``later``, answers on a Deferred."""

    name = "Labeller"

    def __init__(self, later=False):
        self.seen = []
        self.later = later
        self.pending = []

    def handles(self, operation):
        return operation in ("CREATE", "UPDATE")

    def admit(self, a):
        self.seen.append((a.operation, a.name, a.dry_run, a.context.user.name,
                          (a.old or {}).get("data")))
        a.obj["metadata"].setdefault("labels", {})["admitted"] = "yes"
        if self.later:
            d = Deferred()
            self.pending.append(d)
            return d
        return None


@implementer(IValidatingPlugin)
class Refuser:
    name = "Refuser"

    def __init__(self):
        self.seen = []

    def handles(self, operation):
        return True

    def validate(self, a):
        self.seen.append((a.operation, (a.obj or {}).get("data"), (a.old or {}).get("data"),
                          a.options))
        data = (a.obj or {}).get("data") or {}
        if data.get("bad") or (a.operation == "DELETE" and (a.old.get("data") or {}).get("keep")):
            raise errors.forbidden("configmaps", "", a.name, "refused by policy")


class AdmissionTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.client = self.stub.client(user="jane", groups=("devs",))
        self.chain = self.stub.components.admission

    def use(self, *plugins):
        self.chain.set_plugins([*self.chain.plugins, *plugins])

    def test_mutating_then_validating_on_create_update_delete(self):
        labeller, refuser = Labeller(), Refuser()
        self.use(labeller, refuser)
        r = self.client.post(CM, {"metadata": {"name": "a"}, "data": {"k": "1"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["metadata"]["labels"], {"admitted": "yes"})
        r = self.client.put(f"{CM}/a", {"metadata": {"name": "a"}, "data": {"k": "2"}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["metadata"]["labels"], {"admitted": "yes"})
        r = self.client.delete(f"{CM}/a?propagationPolicy=Background")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(labeller.seen, [("CREATE", "a", False, "jane", None),
                                         ("UPDATE", "a", False, "jane", {"k": "1"})])
        self.assertEqual(refuser.seen, [
            ("CREATE", {"k": "1"}, None, None),
            ("UPDATE", {"k": "2"}, {"k": "1"}, None),
            ("DELETE", None, {"k": "2"}, {"propagationPolicy": "Background"})])

    def test_validating_refusal_stores_nothing(self):
        self.use(Refuser())
        r = self.client.post(CM, {"metadata": {"name": "a"}, "data": {"bad": "1"}})
        self.assertEqual((r.code, r.json()["message"]),
                         (403, 'configmaps "a" is forbidden: refused by policy'))
        self.assertEqual(self.client.get(f"{CM}/a").code, 404)
        self.assertEqual(self.client.post(CM, {"metadata": {"name": "b"},
                                               "data": {"keep": "1"}}).code, 201)
        r = self.client.patch(f"{CM}/b", {"data": {"bad": "1"}})
        self.assertEqual(r.code, 403)
        self.assertEqual(self.client.get(f"{CM}/b").json()["data"], {"keep": "1"})
        self.assertEqual(self.client.delete(f"{CM}/b").code, 403)
        self.assertEqual(self.client.get(f"{CM}/b").code, 200)

    def test_dry_run_is_seen(self):
        labeller = Labeller()
        self.use(labeller)
        r = self.client.post(f"{CM}?dryRun=All", {"metadata": {"name": "a"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(labeller.seen, [("CREATE", "a", True, "jane", None)])
        self.assertEqual(self.client.get(f"{CM}/a").code, 404)

    def test_plugin_answering_later(self):
        """A plugin (a webhook) that answers later holds the write until it does."""
        labeller = Labeller(later=True)
        self.use(labeller)
        pending = self.client.start("POST", CM, {"metadata": {"name": "a"}})
        self.assertEqual((len(labeller.pending), pending.answered), (1, []))
        self.assertEqual(self.client.get(f"{CM}/a").code, 404)
        labeller.pending[0].callback(None)
        self.stub.flush()
        r = pending.result()
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["metadata"]["labels"], {"admitted": "yes"})


class NamespaceLifecycleTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.client = self.stub.client()

    def test_missing_namespace(self):
        r = self.client.post("/api/v1/namespaces/nope/configmaps", {"metadata": {"name": "a"}})
        self.assertEqual((r.code, r.json()["message"]), (404, 'namespaces "nope" not found'))

    def test_immortal_namespaces(self):
        for name in ("default", "platform-system", "platform-public"):
            r = self.client.delete(f"/api/v1/namespaces/{name}")
            self.assertEqual(r.code, 403, r.body)
            self.assertEqual(r.json()["message"],
                             f'namespaces "{name}" is forbidden: this namespace may not be deleted')
            self.assertEqual(r.json()["details"], {"name": name, "kind": "namespaces"})
        self.assertEqual(self.client.delete("/api/v1/namespaces/platform-node-lease").code, 200)

    def test_terminating_namespace(self):
        """Upstream's admission.NewForbidden: the object's (generate)name, the resource."""
        self.assertEqual(self.client.post("/api/v1/namespaces",
                                          {"metadata": {"name": "t"}}).code, 201)
        self.assertEqual(self.client.post("/api/v1/namespaces/t/configmaps", {
            "metadata": {"name": "held", "finalizers": ["x/y"]}}).code, 201)
        self.assertEqual(self.client.delete("/api/v1/namespaces/t").code, 200)
        r = self.client.post("/api/v1/namespaces/t/configmaps",
                             {"metadata": {"generateName": "cm-"}})
        self.assertEqual(r.code, 403, r.body)
        self.assertEqual(r.json()["message"],
                         'configmaps "cm-" is forbidden: unable to create new content in '
                         'namespace t because it is being terminated')
        self.assertEqual(r.json()["details"], {
            "name": "cm-", "kind": "configmaps",
            "causes": [{"reason": "NamespaceTerminating",
                        "message": "namespace t is being terminated",
                        "field": "metadata.namespace"}]})
