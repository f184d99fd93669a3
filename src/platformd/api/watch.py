"""
Watch streams (spec 4.5, 6): chunked HTTP responses of one JSON watch event per line.

A ``WatchStream`` is an ``IPushProducer`` registered on its request: when the client
reads slowly, TCP/TLS back-pressure pauses it and events wait in a backlog; a backlog
above ``max_backlog`` bytes closes the stream at once (the client re-watches from the
last version it saw) instead of growing memory.  A client that goes away cancels the
stream (Klein cancels the handler's Deferred), which unregisters it from the cache.

Every live event is encoded once per (type, media type) by ``CacheEvent.frame``; the
same bytes go to every watcher.  Starting points follow spec 4.9's watch table: without
a resourceVersion (or ``0``) the stream starts with the current state as synthetic
ADDED events; with one it replays the held history after it (410 Gone, as an ERROR
event, when that history is gone); ``sendInitialEvents=true`` sends the state and then a
BOOKMARK annotated ``platform.io/initial-events-end: "true"`` (and under upstream's name
too: ``UPSTREAM_INITIAL_EVENTS_END``).  A stream whose kind stops being served (a kind
removed at run time, ``WatchCache.remove_kind``) ends: ``kind_removed``.
"""

from __future__ import annotations

from collections import deque
from typing import Optional

from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.interfaces import IPushProducer
from twisted.logger import Logger
from zope.interface import implementer

from platformd import errors
from platformd.api import listoptions, responses, views
from platformd.api.watchscope import WatchScope
from platformd.cache.watchcache import (
    ADDED, BOOKMARK, ERROR, CorruptObjectError,
)
from platformd.codecs import cborcodec, protobufcodec
from platformd.codecs.jsoncodec import JSON, dumps
from platformd.util.deferreds import then
from platformd.util.ratelog import RateLimitedLog, origin
from platformd.edge.tlstransport import abort_stream, immediate_writer, release_idle_buffers

log = Logger()

INITIAL_EVENTS_END = "platform.io/initial-events-end"
#: The same annotation under upstream's name, which client-go (1.35 and later: its
#: WatchListClient gate is on by default, so every informer and ``kubectl wait``) waits
#: for and matches by that name alone: without it a stock client never sees its initial
#: list end.  It is an alias for stock clients, as ``application/vnd.kubernetes.protobuf``
#: is; the platform's name stays first.
UPSTREAM_INITIAL_EVENTS_END = "k8s.io/initial-events-end"
#: Bytes of unsent events a watcher may hold before it is closed as too slow.
MAX_BACKLOG = 8 * 1024 * 1024
#: Seconds between periodic bookmarks (upstream sends about one a minute).
BOOKMARK_INTERVAL = 60.0
#: The media types a watch can be streamed in (CBOR as a CBOR sequence, Protobuf as
#: length-prefixed WatchEvent messages).
WATCH_MEDIA = (JSON, cborcodec.CBOR, protobufcodec.PROTOBUF)
#: The parameter upstream names a stream form with (a Protobuf watch's Content-Type, and
#: the watch forms a list route produces).
STREAM = ";stream=watch"


class FrameEncoder:
    """
    Encodes watch events for one (media type, view): ``frame`` for a cached object,
    ``value_frame`` for any value (bookmarks, errors).  ``key`` names the encoding, so
    ``CacheEvent.frame`` can share the bytes between every watcher that uses it.

    A Table watch, as upstream's, carries the column definitions in its first object
    event only (``headers``); later events have ``columnDefinitions: null``.
    """

    def __init__(self, choice, kind, include: str, clock):
        self.choice = choice
        self.kind = kind
        self.include = include
        self.clock = clock
        media = choice.codec.media_type
        self.cbor = media == cborcodec.CBOR
        self.protobuf = media == protobufcodec.PROTOBUF
        self.content_type = (cborcodec.CBOR_SEQ if self.cbor
                             else choice.media_type + STREAM if self.protobuf
                             else responses.content_type(choice))
        # What the bytes depend on: the encoding (whatever name the client gave it), the
        # view and its group, and includeObject.
        self.key = (media, choice.view, choice.group if choice.view else "",
                    include if choice.view else "")
        self.table = choice.view == views.TABLE

    def frame(self, type_: str, entry, headers: bool) -> bytes:
        """A cached object's event; the object's own encoding is the cached one."""
        if self.choice.view is None:
            codec = self.choice.codec
            if self.protobuf:
                return protobufcodec.watch_frame(type_, codec.from_item(
                    self.kind.api_version, self.kind.kind,
                    entry.encoded(protobufcodec.PROTOBUF, codec.item_bytes)))
            if self.cbor:
                return cborcodec.watch_event(type_, entry.encoded(cborcodec.CBOR,
                                                                  codec.item_bytes))
            return b'{"type":"%s","object":%s}\n' % (type_.encode(), entry.json)
        return self.value_frame(type_, views.object_view(
            self.choice, self.kind, entry.obj, self.include, self.clock.seconds(), headers))

    def value_frame(self, type_: str, value: dict) -> bytes:
        if self.cbor:
            return cborcodec.encode({"type": type_, "object": value})
        if self.protobuf:
            return protobufcodec.watch_frame(type_, self.choice.codec.encode(value))
        return b'{"type":"%s","object":%s}\n' % (type_.encode(), dumps(value))


