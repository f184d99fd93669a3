"""
Hostile bodies: nesting, alias and shared-value bombs, numbers JSON cannot carry. Each
is refused with CodecError (a 400) quickly, in every encoding, and none crashes.
"""

import datetime
import time
import uuid

import cbor2
from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs.cborcodec import CBORCodec
from platformd.codecs.interface import CodecError
from platformd.codecs.jsoncodec import JSONCodec
from platformd.codecs.limits import MAX_DEPTH
from platformd.codecs.protobufcodec import ProtobufCodec, envelope
from platformd.codecs.yamlcodec import YAMLCodec
from platformd.goformat.gonumbers import BigNumber
from platformd.protos.platform.apimachinery.pkg.apis.meta.v1 import generated_pb2 as meta

#: A YAML "billion laughs": 9**9 strings from a few hundred bytes.
YAML_BOMB = ('a: &a [' + ",".join(['"lol"'] * 9) + "]\n" + "".join(
    f"{name}: &{name} [{','.join(['*' + previous] * 9)}]\n"
    for previous, name in zip("abcdefgh", "bcdefghi"))).encode()


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


class LimitTests(SynchronousTestCase):
    def refused(self, codec, data, message=""):
        started = time.monotonic()
        with self.assertRaises(CodecError) as e:
            codec.decode(data)
        self.assertLess(time.monotonic() - started, 1.0)
        self.assertIn(message, str(e.exception))

    def test_depth(self):
        """MAX_DEPTH levels decode in JSON and YAML; one more, or 100,000, do not."""
        for codec in (JSONCodec(), YAMLCodec()):
            self.assertEqual(len(codec.decode(nested(MAX_DEPTH))), 1)
            self.refused(codec, nested(MAX_DEPTH + 1), "nested deeper")
            self.refused(codec, b"[" * 100_000, "")  # libyaml's composer once crashed here
        self.refused(CBORCodec(), b"\x81" * (MAX_DEPTH + 1) + b"\x01", "nested deeper")

    def test_numbers_json_cannot_carry(self):
        """NaN and infinities are refused in every text encoding; a JSON number past
        int64 or float64 is kept as written (a BigNumber, for the schema to judge)."""
        for data in (b'{"a": NaN}', b'{"a": -Infinity}'):
            self.refused(JSONCodec(), data)
        self.assertEqual(JSONCodec().decode(b'{"a": 9223372036854775807}')["a"], 2 ** 63 - 1)
        self.assertEqual(JSONCodec().decode(b'{"a": -9223372036854775808}')["a"], -2 ** 63)
        for text in ("9223372036854775808", "-9223372036854775809", "1e400", "-1e400"):
            self.assertEqual(JSONCodec().decode(b'{"a": %s}' % text.encode())["a"],
                             BigNumber(text))
        for data in (b"a: .inf", b"a: .nan"):
            self.refused(YAMLCodec(), data)

    def test_numbers_of_any_length(self):
        """Integers of 5,000 digits (past Python's int-string limit) decode in well under
        a second: JSON and YAML keep them (YAML, as go-yaml v2: text, a string, once no
        float holds it), CBOR refuses them in fxamacker/cbor's words."""
        digits = "1" * 5000
        for data, expected in (
                (b'{"a": %s, "b": [-%s]}' % ((digits.encode(),) * 2),
                 {"a": BigNumber(digits), "b": [BigNumber("-" + digits)]}),
                (b"a: %s\nb: [-%s]\n" % ((digits.encode(),) * 2),
                 {"a": digits, "b": ["-" + digits]}),
                (b"a: 18446744073709551615\nb: 18446744073709551616\nc: 1.5e400\n",
                 {"a": BigNumber("18446744073709551615"), "b": 1.8446744073709552e19,
                  "c": "1.5e400"})):
            started = time.monotonic()
            codec = YAMLCodec() if data.startswith(b"a:") else JSONCodec()
            self.assertEqual(codec.decode(data), expected)
            self.assertLess(time.monotonic() - started, 1.0)
        self.refused(CBORCodec(), cbor2.dumps({"a": 2 ** 63}),
                     "cbor: cannot unmarshal positive integer into Go value of type int64 "
                     "(9223372036854775808 overflows Go's int64)")
        self.refused(CBORCodec(), cbor2.dumps({"a": -2 ** 64}),
                     "cbor: cannot unmarshal negative integer into Go value of type int64 "
                     "(-18446744073709551616 overflows Go's int64)")
        for data in (cbor2.dumps({"a": 10 ** 5000}), cbor2.dumps({10 ** 5000: 1})):
            self.refused(CBORCodec(), data)
        self.refused(CBORCodec(), cbor2.dumps({"a": -10 ** 5000}),
                     "cbor: data item of cbor type tag is not accepted by protocol: bignum")
        # Written back: YAML's key order compares digit runs as go-yaml does (int64
        # arithmetic, wrapping), at any length.
        keys = {"k" + "9" * 5000: 1, "k" + "1" * 5000: 2, "k10": 3, "k9": 4}
        started = time.monotonic()
        self.assertEqual(YAMLCodec().decode(YAMLCodec().encode(keys)), keys)
        self.assertLess(time.monotonic() - started, 1.0)

    def test_yaml_values_without_json_form(self):
        """YAML's binary, set and ordered-map types have no JSON form: refused."""
        for data in (b"a: !!binary aGVsbG8=", b"a: !!set {x, y}", b"a: !!omap [b: 1]"):
            self.refused(YAMLCodec(), data, "no JSON form")
        self.assertEqual(YAMLCodec().decode(b"a: 2001-12-14"), {"a": "2001-12-14"})
        for value in (float("nan"), float("inf"), 2 ** 64):
            self.refused(CBORCodec(), cbor2.dumps({"a": value}))

    def test_yaml_aliases(self):
        """A billion laughs and a self-containing anchor are refused; plain reuse is not."""
        self.refused(YAMLCodec(), YAML_BOMB, "excessive aliasing")
        self.refused(YAMLCodec(), b"a: &x [1, *x]", "")
        value = YAMLCodec().decode(b"x: &l {k: v}\ny: *l\nz: [*l, *l]\n")
        self.assertEqual(value["z"], [{"k": "v"}, {"k": "v"}])

    def test_cbor_shared_values_and_types(self):
        """Shared values (tags 28/29) are refused; other values map to JSON's or are refused."""
        laughs = ["lol"] * 9
        for _ in range(7):
            laughs = [laughs] * 9
        self.refused(CBORCodec(), cbor2.dumps({"a": laughs}, value_sharing=True), "shared")
        when = datetime.datetime(2020, 1, 2, 3, 4, 5, 670000, tzinfo=datetime.timezone.utc)
        self.assertEqual(CBORCodec().decode(cbor2.dumps({"t": when, "b": b"text", "e": [[], []]})),
                         {"t": "2020-01-02T03:04:05.67Z", "b": "text", "e": [[], []]})
        for value in ({1, 2}, uuid.uuid4(), b"\xff"):
            self.refused(CBORCodec(), cbor2.dumps({"a": value}))
        self.refused(CBORCodec(), bytes.fromhex("a2616101616102"), "Duplicate map key")

    def test_protobuf_fields_v1(self):
        """managedFields' FieldsV1 carries raw JSON: not JSON, or too deep, is refused."""
        codec = ProtobufCodec()
        for raw in (b"{not json", nested(MAX_DEPTH + 5)):
            entry = meta.ManagedFieldsEntry(manager="m", fieldsType="FieldsV1",
                                            fieldsV1=meta.FieldsV1(Raw=raw))
            partial = meta.PartialObjectMetadata(metadata=meta.ObjectMeta(
                name="x", managedFields=[entry]))
            self.refused(codec, envelope("meta.platform.io/v1", "PartialObjectMetadata",
                                         partial.SerializeToString()))
