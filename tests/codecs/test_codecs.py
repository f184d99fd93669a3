"""JSON and YAML codecs and content negotiation."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs.cborcodec import CBORCodec
from platformd.codecs.interface import CodecError
from platformd.codecs.jsoncodec import JSONCodec
from platformd.codecs.negotiation import Negotiator, parse_accept
from platformd.codecs.protobufcodec import ProtobufCodec
from platformd.codecs.yamlcodec import YAMLCodec
from platformd.errors import StatusError
from tests.codecs.test_protobuf import OBJECTS, _list_of


class CodecTests(SynchronousTestCase):
    def test_yaml_equals_json(self):
        """A YAML body decodes to what the same JSON body decodes to (timestamps as strings)."""
        y = YAMLCodec().decode(b"a: 1\nt: 2020-01-01T00:00:00Z\nl: [x, z, y]\n")
        # go-yaml v2 reads a bare y as the boolean true.
        j = JSONCodec().decode(b'{"a": 1, "t": "2020-01-01T00:00:00Z", "l": ["x", "z", true]}')
        self.assertEqual(y, j)

    def test_yaml_written_as_upstream(self):
        """
        Keys in go-yaml's order (non-letters first, digit runs by value), strings that would read back as
        another type double-quoted, multi-line strings as literal blocks, the rest plain
        (or single-quoted where plain YAML cannot hold them, as libyaml does).  A key
        is a string like any other: "n" would read back as go-yaml v2's false.
        """
        value = {"kind": "ConfigMap", "apiVersion": "v1",
                 "metadata": {"name": "x", "resourceVersion": "5",
                              "creationTimestamp": "2026-11-23T13:30:28Z",
                              "labels": {"a10": "", "a2": "yes", "B": "on", "_": "a: b"}},
                 "data": {"script": "line1\nline2\n", "n": "12", "s": "plain text"}}
        self.assertEqual(YAMLCodec().encode(value).decode(), """\
apiVersion: v1
data:
  "n": "12"
  s: plain text
  script: |
    line1
    line2
kind: ConfigMap
metadata:
  creationTimestamp: "2026-11-23T13:30:28Z"
  labels:
    _: 'a: b'
    B: "on"
    a2: "yes"
    a10: ""
  name: x
  resourceVersion: "5"
