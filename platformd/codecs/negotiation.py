"""
Content negotiation: which codec reads a request body and which writes the response.

``Accept`` is parsed as RFC 9110 media ranges with q-values.  Ranges carrying
parameters this server does not serve (``as=Table``, aggregated discovery's
``as=APIGroupDiscoveryList`` ...) are skipped, so a client that lists a plain type after
them falls back to it, exactly as upstream clients expect.  Later issues register codecs
for Protobuf, CBOR and the Table/metadata views here.
"""

from __future__ import annotations

from typing import Optional

import attrs

from platformd import errors
from platformd.codecs.interface import ICodec
from platformd.codecs.jsoncodec import JSONCodec
from platformd.codecs.yamlcodec import YAMLCodec


@attrs.frozen
class MediaRange:
    type: str
    subtype: str
    params: dict
    q: float

    @property
    def full(self) -> str:
        return f"{self.type}/{self.subtype}"


def parse_accept(header: str) -> list:
    """Media ranges of an Accept header, best first (stable for equal q)."""
    ranges = []
    for index, item in enumerate(header.split(",")):
        item = item.strip()
        if not item:
            continue
        mime, *raw_params = item.split(";")
        mime = mime.strip().lower()
        if "/" not in mime:
            continue
        main, _, sub = mime.partition("/")
        params, q = {}, 1.0
        for raw in raw_params:
            key, _, value = raw.partition("=")
            key, value = key.strip().lower(), value.strip().strip('"')
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            elif key:
                params[key] = value
        if q > 0:
            ranges.append((-q, index, MediaRange(main, sub, params, q)))
    ranges.sort(key=lambda r: (r[0], r[1]))
    return [r[2] for r in ranges]


#: Parameters that only select an encoding's options, not a different representation.
_HARMLESS_PARAMS = frozenset({"charset", "pretty", "stream"})


class Negotiator:
    """Chooses codecs for requests; holds one instance of each codec."""

    def __init__(self, codecs=None):
        codecs = codecs or [JSONCodec(), YAMLCodec()]
        for codec in codecs:
            ICodec.providedBy(codec) or _not_a_codec(codec)
        self.codecs = {c.media_type: c for c in codecs}
        self.default = codecs[0]
        self.media_types = list(self.codecs)
        self._cache: dict = {}

    def for_response(self, accept: Optional[str]):
        """The codec for the response; 406 when nothing acceptable is served."""
        if not accept:
            return self.default
        codec = self._cache.get(accept)
        if codec is None:
            codec = self._choose(accept)
            if len(self._cache) < 256:
                self._cache[accept] = codec
        return codec

    def _choose(self, accept):
        if isinstance(accept, bytes):
            accept = accept.decode("latin-1")
        for media in parse_accept(accept):
            if set(media.params) - _HARMLESS_PARAMS:
                continue
            if media.type == "*" or (media.subtype == "*" and media.type == "application"):
                return self.default
            codec = self.codecs.get(media.full)
            if codec is not None:
                return codec
        raise errors.not_acceptable(self.media_types)

    def for_request(self, content_type: Optional[str]):
        """The codec for a request body; 415 for an unknown Content-Type."""
        if not content_type:
            return self.default
        if isinstance(content_type, bytes):
            content_type = content_type.decode("latin-1")
        mime = content_type.split(";", 1)[0].strip().lower()
        codec = self.codecs.get(mime)
        if codec is None:
            raise errors.unsupported_media_type(self.media_types)
        return codec


def _not_a_codec(codec):
    raise TypeError(f"{codec!r} does not provide ICodec")