class WatchServer:
    """Starts watch streams for every kind from one watch cache."""

    def __init__(self, cache, gates, clock, max_backlog: int = MAX_BACKLOG,
                 bookmark_interval: float = BOOKMARK_INTERVAL, metrics=None):
        #: The cache reader (``ICacheReader``): starting points, subscriptions.
        self.cache = cache
        self.gates = gates
        self.clock = clock
        self.max_backlog = max_backlog
        self.bookmark_interval = bookmark_interval
        #: Open streams (for tests and metrics).
        self.streams: set = set()
        #: The server's ``APIServerMetrics``: events sent (None: not counted).
        self.metrics = metrics
        #: The server is shutting down: streams end once they have sent their start.
        self.ending = False
        #: Tracebacks of watches failing to start, each bug's once a minute: a client
        #: can start one after another.
        self.failures = RateLimitedLog(log, clock=clock)

    def watch(self, call, store):
        choice = call.pick(views.WATCH_VIEWS)
        if choice.codec.media_type not in WATCH_MEDIA:
            raise errors.not_acceptable(list(WATCH_MEDIA))
        return then(listoptions.parse(call, self.gates, watch=True), self._stream, call, choice)

    def _stream(self, options, call, choice):
        """Start the stream once its options are parsed (in slices, if long)."""
        encoder = FrameEncoder(choice, call.kind, views.include_object(call, choice), self.clock)
        namespace = call.info.namespace if call.kind.namespaced else ""
        stream = WatchStream(self, call.request, call.kind, namespace or "", options, encoder)
        self._start(stream, options)
        return stream.done

    def end_all(self) -> None:
        """
        End every stream (``WatchStream.end``), and every stream started from now on once
        it has sent its start (shutdown): each writes what it has queued, its bookmark,
        then the end of the response, so its client watches again from the last
        resourceVersion it saw, without a relist.
        """
        self.ending = True
        for stream in list(self.streams):
            stream.end()

    @inlineCallbacks
    def _start(self, stream, options):
        """Find the starting point (spec 4.9's watch table), then go live."""
        try:
            start = yield self.cache.watch_start(stream.kind, stream.namespace, options)
        except errors.StatusError as e:
            stream.fail(e)
            return
        except Exception:
            # Ended meanwhile (the server stopping, which also stops the storage reads
            # waited on): nothing to tell.  Else a bug, answered as the API answers one.
            if not stream.closed:
                self.failures.failure("watch start failed", key=origin())
                stream.fail(errors.internal("unexpected error"))
            return
        stream.begin(start.initial, start.replay, start.end_bookmark, start.revision)