""")
        self.assertEqual(YAMLCodec().decode(YAMLCodec().encode(value)), value)

    def test_yaml_duplicates(self):
        """
        Repeated YAML keys are go-yaml v2's strict error, in the order it decodes them
        (a value's own before its key's), on the line of the repeated value, the key as
        %#v prints it; the last value wins and keys come sorted, as sigs.k8s.io/yaml's
        JSON has them.
        """
        value, problems = YAMLCodec().decode_strict(
            b"b: 1\na: 2\nm:\n  x: 1\n  x: 2\nb:\n  3\n1: x\n1: z\n")
        self.assertEqual(list(value.items()), [("1", "z"), ("a", 2), ("b", 3), ("m", {"x": 2})])
        self.assertEqual(problems, ['yaml: unmarshal errors:\n'
                                    '  line 5: key "x" already set in map\n'
                                    '  line 7: key "b" already set in map\n'
                                    '  line 9: key 1 already set in map'])
        self.assertEqual(YAMLCodec().decode_strict(b"a: 1\n"), ({"a": 1}, []))

    def test_malformed(self):
        """Malformed bodies raise CodecError with a location."""
        for codec, data in ((JSONCodec(), b'{"a":'), (YAMLCodec(), b"a: [")):
            self.assertRaises(CodecError, codec.decode, data)
        self.assertRaises(CodecError, JSONCodec().decode, b'{} {}')

    def test_pretty(self):
        """pretty JSON is indented."""
        self.assertEqual(JSONCodec().encode({"a": 1}, pretty=True), b'{\n  "a": 1\n}\n')


class NegotiationTests(SynchronousTestCase):
    def setUp(self):
        self.n = Negotiator()

    def test_q_values(self):
        """
        Higher q wins; order breaks ties; q=0 (or a q that does not parse) is kept, last,
        as goautoneg's ParseAccept keeps it and upstream's NegotiateMediaTypeOptions
        (``handlers/negotiation/negotiate.go``) never reads q.
        """
        self.assertEqual(self.n.pick("application/json;q=0.5, application/yaml")
                         .codec.media_type, "application/yaml")
        self.assertEqual([m.full for m in parse_accept("a/b;q=0.1, c/d, e/f;q=0")],
                         ["c/d", "a/b", "e/f"])
        for accept in ("*/*;q=0", "application/json;q=0", "application/yaml;q=x, text/html"):
            self.assertIn(self.n.pick(accept).codec.media_type,
                          ("application/json", "application/yaml"), accept)
        self.assertEqual(self.n.pick("application/yaml;q=0, application/json;q=0")
                         .codec.media_type, "application/yaml")

    def test_fallback_past_unserved_views(self):
        """Views this server does not serve are skipped in favour of a later plain type."""
        accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                  "application/json")
        self.assertEqual(self.n.pick(accept).codec.media_type, "application/json")

    def test_aggregated_discovery_view(self):
        """The platform group's v2 APIGroupDiscoveryList is a view, taken only where it
        is offered (``/api``, ``/apis``); upstream's group and v2beta1 are skipped."""
        accept = "application/json;g=apidiscovery.platform.io;v=v2;as=APIGroupDiscoveryList"
        choice = self.n.pick(accept + ",application/yaml", {"APIGroupDiscoveryList"})
        self.assertEqual((choice.view, choice.group, choice.version),
                         ("APIGroupDiscoveryList", "apidiscovery.platform.io", "v2"))
        self.assertEqual(self.n.pick(accept + ",application/yaml").view, None)
        for other in (accept.replace("platform.io", "k8s.io"), accept.replace("v2", "v2beta1"),
                      accept.replace("v=v2", "v=v1")):
            self.assertEqual(self.n.pick(other + ",application/yaml",
                                         {"APIGroupDiscoveryList"}).codec.media_type,
                             "application/yaml", other)

    def test_wildcards(self):
        """*/*, a lone * and application/* give JSON."""
        for accept in ("*/*", "application/*", "text/html, */*;q=0.1", "*"):
            self.assertEqual(self.n.pick(accept).codec.media_type, "application/json")

    def test_parameters_read_as_upstream(self):
        """
        Unknown parameters (charset, includeObject, profile) are ignored; stream must be
        watch; g/v without as, or a Table outside JSON and YAML, skip the range.
        """
        table = "as=Table;g=meta.platform.io;v=v1"
        n = Negotiator([JSONCodec(), YAMLCodec(), CBORCodec()])
        cases = [
            ("application/yaml;charset=utf-8", ("application/yaml", None)),
            (f"application/json;{table};includeObject=Object", ("application/json", "Table")),
            ("application/json;stream=watch", ("application/json", None)),
            ("application/yaml;stream=other, application/json", ("application/json", None)),
            ("application/yaml;g=meta.platform.io;v=v1, application/json",
             ("application/json", None)),
            (f"application/cbor;{table}, application/yaml;{table}", ("application/yaml", "Table")),
            (f"application/cbor;{table}, application/cbor", ("application/cbor", None)),
            ("*/json, application/yaml", ("application/yaml", None)),
        ]
        for accept, expected in cases:
            choice = n.pick(accept, frozenset({"Table"}))
            self.assertEqual((choice.codec.media_type, choice.view), expected, accept)

    def test_concrete_before_wildcard(self):
        """
        goautoneg's ``acceptSorter.Less`` puts a concrete type before a wildcard even
        at a lower q, and Go's insertion sort (``sort.Sort`` of up to 12 entries) applies
        it pairwise: ``*/*;q=1, application/yaml;q=0.5`` is YAML upstream.
        """
        self.assertEqual(self.n.pick("*/*, application/yaml").codec.media_type,
                         "application/yaml")
        self.assertEqual(self.n.pick("*/*;q=1, application/yaml;q=0.5").codec.media_type,
                         "application/yaml")
        # Insertion sort by hand: b/c passes a/* (concrete subtype), then */* passes
        # a/* and b/c (higher q).
        self.assertEqual([m.full for m in parse_accept("a/*;q=0.9, b/c;q=0.5, */*")],
                         ["*/*", "b/c", "a/*"])

    def test_not_acceptable(self):
        """Nothing acceptable is a 406."""
        with self.assertRaises(StatusError) as e:
            self.n.pick("text/html")
        self.assertEqual((e.exception.code, e.exception.reason), (406, "NotAcceptable"))

    def test_unsupported_media_type(self):
        """An unknown Content-Type is a 415."""
        with self.assertRaises(StatusError) as e:
            self.n.for_request("text/plain")
        self.assertEqual((e.exception.code, e.exception.reason), (415, "UnsupportedMediaType"))


class EveryEncodingRoundTripTests(SynchronousTestCase):
    def test_every_kind_in_every_encoding(self):
        """Each built-in kind and its List decode back to the same value in all four."""
        codecs = (JSONCodec(), YAMLCodec(), CBORCodec(), ProtobufCodec())
        for obj in OBJECTS:
            for value in (obj, _list_of(obj)):
                for codec in codecs:
                    self.assertEqual(codec.decode(codec.encode(value)), value,
                                     (codec.media_type, value["kind"]))


class YAMLKeyTests(SynchronousTestCase):
    """YAML keys and scalars as upstream reads YAML: go-yaml v2, then yamlToJSON."""

    def test_boolean_keys_become_strings(self):
        """A bare yes/on/y key is the boolean true, written as the key "true" (off, n:
        "false"); integer and float keys as Go formats them."""
        value = YAMLCodec().decode(b"yes: 1\noff: 2\nY: 3\nn: 4\n7: 5\n1.5: 6\n2.0e+10: 7\n")
        self.assertEqual(value, {"true": 3, "false": 4, "7": 5, "1.5": 6, "2e+10": 7})

    def test_go_yaml_booleans(self):
        """y and n are booleans as values too (go-yaml v2), and written quoted."""
        codec = YAMLCodec()
        self.assertEqual(codec.decode(b"a: y\nb: N\nc: 'y'\n"), {"a": True, "b": False, "c": "y"})
        self.assertEqual(codec.encode({"a": "y", "b": "n"}), b'a: "y"\nb: "n"\n')

    def test_null_key_refused(self):
        """A null key has no JSON form: 400 from the handler (yamlToJSON refuses it)."""
        with self.assertRaises(CodecError) as e:
            YAMLCodec().decode(b"~: 1\n")
        self.assertIn("unsupported map key of type: <nil>", str(e.exception))
