"""
``application/cbor`` (spec 4.2.6; gate ``CBORServingAndStorage``), with ``cbor2``.

Responses are one data item prefixed with the self-described CBOR tag (55799,
``d9 d9 f7``), as upstream's serializer writes them; requests may carry it or not.
Watches are CBOR sequences (``application/cbor-seq``): one tagged data item per event.
Repeated map keys are not reported (cbor2 has no hook for them); the last one wins.
"""

import cbor2
from zope.interface import implementer

from platformd.codecs.interface import CodecError, ICodec

SELF_DESCRIBED = b"\xd9\xd9\xf7"
CBOR = "application/cbor"
CBOR_SEQ = "application/cbor-seq"


def _thaw(value):
    """cbor2 returns immutable maps under the self-described tag: make plain values."""
    if isinstance(value, dict):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    return value


def encode(value) -> bytes:
    return SELF_DESCRIBED + cbor2.dumps(value)


@implementer(ICodec)
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


def _keys(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _keys(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _keys(item)
