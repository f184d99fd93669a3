"""
``application/cbor`` (spec 4.2.6; gate ``CBORServingAndStorage``), with ``cbor2``.

Responses are one data item prefixed with the self-described CBOR tag (55799,
``d9 d9 f7``), as upstream's serializer writes them; requests may carry it or not.
Watches are CBOR sequences (``application/cbor-seq``): one tagged data item per event.
A map with a repeated key is refused (400), as upstream's decode mode refuses it, and
map keys must be strings (cbor2's ``strict_hashable_types``: no hash-collision games).

A decoded body is made plain in one iterative pass (``_plain``), with the choices of
upstream's decode mode where they matter: map keys must be text; a byte string becomes
text (UTF-8, else 400); a time tag becomes its RFC 3339 string; NaN, infinities and
integers past int64 are refused (``_integer``), as are values with no JSON form (sets,
UUIDs, decimals, the other semantic tags cbor2 understands) and shared values (tags
28/29: upstream does not resolve them, and a few hundred bytes of shared references
expand to gigabytes); nesting is bounded by ``limits.MAX_DEPTH``.

Like Protobuf's, a list is assembled from each item's own bytes (``item_bytes``, the
data item without the tag, cached per object version by ``CachedObject.encoded``):
``list_pieces`` writes the list's map up to the ``items`` array's head, the item count
being known, and then the items as they are, byte for byte what ``encode`` of the
whole list writes.

``cbor2`` is imported at the first CBOR body or response (under ~1 MiB of a server that
never serves CBOR, the default).
"""

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from zope.interface import implementer

from platformd.goformat import gonumbers
from platformd.codecs import limits
from platformd.codecs.interface import CodecError, IItemCodec

SELF_DESCRIBED = b"\xd9\xd9\xf7"
CBOR = "application/cbor"
CBOR_SEQ = "application/cbor-seq"


def _plain(value):
    """
    The decoded ``value`` as plain dicts, lists and JSON scalars (cbor2 gives immutable
    maps and tuples under the self-described tag), checked as the module docstring says.
    """
    holder: list = [None]
    seen: set = set()
    # (value, its container in the result, its key or index there, its depth)
    stack: list[tuple[Any, Any, Any, int]] = [(value, holder, 0, 1)]
    while stack:
        item, target, slot, depth = stack.pop()
        out: dict | list
        children: Iterable[tuple[Any, Any]]
        if isinstance(item, Mapping):
            out, children = {}, item.items()
        elif isinstance(item, (list, tuple)):
            out, children = [None] * len(item), enumerate(item)
        else:
            target[slot] = _scalar(item)
            continue
        if depth > limits.MAX_DEPTH:
            raise limits.too_deep()
        if item:  # an empty container may be a shared singleton, harmlessly
            if id(item) in seen:
                raise CodecError("invalid CBOR: shared values (tags 28, 29) are not supported")
            seen.add(id(item))
        target[slot] = out
        for key, child in children:
            if out.__class__ is dict and not isinstance(key, str):
                # Named by its type: a bignum key has too many digits to print.
                raise CodecError(f"invalid CBOR: a map key of type {type(key).__name__} "
                                 "is not a text string")
            stack.append((child, out, key, depth + 1))
    return holder[0]


def _scalar(item):
    if item is None or isinstance(item, (str, bool)):
        return item
    if isinstance(item, int):
        return _integer(item)
    if isinstance(item, float):
        limits.check_scalar(item)
        return item
    if isinstance(item, bytes):
        try:
            return item.decode("utf-8")
        except UnicodeDecodeError:
            raise CodecError("invalid CBOR: a byte string is not UTF-8 text") from None
    if isinstance(item, datetime):
        return _rfc3339(item)
    raise CodecError(f"invalid CBOR: a value of type {type(item).__name__} has no JSON form")


def _integer(value: int) -> int:
    """
    An integer as upstream's decode mode takes one: within int64, else refused in
    fxamacker/cbor's words.  Beyond 64 bits only a bignum (tag 2 or 3) can carry it, and
    upstream forbids those (``BignumTagForbidden``); within them, a head past int64 is
    ``IntDecConvertSignedOrFail``'s overflow.  (cbor2 has already turned a bignum into an
    int: a small one is taken, where upstream refuses every bignum tag.)
    """
    if value in gonumbers.INT64:
        return value
    if -(1 << 64) <= value < 1 << 64:
        sign = "positive" if value > 0 else "negative"
        raise CodecError(f"cbor: cannot unmarshal {sign} integer into Go value of type int64 "
                         f"({value} overflows Go's int64)")
    raise CodecError("cbor: data item of cbor type tag is not accepted by protocol: bignum")


def _rfc3339(moment: datetime) -> str:
    """Go's ``RFC3339Nano`` of the instant, in UTC (fraction without trailing zeros)."""
    moment = moment.astimezone(timezone.utc) if moment.tzinfo else moment
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def encode(value) -> bytes:
    import cbor2
    return SELF_DESCRIBED + cbor2.dumps(value)


#: A two-entry map's head and its "type" key, and the "object" key (text strings:
#: major type 3, 0x60 + length, then the UTF-8 bytes; ``cbor2.dumps("type")``).
_EVENT_HEAD = b"\xa2" + b"\x64type"
_OBJECT_KEY = b"\x66object"


def watch_event(type_: str, item: bytes) -> bytes:
    """
    One event of a CBOR watch around an object's cached data item (``item_bytes``):
    byte for byte ``encode({"type": type_, "object": object})``.
    """
    import cbor2
    return SELF_DESCRIBED + _EVENT_HEAD + cbor2.dumps(type_) + _OBJECT_KEY + item


@implementer(IItemCodec)
class CBORCodec:
    media_type = CBOR

    def decode(self, data: bytes):
        import cbor2
        try:
            value = cbor2.loads(data, allow_duplicate_keys=False, strict_hashable_types=True,
                                max_depth=limits.MAX_DEPTH + 1)
        except (cbor2.CBORDecodeError, ValueError, TypeError, EOFError, RecursionError) as e:
            raise CodecError(f"invalid CBOR: {e}") from None
        if isinstance(value, cbor2.CBORTag):
            raise CodecError(f"invalid CBOR: unexpected tag {value.tag}")
        return _plain(value)

    def encode(self, value, pretty: bool = False) -> bytes:
        return encode(value)

    def item_bytes(self, value: dict) -> bytes:
        """One object's data item without the tag: what a list item holds."""
        import cbor2
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
        import cbor2
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

