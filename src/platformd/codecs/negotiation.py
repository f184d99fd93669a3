"""
Content negotiation: which codec reads a request body and which writes the response.

``Accept`` is parsed as goautoneg parses it: media ranges with q-values, in its order
(``parse_accept``).  The parameters are
read as upstream's ``acceptMediaTypeOptions`` reads them: ``as``/``g``/``v`` ask for a
view, and a range asking for one this server does not serve (another group or version,
upstream's ``apidiscovery.k8s.io`` or its removed ``v2beta1``, a Table in anything but
JSON or YAML) is skipped, so a client that lists a plain type after it falls back to it;
``stream`` must be ``watch``; any other parameter (``charset``, ``includeObject``,
``profile`` ...) is ignored.  A codec that serves only some kinds (``ITypedCodec``:
Protobuf) is skipped for the others, so ``Accept: <protobuf>, application/json``
answers a kind without a message in JSON.

Media type aliases (``ALIASES``: ``application/vnd.kubernetes.protobuf``, upstream's name
for the Protobuf encoding, which unmodified kubectl and client-go send and ask for) are
other names of a served codec: a body or an ``Accept`` range may use them wherever the
codec itself may, the bytes are the same, and the answer's ``Content-Type`` says the name
the client asked for (``Choice.media_type``).  Only the canonical names are listed in the
406/415 messages and served as such in discovery and OpenAPI.
"""

from __future__ import annotations

from typing import Optional

import attrs

from platformd import errors
from platformd.codecs.interface import ICodec, ITypedCodec
from platformd.codecs.jsoncodec import JSONCodec
from platformd.codecs.protobufcodec import APIDISCOVERY, KUBERNETES_PROTOBUF, PROTOBUF
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


def _before(a: MediaRange, b: MediaRange) -> bool:
    """goautoneg's ``acceptSorter.Less``: a higher q, or a concrete type or subtype."""
    return a.q > b.q or (a.type != "*" and b.type == "*") or (
        a.subtype != "*" and b.subtype == "*")


def parse_accept(header: str) -> list:
    """
    Media ranges of an Accept header in goautoneg's order (``ParseAccept``): sorted by
    ``_before`` with Go's insertion sort (what ``sort.Sort`` does for up to 12 entries).
    ``_before`` is not a consistent order, so the result is the algorithm's:
    ``*/*;q=0.9, application/yaml;q=0.5`` puts YAML first, as upstream does.  Ranges
    with ``q=0`` (or a q that does not parse, which goautoneg reads as 0) are kept, last:
    upstream's ``NegotiateMediaTypeOptions`` never looks at q, so ``*/*;q=0`` is JSON.
    """
    ranges = []
    for item in header.split(","):
        item = item.strip()
        if not item:
            continue
        mime, *raw_params = item.split(";")
        mime = mime.strip().lower()
        if mime == "*":
            mime = "*/*"  # goautoneg reads a lone * as */*
        elif "/" not in mime:
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
        ranges.append(MediaRange(main, sub, params, q))
    for i in range(1, len(ranges)):
        j = i
        while j > 0 and _before(ranges[j], ranges[j - 1]):
            ranges[j], ranges[j - 1] = ranges[j - 1], ranges[j]
            j -= 1
    return ranges


#: The encodings a Table is served in (upstream's ``AllowsMediaTypeTransform``).
TABLE_MEDIA_TYPES = frozenset({"application/json", "application/yaml"})
#: The group and version of the views (Table, PartialObjectMetadata) this server serves.
#: ``meta.k8s.io`` is accepted too, as an alias for clients hard-wired to upstream's group
#: (kubectl asks for its tables that way); the answer then names the group asked for.
VIEW_GROUP, VIEW_VERSION = "meta.platform.io", "v1"
VIEW_GROUPS = frozenset({VIEW_GROUP, "meta.k8s.io"})
TABLE = "Table"
METADATA = "PartialObjectMetadata"
METADATA_LIST = "PartialObjectMetadataList"
VIEWS = frozenset({TABLE, METADATA, METADATA_LIST})
#: Aggregated discovery (``api/aggregateddiscovery.py``): the one view of another group
#: and version, served by ``/api`` and ``/apis`` alone.  Only the platform group is
#: taken: stock kubectl asks for ``apidiscovery.k8s.io`` and gets the plain documents.
AGGREGATED = "APIGroupDiscoveryList"
AGGREGATED_GROUP, _, AGGREGATED_VERSION = APIDISCOVERY.partition("/")
#: Other names of served encodings: alias -> the canonical media type it names.
ALIASES = {KUBERNETES_PROTOBUF: PROTOBUF}


@attrs.frozen
class Choice:
    """One acceptable response form: a codec and a view (None: the object itself)."""

    codec: object
    view: Optional[str] = None
    group: str = VIEW_GROUP
    #: The range asked for indented output (``pretty=1``, upstream's ``options.Pretty``).
    pretty: bool = False
    #: The name the answer's Content-Type gives the codec: the one the range used (an
    #: alias, ``ALIASES``), else the codec's own.
    media_type: str = attrs.field(
        default=attrs.Factory(lambda self: self.codec.media_type, takes_self=True))
    #: The view's version (``v1``, or ``v2`` for aggregated discovery).
    version: str = VIEW_VERSION


