"""
One etcd watch, read in a thread of its own and handed to the reactor.

etcd's Watch is a bidirectional stream; grpcio's synchronous API reads it with a
blocking iterator and writes it from a request iterator.  ``WatchStream.run`` owns both
in a daemon thread: it creates the watches (the store's key range, with ``prev_kv`` and
``progress_notify``, and optionally a second key), turns each response into interface
events (reading values back through the transformer, off the reactor), and calls the
reactor's handlers with ``callFromThread``.  Events of the ``marker`` key count for the
revision reached but are not handed out: the store writes that key to learn when its
watch has reached a revision (``EtcdStorage.sync``).  etcd's periodic progress
notifications (sent only to a watcher that is in sync) advance the revision too;
on-demand progress requests are not used, since etcd before 3.4.31 and 3.5.13 answers
them even for a watcher still catching up, naming a revision it has not delivered.

A broken stream (member down, leader lost, network) is opened again, on the member the
client picks then, from the revision after the last one delivered, so a watch stays
open across an outage without gap or duplicate; only a compaction past that revision
ends it (``on_compacted``).
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Optional

import attrs
import grpc
from twisted.logger import Logger

from platformd.protos.etcd.api.etcdserverpb import rpc_pb2
from platformd.protos.etcd.api.mvccpb import kv_pb2
from platformd.storage.interface import DELETE, PUT, Event, KeyValue
from platformd.storage.etcd3.client import REQUIRE_LEADER
from platformd.storage.transformers import Transformed

log = Logger()

#: The watch ids this stream creates (etcd >= 3.4 takes them from the client).
_RANGE_ID, _KEY_ID = 1, 2

#: Waits between attempts to open a broken stream again.
_BACKOFF = (0.05, 0.1, 0.2, 0.5, 1.0)


@attrs.frozen
class Handlers:
    """What the stream calls on the reactor thread."""

    #: (revision, events): events in revision order up to ``revision``, or none at all
    #: (progress: every event up to ``revision`` has been delivered).
    on_events: Callable[[int, list], None]
    #: (compact revision): the history the stream needed is gone; it has stopped.
    on_compacted: Callable[[int], None]
    #: (value): the watched single key (``key``) was written with ``value``.
    on_key: Callable[[bytes], None] = lambda value: None
    #: (connected): the stream was opened (True) or broke (False).
    on_connection: Callable[[bool], None] = lambda connected: None


def to_interface(event, name: Callable[[bytes], str], values: Transformed) -> Event:
    """An etcd ``mvccpb.Event`` as an interface ``Event``, values read back."""
    kv = event.kv
    key = name(kv.key)
    prev = None
    if event.HasField("prev_kv"):
        p = event.prev_kv
        prev = KeyValue(key, values.value(key, p.value), p.create_revision, p.mod_revision)
    if event.type == kv_pb2.Event.DELETE:
        # etcd's deletion carries the key and the deletion's revision; the interface's
        # carries the last version (its prev), as upstream's watcher reads it.
        last = prev or KeyValue(key, b"", 0, kv.mod_revision)
        return Event(DELETE, attrs.evolve(last, mod_revision=kv.mod_revision), prev)
    return Event(PUT, KeyValue(key, values.value(key, kv.value), kv.create_revision,
                               kv.mod_revision), prev)


class WatchStream:
    """
    The thread (see module docstring).  A plain class: its fields belong to the thread,
    except ``_requests``, the queue the reactor writes progress requests and the stop
    marker into.
    """

    def __init__(self, reactor, stubs: Callable[[], Any], key: bytes, range_end: bytes,
                 start_revision: int,
                 name: Callable[[bytes], str], values: Transformed, handlers: Handlers,
                 single_key: Optional[bytes] = None, marker: Optional[bytes] = None,
                 delivered: Callable[[], int] = lambda: 0):
        self._reactor = reactor
        #: The Watch stub each opening of the stream uses (the client's next endpoint).
        self._stubs = stubs
        self._key, self._range_end = key, range_end
        self._next = start_revision
        self._name = name
        self._values = values
        self._handlers = handlers
        self._single_key = single_key
        self._marker = marker
        self._delivered = delivered
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        #: The stream's grpcio call, while one is open.
        self._call: Any = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="platformd-etcd-watch",
                                        daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        """Close the stream; the thread ends soon after (``join`` waits for it)."""
        self._stopping.set()
        self._requests.put(None)
        call = self._call
        if call is not None:
            call.cancel()

    def reopen(self):
        """
        End the stream under way; the thread opens another (on the client's next
        endpoint) from the revision it had reached, as after a broken stream.  For a
        stream that has gone silent on a member that hangs (``EtcdStorage``'s
        ``STALL_AFTER``).
        """
        call = self._call
        if call is not None:
            call.cancel()

    def join(self, timeout: float) -> bool:
        """
        After ``stop``: wait up to ``timeout`` for the thread to end; whether it did.
        A thread still reading a stream when the channel is closed (or the interpreter
        exits) is what hung process exit: grpcio's channel close waits for its calls.
        """
        if self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _create_key(self, start_revision: int):
        return rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(
            key=self._single_key, start_revision=start_revision, watch_id=_KEY_ID))

    def _outgoing(self, requests: queue.SimpleQueue):
        """The request iterator grpcio reads from: the creates, then whatever is queued."""
        yield rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(
            key=self._key, range_end=self._range_end, start_revision=self._next,
            prev_kv=True, progress_notify=True, watch_id=_RANGE_ID))
        if self._single_key is not None:
            yield self._create_key(self._next)
        while True:
            request = requests.get()
            if request is None:
                return
            yield request

    def _run(self):
        failures = 0
        while not self._stopping.is_set():
            requests = self._requests
            try:
                self._call = self._stubs().Watch(self._outgoing(requests),
                                                 metadata=REQUIRE_LEADER)
                if self._stopping.is_set():
                    self._call.cancel()
                for response in self._call:
                    failures = 0
                    if not self._handle(response):
                        return
            except grpc.RpcError as error:
                if self._stopping.is_set():
                    return
                log.warn("etcd watch broke ({code}: {details}); opening it again from"
                         " revision {revision}", code=error.code(), details=error.details(),
                         revision=self._next)
            if self._stopping.is_set():
                return
            self._reactor.callFromThread(self._handlers.on_connection, False)
            # Waits on the stop event, not time.sleep: ``stop`` ends the backoff at once.
            self._stopping.wait(_BACKOFF[min(failures, len(_BACKOFF) - 1)])
            failures += 1
            # A new queue per stream: the old request iterator is ended with None.
            self._requests.put(None)
            self._requests = queue.SimpleQueue()

    def _handle(self, response) -> bool:
        """One response; False once the stream has ended for good."""
        if response.watch_id == _KEY_ID and (response.canceled or response.compact_revision):
            # etcd 3.4 at times cancels the single-key watch at a compaction although it
            # started after it: the compaction is news all the same; watch the key again.
            if response.compact_revision:
                self._reactor.callFromThread(self._handlers.on_key,
                                             str(response.compact_revision).encode())
            self._requests.put(self._create_key(max(response.compact_revision, self._next)))
            return True
        if response.compact_revision:
            self._reactor.callFromThread(self._handlers.on_compacted, response.compact_revision)
            self._stopping.set()
            self._call.cancel()
            return False
        if response.canceled:
            raise _Canceled(response.cancel_reason)
        if response.created:
            if response.watch_id == _RANGE_ID:
                self._reactor.callFromThread(self._handlers.on_connection, True)
            return True
        if response.watch_id == _KEY_ID:
            for event in response.events:
                if event.type == kv_pb2.Event.PUT:
                    self._reactor.callFromThread(self._handlers.on_key, event.kv.value)
            return True
        if response.watch_id != _RANGE_ID:
            return True  # an on-demand progress reply (watch id -1): not trusted, see above
        # Events: the last one's revision.  None: a periodic progress notification.
        revision = (response.events[-1].kv.mod_revision if response.events
                    else response.header.revision)
        if revision >= self._next:
            self._next = revision + 1
        # What the consumer has delivered already (its own writes, from their replies) is
        # neither read back nor handed over.  Read from this thread: an int that only
        # grows, so a stale value costs only work the consumer then drops.
        delivered = self._delivered()
        if revision <= delivered:
            return True
        events = [to_interface(e, self._name, self._values) for e in response.events
                  if e.kv.mod_revision > delivered and e.kv.key != self._marker]
        self._reactor.callFromThread(self._handlers.on_events, revision, events)
        return True


class _Canceled(grpc.RpcError):
    """etcd canceled the watch (leader lost, ...): open it again like a broken stream."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self._reason = reason

    def code(self):
        return grpc.StatusCode.UNAVAILABLE

    def details(self):
        return self._reason
