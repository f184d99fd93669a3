"""CBOR lists assembled from each item's own data item (``CBORCodec.list_pieces``)."""

import cbor2
from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs.cborcodec import SELF_DESCRIBED, CBORCodec, _array_head, encode, watch_event
from platformd.codecs.interface import CodecError


def configmap(i: int) -> dict:
    return {"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": f"cm-{i:04d}", "namespace": "default",
                         "resourceVersion": str(100 + i), "labels": {"n": str(i)}},
            "data": {"k": "v" * (i % 7), "big": str(2 ** 70)}}


class ListPiecesTests(SynchronousTestCase):
    def setUp(self):
        self.codec = CBORCodec()

    def assemble(self, meta: dict, objects: list):
        """(assembled bytes, cbor2's encoding of the same list as one value)."""
        items = [self.codec.item_bytes(o) for o in objects]
        pieces = list(self.codec.list_pieces("v1", "ConfigMapList", meta, items))
        self.assertEqual(len(pieces), 1 + len(objects))
        whole = {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta,
                 "items": objects}
        return b"".join(pieces), self.codec.encode(whole)

    def test_item_is_untagged_data_item(self):
        """An item's bytes are cbor2's, without the self-described tag."""
        obj = configmap(1)
        self.assertEqual(self.codec.item_bytes(obj), cbor2.dumps(obj))
        self.assertEqual(self.codec.encode(obj), SELF_DESCRIBED + self.codec.item_bytes(obj))

    def test_equal_to_whole_list(self):
        """Empty, one, many items (array heads of 1, 2 and 3 bytes): the same bytes and
        value as encoding the whole list, keys in the order kind, apiVersion, metadata, items."""
        meta = {"resourceVersion": "42", "continue": ""}
        for count in (0, 1, 2, 23, 24, 255, 256, 300):
            objects = [configmap(i) for i in range(count)]
            assembled, whole = self.assemble(meta, objects)
            self.assertEqual(assembled, whole, count)
            self.assertTrue(assembled.startswith(SELF_DESCRIBED))
            value = cbor2.loads(assembled)
            self.assertEqual(value, cbor2.loads(whole))
            self.assertEqual(list(value), ["kind", "apiVersion", "metadata", "items"])
            self.assertEqual([i["metadata"]["name"] for i in value["items"]],
                             [o["metadata"]["name"] for o in objects])

    def test_paged_meta(self):
        """ListMeta with a continue token, a remaining count and shard info."""
        meta = {"resourceVersion": "7", "continue": "abc", "remainingItemCount": 12,
                "shardInfo": {"selector": "shardRange(object.metadata.uid, '0x0', '0x8')"}}
        assembled, whole = self.assemble(meta, [configmap(1), configmap(2)])
        self.assertEqual(assembled, whole)
        self.assertEqual(cbor2.loads(assembled)["metadata"], meta)

    def test_array_head(self):
        """The array head is the one cbor2 writes, for every width."""
        for count in (0, 1, 23, 24, 255, 256, 65535, 65536):
            self.assertEqual(_array_head(count), cbor2.dumps([0] * count)[:-count or None],
                             count)
        self.assertEqual(_array_head(2 ** 32), b"\x9b" + (2 ** 32).to_bytes(8, "big"))


class DecodeTests(SynchronousTestCase):
    def test_tagged_body_is_plain(self):
        """A body with the self-described tag (cbor2 gives frozen maps and tuples under it)
        decodes to plain dicts and lists, as an untagged one does."""
        obj = configmap(3)
        obj["list"] = [{"a": 1}, [2]]
        for data in (cbor2.dumps(obj), CBORCodec().encode(obj)):
            value = CBORCodec().decode(data)
            self.assertEqual(value, obj)
            self.assertIs(type(value), dict)
            self.assertIs(type(value["list"]), list)
            self.assertIs(type(value["list"][0]), dict)

    def test_tagged_non_text_key_refused(self):
        """A map key that is not a text string is refused, tagged or not."""
        for data in (cbor2.dumps({"a": {1: "x"}}), SELF_DESCRIBED + cbor2.dumps({"a": {1: "x"}})):
            self.assertRaises(CodecError, CBORCodec().decode, data)


class WatchEventTests(SynchronousTestCase):
    def test_event_around_cached_item(self):
        """An event built around an object's item equals the event encoded whole."""
        codec = CBORCodec()
        obj = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"},
               "data": {"k": "v"}}
        for type_ in ("ADDED", "MODIFIED", "DELETED"):
            self.assertEqual(watch_event(type_, codec.item_bytes(obj)),
                             encode({"type": type_, "object": obj}))