class Negotiator:
    """Chooses codecs and views for requests; holds one instance of each codec."""

    def __init__(self, codecs=None, aliases=ALIASES):
        codecs = codecs or [JSONCodec(), YAMLCodec()]
        for codec in codecs:
            ICodec.providedBy(codec) or _not_a_codec(codec)
        self.codecs = {c.media_type: c for c in codecs}
        #: Every name a body or an Accept range may use: the codecs' own, and the aliases
        #: of the codecs served (upstream's Protobuf name where Protobuf is served).
        self.names = {**self.codecs, **{alias: self.codecs[canonical]
                                        for alias, canonical in aliases.items()
                                        if canonical in self.codecs}}
        self.default = codecs[0]
        #: The canonical names, listed by the 406 and 415 messages.
        self.media_types = list(self.codecs)
        self._cache: dict = {}
        #: What a request without Accept gets (most clients' requests: made once).
        self._default_choices = (Choice(self.default),)

    def choices(self, accept) -> tuple:
        """The acceptable (codec, view) pairs of an Accept header, best first (cached)."""
        if not accept:
            return self._default_choices
        found = self._cache.get(accept)
        if found is None:
            found = self._parse(accept)
            if len(self._cache) < 256:
                self._cache[accept] = found
        return found

    def _parse(self, accept) -> tuple:
        if isinstance(accept, bytes):
            accept = accept.decode("latin-1")
        out = []
        for media in parse_accept(accept):
            params = media.params
            if params.get("stream", "watch") not in ("", "watch"):
                continue
            view = params.get("as")
            if view is not None or "g" in params or "v" in params:
                if not _served_view(view, params.get("g"), params.get("v")):
                    continue  # a view of another group or version: not served here
            if media.full in ("*/*", "application/*"):
                codec, name = self.default, self.default.media_type
            else:
                codec, name = self.names.get(media.full), media.full
                if codec is None:
                    continue
            if view == TABLE and codec.media_type not in TABLE_MEDIA_TYPES:
                continue
            choice = Choice(codec, view, params.get("g", VIEW_GROUP),
                            params.get("pretty") == "1", name,
                            params.get("v", VIEW_VERSION))
            if choice not in out:
                out.append(choice)
        return tuple(out)

    def route_accepts(self, accept) -> bool:
        """
        Whether go-restful would select a route for ``accept`` at all
        (``Route.matchesAccept``): some entry, parameters cut off, is exactly ``*/*`` or a
        media type the server produces (an alias too: the route produces it under that
        name).  ``application/*``, ``text/*`` or a lone ``*`` match no route, however
        goautoneg would rank them later.
        """
        if not accept:
            return True
        if isinstance(accept, bytes):
            accept = accept.decode("latin-1")
        for entry in accept.split(","):
            mime = entry.split(";", 1)[0].strip(" \t")
            if mime == "*/*" or mime in self.names:
                return True
        return False

    def error_choice(self, accept) -> Choice:
        """How an error is written: the best plain choice acceptable, else JSON."""
        for choice in self.choices(accept):
            if choice.view is None:
                return choice
        return self._default_choices[0]

    def pick(self, accept, views=frozenset(), kind=None) -> Choice:
        """
        The first acceptable choice whose view is None or in ``views`` and whose codec
        serves the answer (the view, or else ``kind``, a ResourceType); else 406.
        """
        for choice in self.choices(accept):
            if (choice.view is None or choice.view in views) and _serves(choice, kind):
                return choice
        raise errors.not_acceptable(self.media_types)

    def for_request(self, content_type, api_version: str = "", kind: str = ""):
        """The codec for a request body; 415 for an unknown Content-Type, or (given the
        body's ``api_version`` and ``kind``) one whose codec does not serve that kind
        (Protobuf for a custom resource), naming those that do."""
        if not content_type:
            return self.default
        if isinstance(content_type, bytes):
            content_type = content_type.decode("latin-1")
        codec = self.names.get(content_type.split(";", 1)[0].strip().lower())
        if codec is None:
            raise errors.unsupported_media_type(self.media_types)
        if kind and ITypedCodec.providedBy(codec) and not codec.serves(api_version, kind):
            raise errors.unsupported_media_type(
                [c.media_type for c in self.codecs.values()
                 if not ITypedCodec.providedBy(c) or c.serves(api_version, kind)])
        return codec


def _served_view(view, group, version) -> bool:
    """Whether ``as``/``g``/``v`` name a view this server serves somewhere."""
    if view == AGGREGATED:
        return group == AGGREGATED_GROUP and version == AGGREGATED_VERSION
    return view in VIEWS and group in VIEW_GROUPS and version == VIEW_VERSION


def _serves(choice: Choice, kind) -> bool:
    codec = choice.codec
    if not ITypedCodec.providedBy(codec):
        return True
    if choice.view is not None:
        return codec.serves(f"{choice.group}/{choice.version}", choice.view)
    return kind is None or codec.serves(kind.api_version, kind.kind)


def _not_a_codec(codec):
    raise TypeError(f"{codec!r} does not provide ICodec")
