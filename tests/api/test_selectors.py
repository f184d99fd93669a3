"""Label and field selectors."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.api.selectors import parse_field_selector, parse_label_selector
from platformd.errors import StatusError
from platformd.registry import core, rbac


def obj(labels=None, name="n", namespace="ns"):
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}}}


class LabelSelectorTests(SynchronousTestCase):
    def test_operators(self):
        """=, ==, !=, in, notin, exists and ! all select as upstream."""
        cases = [
            ("a=1", {"a": "1"}, True), ("a==1", {"a": "2"}, False),
            ("a!=1", {}, True), ("a!=1", {"a": "1"}, False),
            ("a in (1,2)", {"a": "2"}, True), ("a in (1,2)", {}, False),
            ("a notin (1,2)", {}, True), ("a notin (1,2)", {"a": "1"}, False),
            ("a", {"a": ""}, True), ("a", {}, False),
            ("!a", {}, True), ("!a", {"a": "x"}, False),
            ("a=1,b", {"a": "1", "b": "x"}, True), ("a=1,b", {"a": "1"}, False),
        ]
        for text, labels, expected in cases:
            self.assertEqual(parse_label_selector(text).matches(obj(labels)), expected, text)

    def test_malformed(self):
        """A malformed selector is a 400 BadRequest."""
        for text in ("a b", "a in 1", "=x", "a=1,,(", "a$=1"):
            with self.assertRaises(StatusError) as e:
                parse_label_selector(text)
            self.assertEqual((e.exception.code, e.exception.reason), (400, "BadRequest"), text)


class FieldSelectorTests(SynchronousTestCase):
    def test_name_and_namespace(self):
        """metadata.name and metadata.namespace select with =, == and !=."""
        s = parse_field_selector("metadata.name=n,metadata.namespace!=other", core.POD)
        self.assertTrue(s.matches(obj()))
        self.assertFalse(s.matches(obj(name="m")))
        self.assertEqual(s.value_of("metadata.name"), "n")

    def test_unsupported_field(self):
        """A field the kind does not index is a 400 in upstream's words: apimachinery's
        DefaultMetaV1FieldSelectorConversion for kinds without a conversion func of
        their own, core/v1 conversion.go's for Pod, Secret and Namespace (which knows no
        metadata.namespace)."""
        for field, kind, message in (
                ("roleRef.name", rbac.ROLE_BINDING,
                 '"roleRef.name" is not a known field selector: only "metadata.name", '
                 '"metadata.namespace"'),
                ("data.x", core.CONFIG_MAP, '"data.x" is not a known field selector: only '
                                            '"metadata.name", "metadata.namespace"'),
                ("spec.x", core.POD, "field label not supported: spec.x"),
                ("metadata.namespace", core.NAMESPACE,
                 "field label not supported: metadata.namespace")):
            with self.assertRaises(StatusError) as e:
                parse_field_selector(f"{field}=x", kind)
            self.assertEqual((e.exception.code, e.exception.reason, e.exception.message),
                             (400, "BadRequest", message))

    def test_pod_fields(self):
        """Pods also select on spec.nodeName and status.phase."""
        s = parse_field_selector("spec.nodeName=node1", core.POD)
        self.assertTrue(s.matches({"metadata": {}, "spec": {"nodeName": "node1"}}))