@implementer(IPushProducer)
class WatchStream:
    """One watch (see module docstring): starting → live → closed."""

    def __init__(self, server, request, kind, namespace: str, options, encoder):
        self.server = server
        self.encoder = encoder
        self.request = request
        self.kind = kind
        self.namespace = namespace
        self.options = options
        self.prefix = (kind.namespace_prefix(namespace) if namespace else kind.storage_prefix)
        #: The only judge of what this stream may send (see ``watchscope``).
        self.scope = WatchScope(self.prefix, options)
        self.closed = False
        self.last_revision = 0
        self.done: Deferred[bytes] = Deferred(self._cancelled)
        self._registered = False
        #: Every event up to the cache's revision has been offered (``begin`` is done).
        self._caught_up = False
        self._paused = False
        self._backlog: deque = deque()
        self._backlog_bytes = 0
        #: The stream should end as soon as the backlog is written.
        self._closing = False
        self._timers: list = []
        responses.start(request, 200, encoder.content_type)
        request.registerProducer(self, True)
        request.write(b"")  # the headers go out now; events follow as they come
        # Idle most of the time: its connection holds no record buffers meanwhile.
        release_idle_buffers(request.channel)
        # Events are written straight to the transport, already framed as HTTP chunks:
        # the framing of a shared event is computed once for every watcher, and each
        # delivery skips twisted.web's per-write bookkeeping.
        self._chunked = bool(request.chunked)
        self._write = immediate_writer(request.channel)
        self._frame_key = (encoder.key, self._chunked)
        #: A Table watch's next object event carries the column definitions (the first).
        self._headers_pending = encoder.table
        #: Upstream's ``apiserver_watch_events_total``/``_sizes`` of this kind: their
        #: series, taken at the first event (so an idle watch adds none).
        self._metrics = server.metrics
        self._series: Optional[tuple] = None
        server.streams.add(self)

    # -- starting ------------------------------------------------------------------------

    def begin(self, initial, replay, end_bookmark, revision: int) -> None:
        if self.closed:
            return
        self.last_revision = revision
        admits = self.scope.admits
        for entry in initial:
            if admits(entry):
                self._send(self._object_frame(ADDED, entry))
        if end_bookmark is not None:
            self._send(self._bookmark_frame(end_bookmark, initial_end=True))
        for event in replay:
            self.offer(event)
        if self.closed:
            return
        self._caught_up = True
        if self.server.ending:
            self.end()
            return
        self.server.cache.subscribe(self.kind, self.namespace, self)
        if self.closed or self._closing:
            return  # the kind was removed meanwhile (``kind_removed``)
        self._registered = True
        clock = self.server.clock
        self._timers.append(clock.callLater(self.options.watch_timeout(), self.end))
        if self.options.allow_bookmarks:
            self._timers.append(clock.callLater(self.server.bookmark_interval, self._tick))

    def fail(self, error: errors.StatusError) -> None:
        """End the stream with one ERROR event carrying ``error``'s Status."""
        if not self.closed:
            self._send(self.encoder.value_frame(ERROR, error.to_status()))
            self._finish()

    # -- live ------------------------------------------------------------------------------

    def offer(self, event) -> None:
        """
        One change of this kind (live from the KindCache, or replayed from its history):
        sent only if this watcher's scope admits it, as the type it has for this watcher.
        """
        data = self._event_data(event)
        if data is not None:
            self._emit(data)

    def offer_many(self, events) -> None:
        """
        Several changes that reached the cache in one reactor turn, oldest first: each
        judged as ``offer`` judges it, and those sent written together (one TLS record
        and one ``send`` for up to ``RECORD`` bytes, instead of one each), as upstream's
        watch server flushes only once no further event is queued.
        """
        datas = []
        for event in events:
            data = self._event_data(event)
            if data is not None:
                datas.append(data)
        if datas:
            self._emit_many(datas)

    def _event_data(self, event) -> Optional[bytes]:
        """``event``'s bytes on this stream (framed), or None if it is not sent."""
        type_ = self.scope.event_type(event)
        if type_ is None:
            return None
        if event.revision <= self.last_revision:
            return None  # already sent by this watcher's replay of history
        self.last_revision = event.revision
        if self._headers_pending:
            return self._framed(self._object_frame(type_, event.object_for(type_)))
        try:
            return event.frame(type_, self._frame_key, self._encode_event)
        except CorruptObjectError:
            return self._framed(self._object_frame(type_, event.object_for(type_)))

    def _object_frame(self, type_: str, entry) -> bytes:
        """
        An event carrying one object version, with the Table headers if still due; an
        undecodable object (left by an unsafe delete) is sent as what can be said of it.
        """
        headers, self._headers_pending = self._headers_pending, False
        try:
            return self.encoder.frame(type_, entry, headers)
        except CorruptObjectError:
            return self.encoder.value_frame(type_, entry.stub(self.kind))

    def _encode_event(self, type_: str, entry) -> bytes:
        return self._framed(self.encoder.frame(type_, entry, False))

    def _framed(self, frame: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(frame), frame) if self._chunked else frame

    def _tick(self) -> None:
        if self.closed:
            return
        self._send(self._bookmark_frame(self.server.cache.bookmark_revision(self.kind)))
        self._timers.append(self.server.clock.callLater(self.server.bookmark_interval, self._tick))

    def _bookmark_frame(self, revision: int, initial_end: bool = False) -> bytes:
        """
        A bookmark: an object of the watched kind holding only its resourceVersion (and
        the initial-events-end annotation), in the watch's view as upstream transforms
        every event's object (a PartialObjectMetadata, or a Table row, for those views).
        """
        meta: dict = {"resourceVersion": str(revision)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true",
                                   UPSTREAM_INITIAL_EVENTS_END: "true"}
        value = {"kind": self.kind.kind, "apiVersion": self.kind.api_version, "metadata": meta}
        encoder = self.encoder
        if encoder.choice.view is not None:
            value = views.object_view(encoder.choice, self.kind, value, encoder.include,
                                      encoder.clock.seconds(), self._headers_pending)
            self._headers_pending = False
        return encoder.value_frame(BOOKMARK, value)

    def end(self) -> None:
        """
        End the stream as its timeout does: a bookmark at the cache's revision if the
        client asked for bookmarks and the stream has caught up with the cache (it
        resumes from there), then the end of the response.
        """
        if self.closed:
            return
        if self.options.allow_bookmarks and self._caught_up:
            self._send(self._bookmark_frame(self.server.cache.bookmark_revision(self.kind)))
        self._finish()

    def kind_removed(self) -> None:
        """
        The cache stopped serving this kind (a custom resource removed at run time): the
        response ends once what is queued is written, without a bookmark (there is
        nothing to resume; the client's next request is a 404), as upstream's cacher
        ends every watch of a removed CRD.
        """
        self._registered = False  # the cache has let its watchers go
        self._finish()

    # -- writing and back-pressure -----------------------------------------------------

    def _send(self, frame: bytes) -> None:
        """Send one event of this watcher's own (initial state, bookmark, error)."""
        self._emit(self._framed(frame))

    def _emit(self, data: bytes) -> None:
        if self.closed:
            return
        metrics = self._metrics
        if metrics is not None:
            self._count(metrics, data)
        if self._paused or self._backlog:
            self._queue(data)
            return
        self._write(data)

    def _emit_many(self, datas: list) -> None:
        """``_emit`` of each of ``datas``, written at once when nothing waits before them."""
        if self.closed:
            return
        metrics = self._metrics
        if metrics is not None:
            for data in datas:
                self._count(metrics, data)
        if self._paused or self._backlog:
            for data in datas:
                if self.closed:  # too slow
                    return
                self._queue(data)
            return
        self._write(datas[0] if len(datas) == 1 else b"".join(datas))

    def _count(self, metrics, data: bytes) -> None:
        """Upstream's watch event metrics for one event sent."""
        series = self._series
        if series is None:
            labels = (self.kind.group, self.kind.version, self.kind.kind)
            series = self._series = (metrics.watch_events.child(labels),
                                     metrics.watch_event_sizes.child(labels))
        series[0][0] += 1
        metrics.watch_event_sizes.observe_into(series[1], len(data))

    def _queue(self, data: bytes) -> None:
        """Hold ``data`` in the backlog (paused, or behind what is held already)."""
        self._backlog.append(data)
        self._backlog_bytes += len(data)
        if self._backlog_bytes > self.server.max_backlog:
            self._too_slow()

    def pauseProducing(self) -> None:
        self._paused = True

    def resumeProducing(self) -> None:
        self._paused = False
        backlog = self._backlog
        while backlog and not self._paused and not self.closed:
            data = backlog.popleft()
            self._backlog_bytes -= len(data)
            self._write(data)
        if not backlog and self._closing:
            self._finish()

    def stopProducing(self) -> None:
        self._close()

    def _too_slow(self) -> None:
        log.info("closing a {kind} watch that fell {n} bytes behind",
                 kind=self.kind.kind, n=self._backlog_bytes)
        self._close()
        if self.request.channel is not None:
            abort_stream(self.request.channel)

    # -- ending ------------------------------------------------------------------------

    def _finish(self) -> None:
        """End the response cleanly once everything queued has been written."""
        if self._backlog and not self.closed:
            self._closing = True
            return
        if self._close():
            self.done.callback(b"")

    def _cancelled(self, _deferred) -> None:
        """The client went away (Klein cancels the handler's Deferred)."""
        self._close()

    def _close(self) -> bool:
        if self.closed:
            return False
        self.closed = True
        if self._registered:
            self.server.cache.unsubscribe(self.kind, self.namespace, self)
        for timer in self._timers:
            if timer.active():
                timer.cancel()
        self._timers = []
        self._backlog.clear()
        self._backlog_bytes = 0
        self.server.streams.discard(self)
        if self.request.channel is not None:
            self.request.unregisterProducer()
        return True
