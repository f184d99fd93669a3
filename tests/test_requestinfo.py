"""Reading paths into request info (spec 2.1.5, 2.1.6, 2.1.10)."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.requestinfo import parse

RBAC = "/apis/rbac.authorization.platform.io/v1"


class RequestInfoTests(SynchronousTestCase):
    def check(self, method, path, watch=False, **expected):
        info = parse(method, path, watch)
        for key, value in expected.items():
            self.assertEqual(getattr(info, key), value, f"{key} of {method} {path}")

    def test_path_shapes(self):
        """Every path shape of spec 2.1.5 and 2.1.6 reads as the right tuple."""
        self.check(b"GET", f"{RBAC}/clusterrolebindings", verb="list",
                   resource="clusterrolebindings", namespace="", name="")
        self.check(b"GET", f"{RBAC}/clusterrolebindings/x", verb="get", name="x")
        self.check(b"GET", f"{RBAC}/rolebindings", verb="list", resource="rolebindings",
                   namespace="")
        self.check(b"GET", f"{RBAC}/namespaces/ns/rolebindings", verb="list", namespace="ns",
                   resource="rolebindings")
        self.check(b"GET", f"{RBAC}/namespaces/ns/rolebindings/b", verb="get", namespace="ns",
                   name="b", group="rbac.authorization.platform.io", version="v1")
        self.check(b"PUT", "/api/v1/namespaces/ns/pods/p/status", verb="update",
                   subresource="status", group="", name="p", namespace="ns")
        self.check(b"GET", "/api/v1/namespaces/ns", resource="namespaces", name="ns",
                   verb="get")
        self.check(b"PUT", "/api/v1/namespaces/ns/status", resource="namespaces", name="ns",
                   subresource="status")
        self.check(b"GET", "/api/v1/namespaces", resource="namespaces", verb="list")

    def test_verbs(self):
        """Verbs are classified as spec 2.1.10 says."""
        self.check(b"GET", "/api/v1/pods", watch=True, verb="watch")
        self.check(b"GET", "/api/v1/namespaces/a/pods/p", watch=True, verb="watch")
        self.check(b"POST", "/api/v1/namespaces/a/pods", verb="create")
        self.check(b"PATCH", "/api/v1/namespaces/a/pods/p", verb="patch")
        self.check(b"DELETE", "/api/v1/namespaces/a/pods/p", verb="delete")
        self.check(b"DELETE", "/api/v1/namespaces/a/pods", verb="deletecollection")

    def test_non_resource(self):
        """Discovery and other paths are non-resource requests."""
        for path in ("/api", "/apis", "/api/v1", f"{RBAC}", "/apis/rbac.authorization.platform.io",
                     "/version", "/openapi/v3"):
            self.check(b"GET", path, is_resource=False, verb="get")
