"""
``application/cbor`` (spec 4.2.6; gate ``CBORServingAndStorage``), with ``cbor2``.

Responses are one data item prefixed with the self-described CBOR tag (55799,
``d9 d9 f7``), as upstream's serializer writes them; requests may carry it or not.
Watches are CBOR sequences (``application/cbor-seq``): one tagged data item per event.
Repeated map keys are not reported (cbor2 has no hook for them); the last one wins.

Like Protobuf's, a list is assembled from each item's own bytes (``item_bytes``, the
data item without the tag, cached per object version by ``CachedObject.encoded``):
``list_pieces`` writes the list's map up to the ``items`` array's head, the item count
being known, and then the items as they are, byte for byte what ``encode`` of the
whole list writes.
"""

from collections.abc import Mapping

import cbor2
from zope.interface import implementer

from platformd.codecs.interface import CodecError, IItemCodec

SELF_DESCRIBED = b"\xd9\xd9\xf7"
CBOR = "application/cbor"
CBOR_SEQ = "application/cbor-seq"


def _thaw(value):
    """cbor2 returns immutable maps under the self-described tag (its ``frozendict``, not
    a ``dict``) and arrays as tuples: make plain values."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    return value


def encode(value) -> bytes:
    return SELF_DESCRIBED + cbor2.dumps(value)


@implementer(IItemCodec)
class CBORCodec:
    media_type = CBOR

    def decode(self, data: bytes):
        try:
            value = cbor2.loads(data)
        except (cbor2.CBORDecodeError, ValueError, TypeError, EOFError) as e:
            raise CodecError(f"invalid CBOR: {e}") from None
        if isinstance(value, cbor2.CBORTag):
            raise CodecError(f"invalid CBOR: unexpected tag {value.tag}")
        for key in _keys(value):
            if not isinstance(key, str):
                raise CodecError(f"invalid CBOR: map key {key!r} is not a text string")
        return _thaw(value)

    def encode(self, value, pretty: bool = False) -> bytes:
        return encode(value)

    def item_bytes(self, value: dict) -> bytes:
        """One object's data item without the tag: what a list item holds."""
        return cbor2.dumps(value)

    def from_item(self, api_version: str, kind: str, item: bytes) -> bytes:
        """A response of one object: its data item behind the self-described tag."""
        return SELF_DESCRIBED + item

    def list_pieces(self, api_version: str, kind: str, meta_value: dict, items: list):
        """
        The tagged list as byte pieces: its map (kind, apiVersion, metadata, items, the
        order of ``views.list_view``) up to the head of the ``items`` array, then each
        item's data item (from ``items``).  Joined, they equal ``encode`` of the list.
        """
        head = cbor2.dumps({"kind": kind, "apiVersion": api_version, "metadata": meta_value,
                            "items": []})
        # An empty array is the one byte 0x80, last in the map: swap in the real count.
        yield SELF_DESCRIBED + head[:-1] + _array_head(len(items))
        yield from items


def _array_head(count: int) -> bytes:
    """The head of a definite-length array (major type 4) of ``count`` items."""
    if count < 24:
        return bytes((0x80 + count,))
    for extra, width in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if count < 1 << (8 * width):
            return bytes((0x80 + extra,)) + count.to_bytes(width, "big")
    raise ValueError(f"array of {count} items")


def _keys(value):
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield key
            yield from _keys(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _keys(item)
