"""Label and field selectors."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.util import slices
from platformd.api import selectors
from platformd.errors import StatusError
from platformd.registry import core, rbac


def finish(work):
    """What parsing ``work`` (``slices.Work``) returns, in one go."""
    while True:
        try:
            next(work)
        except StopIteration as done:
            return done.value


def parse_label_selector(text: str):
    return finish(selectors.label_selector(text))


def parse_field_selector(text: str, kind):
    return finish(selectors.field_selector(text, kind))


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

    def test_terms_on_one_key(self):
        """
        Terms on one key are merged as the conjunction upstream's Matches computes:
        each requirement must hold.
        """
        cases = [
            ("a=1,a=2", {"a": "1"}, False), ("a=1,a==1", {"a": "1"}, True),
            ("a in (1,2),a in (2,3)", {"a": "2"}, True),
            ("a in (1,2),a in (2,3)", {"a": "1"}, False),
            ("a,a=1", {"a": "1"}, True), ("a=1,a", {"a": "2"}, False),
            ("a!=1,a notin (2)", {"a": "2"}, False), ("a!=1,a notin (2)", {"a": "3"}, True),
            ("a!=1,a notin (2)", {}, True), ("a!=1,!a", {"a": "3"}, False),
            ("!a,a!=1", {}, True), ("a,!a", {"a": "1"}, False), ("a,!a", {}, False),
            ("a=1,a!=1", {"a": "1"}, False), ("a in (1,2),a!=1", {"a": "2"}, True),
            ("a=1,b=2,c", {"a": "1", "b": "2"}, False),
            ("x!=1,y!=2", {"a": "1", "b": "2", "x": "3", "y": "2"}, False),
        ]
        for text, labels, expected in cases:
            self.assertEqual(parse_label_selector(text).matches(obj(labels)), expected, text)

    def test_long_selector_in_slices(self):
        """
        Parsing yields every slices.STEP tokens or terms, so a long selector is parsed
        a slice at a time; a short one in a single slice.
        """
        self.assertRaises(StopIteration, next, selectors.label_selector("a=1,b in (2,3)"))
        work = selectors.label_selector(",".join(f"k{i}!=v" for i in range(10_000)))
        pauses = 0
        while True:
            try:
                next(work)
            except StopIteration as done:
                selector = done.value
                break
            pauses += 1
        self.assertGreater(pauses, 10_000 * 4 // slices.STEP)
        self.assertTrue(selector.matches(obj({"k1": "w"})))
        self.assertFalse(selector.matches(obj({"k9999": "v"})))

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

    def test_terms_on_one_field(self):
        """
        Terms on one field are merged: two different = values match nothing (and pin
        no name), != values add up; the first operator in a term splits it, as
        upstream's splitTerm (so "a=b!=c" is metadata.name equal to "b!=c"), and an
        escaped comma is data.
        """
        s = parse_field_selector("metadata.name=a,metadata.name=b", core.CONFIG_MAP)
        self.assertFalse(s.matches(obj(name="a")))
        self.assertIsNone(s.value_of("metadata.name"))
        s = parse_field_selector("metadata.name!=a,metadata.name!=b", core.CONFIG_MAP)
        self.assertEqual([s.matches(obj(name=n)) for n in "abc"], [False, False, True])
        s = parse_field_selector("metadata.name=b!=c", core.CONFIG_MAP)
        self.assertEqual(s.value_of("metadata.name"), "b!=c")
        s = parse_field_selector(r"metadata.name=a\,b,metadata.namespace=ns", core.CONFIG_MAP)
        self.assertEqual(s.value_of("metadata.name"), "a,b")
        self.assertEqual(s.value_of("metadata.namespace"), "ns")

    def test_pod_fields(self):
        """Pods also select on spec.nodeName and status.phase."""
        s = parse_field_selector("spec.nodeName=node1", core.POD)
        self.assertTrue(s.matches({"metadata": {}, "spec": {"nodeName": "node1"}}))
