"""
get and list (spec 2.1.10, 4.3, 4.4, 4.9), served from the watch cache.

Each request falls in one cell of spec 4.9's tables (``listoptions.list_plan``); the
cache reader (``cache/reads.py``) answers the cell with a ``Listing`` — the collection
at the right revision, or 410/504 — and this module pages and renders it.

JSON, Protobuf and CBOR lists are assembled from each object's already-encoded bytes
(its cached JSON, or its Protobuf message or CBOR data item, cached per version by
``CachedObject.encoded``): no object is encoded again to answer a get or a list.
"""

from __future__ import annotations

import builtins
from typing import Optional

from twisted.internet.defer import Deferred, inlineCallbacks, returnValue

from platformd.util import slices
from platformd.api import listoptions, responses, views
from platformd.api.streaming import PieceWriter
from platformd.codecs.interface import IItemCodec
from platformd.codecs.jsoncodec import JSON, dumps
from platformd.util.deferreds import then

#: Lists of at least this many bytes of items are streamed (spec 4.2.5).
STREAM_THRESHOLD = 4 * 1024 * 1024


class Reader:
    """Serves get and list for every kind from one cache reader (``ICacheReader``)."""

    def __init__(self, cache, gates):
        self.cache = cache
        self.gates = gates

    def get(self, call, store):
        """
        Any answers at once; Most Recent once the cache holds every write committed
        before the request (upstream reads etcd for it: the cacher hands a GET without
        resourceVersion to storage), which another server over the same etcd may have
        made; Not older than N may wait for N.
        """
        rv_text = call.arg("resourceVersion") or ""
        if rv_text == "0":
            return self._get_now(call, store)
        if not rv_text:
            return then(self.cache.sync(), lambda _: self._get_now(call, store))
        return then(listoptions.parse(call, self.gates, watch=False),
                    lambda options: self.cache.reach(options.resource_version).addCallback(
                        lambda _: self._get_now(call, store)))

    def _get_now(self, call, store):
        """The object once the kind's cache holds what the cache does (a converted
        version view may still be converting, or fail with its conversion's error, but
        for an object needing no conversion)."""
        key = call.kind.storage_key(call.info.namespace or None, call.info.name)
        return then(store.cache.ready_for(key, self.cache.revision), self._get_ready, call,
                    store)

    def _get_ready(self, _, call, store):
        choice = call.pick(views.READ_VIEWS)
        entry = store.get(call.info.namespace or None, call.info.name)
        views.check_shape(choice, call.kind, is_list=False)
        codec = choice.codec
        if choice.view is None and codec.media_type == JSON and not call.indented(choice):
            body = entry.json
        elif choice.view is None and IItemCodec.providedBy(codec):
            item = entry.encoded(codec.media_type, codec.item_bytes)
            body = codec.from_item(call.kind.api_version, call.kind.kind, item)
        else:
            value = views.object_view(choice, call.kind, entry.obj,
                                      views.include_object(call, choice),
                                      self.cache.clock.seconds())
            body = choice.codec.encode(value, call.indented(choice))
        return responses.write(call.request, 200, responses.compressed(call, body),
                               responses.content_type(choice))

    @inlineCallbacks
    def list(self, call, store):
        kind = call.kind
        options = yield listoptions.parse(call, self.gates, watch=False)
        listing = yield self.cache.list(kind, call.info.namespace, options.list_plan(),
                                        options.resource_version, options.continue_token,
                                        options.limit)
        page, next_start, remaining = yield slices.run(
            _page(listing.entries, listing.start, options, options.limit))
        meta: dict = {"resourceVersion": str(listing.revision), "continue": ""}
        if next_start is not None:
            meta["continue"] = self.cache.continue_token(listing, next_start)
            if not options.filtered:
                meta["remainingItemCount"] = remaining
        if options.shard is not None:
            meta["shardInfo"] = {"selector": options.shard.text}
        choice = call.pick(views.READ_VIEWS)
        views.check_shape(choice, kind, is_list=True)
        result = self.render(call, choice, kind, meta, page)
        if isinstance(result, Deferred):
            result = yield result
        returnValue(result)

    def render(self, call, choice, kind, meta: dict, page: builtins.list):
        """
        The list in the negotiated form ``choice``.  Plain JSON, Protobuf and CBOR are
        assembled from each object's cached bytes; above ``STREAM_THRESHOLD`` they are
        streamed piece by piece instead of being joined into one string.
        """
        media = responses.content_type(choice)
        codec = choice.codec
        if choice.view is None and IItemCodec.providedBy(codec):
            items = [e.encoded(codec.media_type, codec.item_bytes) for e in page]
            pieces = codec.list_pieces(kind.api_version, kind.list_kind, meta, items)
            if sum(len(item) for item in items) >= STREAM_THRESHOLD:
                return self.stream(call, media, pieces)
            body = b"".join(pieces)
        elif choice.view is None and codec.media_type == JSON and not call.indented(choice):
            head = b'{"kind":"%s","apiVersion":"%s","metadata":%s,"items":[' % (
                kind.list_kind.encode(), kind.api_version.encode(), dumps(meta))
            size = sum(len(e.json) for e in page)
            if size >= STREAM_THRESHOLD:
                return self.stream(call, media, _pieces(head, page))
            body = b"".join(_pieces(head, page))
        else:
            value = views.list_view(choice, kind, [e.obj for e in page], meta,
                                    views.include_object(call, choice),
                                    self.cache.clock.seconds())
            body = codec.encode(value, call.indented(choice))
        return responses.write(call.request, 200, responses.compressed(call, body), media)

    @staticmethod
    def stream(call, media: str, pieces):
        gzip = responses.accepts_gzip(call)
        request = call.request
        responses.start(request, 200, media)
        if gzip:
            request.responseHeaders.setRawHeaders(b"Content-Encoding", [b"gzip"])
            request.responseHeaders.setRawHeaders(b"Vary", [b"Accept-Encoding"])
        return PieceWriter(request, pieces, gzip).start()


def _pieces(head: bytes, page: list):
    """A JSON list as pieces: the items' cached bytes as they are, commas between."""
    yield head
    for i, entry in enumerate(page):
        if i:
            yield b","
        yield entry.json
    yield b"]}"


def selected(listing, options):
    """
    Every entry of ``listing`` from its start on that ``options``' selectors choose (a
    list, or a Deferred of one: ``slices.run``).
    """
    return then(slices.run(_page(listing.entries, listing.start, options, None)),
                lambda paged: paged[0])


def _page(entries: list, start: str, options, limit: Optional[int]):
    """
    (items of this page, start key of the next page or None, items after this page);
    with no ``limit``, every selected item from ``start`` on.  Work for ``slices.run``:
    filtering a large collection yields to the reactor every ``slices.STEP`` objects.
    """
    index = _bisect_key(entries, start) if start else 0
    n = len(entries)
    if not options.filtered:
        end = min(n, index + limit) if limit else n
        page = entries[index:end]
        index = end
    else:
        page = []
        matches = options.matches
        while True:
            for entry in entries[index:index + slices.STEP]:
                index += 1
                if matches(entry.obj):
                    page.append(entry)
                    if limit and len(page) >= limit:
                        break
            if index >= n or (limit and len(page) >= limit):
                break
            yield
    if limit and len(page) >= limit and index < n:
        return page, page[-1].key + "\x00", n - index
    return page, None, 0


def _bisect_key(entries: list, key: str) -> int:
    low, high = 0, len(entries)
    while low < high:
        mid = (low + high) // 2
        if entries[mid].key < key:
            low = mid + 1
        else:
            high = mid
    return low
