"""
The storage contract every backend (memory, SQLite, etcd) fulfils.

It is the etcd v3 model reduced to what an API server needs: one global, strictly
increasing revision; compare-and-swap writes keyed on an object's last revision; range
reads (current, or at an older revision still retained); an ordered watch from any
retained revision; compaction of history.  Everything above this layer (the watch cache,
the handlers) is written against this interface only, so the etcd backend can replace
SQLite without the rest of the server noticing.

Threading: every method is called on the reactor thread and returns a Deferred that fires
on the reactor thread.  Backends do their blocking work in threads of their own.

Values are plaintext at this interface.  Each backend takes an ``IValueTransformer``
(``transformers.py``; default: identity) and puts every value it stores through
``to_storage(key, value)`` and every value it hands back (``get``, ``range``, a watch's
events, their ``prev``, a write's result and a ``RevisionMismatchError``'s ``current``)
through ``from_storage(key, data)``, the key being authenticated data: what is in memory
or on disk is the transformed form, what callers see is plaintext.  This is where
encryption at rest plugs in (``docs/storage.md``).  A stored value that does not
transform back (``TransformError``: another key's value, a lost or wrong secret, tampered
bytes) fails neither the read nor the watch that meets it: its ``KeyValue.value`` is a
``CorruptValue``, bytes that are not JSON, so the watch cache reports that one object as
corrupt (``CorruptObjectError``) and it can still be deleted.

Multi-key writes: ``commit`` writes several keys all or none (one etcd transaction),
so that what a write takes from a shared record (a Service's address, from the
allocation bitmap) is written with it, in one round trip (``docs/storage.md``).

Ordering: nothing above this layer relies on when a watch sink hears of a write
relative to the write's Deferred.  Read-your-writes is the generic store's job: it
answers a write once the watch cache has reached the write's revision.  (The memory and
SQLite backends call matching sinks before the Deferred fires, which makes that wait
free; an etcd watch may trail the response, and then the store waits.)

Compaction boundary: after ``compact(C)``, ``compacted_revision == C``.  The state *at*
``C`` is kept, the events at and below ``C`` are not.  So ``range(prefix, R)`` serves
``C <= R <= revision``; ``watch(prefix, F, sink)``, which needs every event after ``F``,
serves ``F >= C``.  In etcd's terms the watch starts at ``F + 1`` and is refused when
``F + 1 <= C``: one stricter than etcd itself, which accepts a start of ``C`` although
the tombstone of a key deleted at ``C`` is compacted and that deletion would be missed.
"""

from __future__ import annotations

from typing import Callable, Optional

import attrs
from zope.interface import Attribute, Interface


@attrs.frozen
class KeyValue:
    """One version of one key, as stored."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int


PUT = "PUT"
DELETE = "DELETE"


@attrs.frozen
class Event:
    """
    One change, in revision order.

    For ``PUT``, ``kv`` is the new version and ``prev`` the one it replaced (``None`` on
    create).  For ``DELETE``, ``kv.value`` is the last value the key held,
    ``kv.mod_revision`` is the revision of the deletion, and ``prev`` is that last version.
    """

    type: str
    kv: KeyValue
    prev: Optional[KeyValue]

    @property
    def revision(self) -> int:
        return self.kv.mod_revision


@attrs.frozen
class RangeResult:
    """Keys under a prefix, in key order, as of ``revision``."""

    kvs: list
    revision: int


class StorageError(Exception):
    """Base of every failure a backend reports on purpose."""


class KeyExistsError(StorageError):
    """A create found the key already present."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


class KeyNotFoundError(StorageError):
    """An update or delete found no such key."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


class RevisionMismatchError(StorageError):
    """A compare-and-swap write saw a different revision; ``current`` is what is stored."""

    def __init__(self, key: str, current: KeyValue):
        super().__init__(key, current.mod_revision)
        self.key = key
        self.current = current


class CompactedError(StorageError):
    """The history a read or watch needs was compacted away."""

    def __init__(self, requested: int, compacted: int):
        super().__init__(requested, compacted)
        self.requested = requested
        self.compacted = compacted


class FutureRevisionError(StorageError):
    """A read at a revision newer than the store holds."""

    def __init__(self, requested: int, current: int):
        super().__init__(requested, current)
        self.requested = requested
        self.current = current


class TransformError(StorageError):
    """A transformer's ``from_storage`` found data it cannot turn back into the value."""


class CorruptValue(bytes):
    """
    What a backend hands back in place of a value that does not transform back.

    Its bytes are a NUL and a sentence saying why, so never JSON: the watch cache
    decodes them as it decodes every value and reports a corrupt object.  ``error`` is
    the ``TransformError``; the data as stored is not handed out.
    """

    error: TransformError

    @classmethod
    def of(cls, error: TransformError) -> CorruptValue:
        value = cls(b"\0stored value does not transform back: " + str(error).encode())
        value.error = error
        return value


class IWatch(Interface):
    """A running watch."""

    done = Attribute(
        "Deferred: fires with None on cancel(), or fails (with CompactedError or the"
        " backend's error) when the backend ends the watch itself, for example when"
        " reading the history fails.  No event is delivered after it fires."
    )

    def cancel() -> None:
        """Stop delivering events; idempotent."""


class IStorage(Interface):
    """A revisioned key-value store (see module docstring)."""

    revision = Attribute("The newest committed revision the reactor has seen (int).")
    compacted_revision = Attribute("Revisions at or below this are gone from history (int).")

    def start():
        """Open the store and recover it; Deferred fires once it serves."""

    def stop():
        """Finish pending writes and close; Deferred fires when closed."""

    def get(key: str):
        """Deferred[KeyValue | None]: the current version of ``key``."""

    def range(prefix: str, revision: Optional[int] = None):
        """
        Deferred[RangeResult]: every key starting with ``prefix``, in key order, at
        ``revision`` (``None``: the newest).  Fails with CompactedError or
        FutureRevisionError when that revision is not held.
        """

    def create(key: str, value: bytes):
        """Deferred[KeyValue]: write a new key; fails with KeyExistsError."""

    def update(key: str, value: bytes, expected_revision: Optional[int] = None):
        """
        Deferred[KeyValue]: replace ``key`` if its mod_revision equals
        ``expected_revision`` (``None``: unconditionally).  Fails with KeyNotFoundError or
        RevisionMismatchError.
        """

    def delete(key: str, expected_revision: Optional[int] = None):
        """
        Deferred[KeyValue]: remove ``key`` (compare-and-swap as for update); fires with
        the deleted version whose ``mod_revision`` is the deletion's revision.
        """

    def commit(ops: list):
        """
        Deferred[list[KeyValue]]: the writes ``ops`` (``mvcc.Create``, ``Update``,
        ``Delete``, each of another key) all or none: each op's version as its single
        write would give it, in op order.  Fails with the error the first op whose
        condition does not hold would fail with alone (KeyExistsError,
        KeyNotFoundError, RevisionMismatchError carrying ``current``), nothing written.
        The versions share one revision (etcd's transaction, memory), or, in SQLite,
        whose layout is one row per revision, take consecutive ones in one SQL
        transaction; either way a watch hears of them in op order, after every earlier
        write, before any later one.  Values go through the transformer and are held
        to the size limits as single writes' are (see "Multi-key writes" in
        ``docs/storage.md``).
        """

    def watch(prefix: str, from_revision: int, sink: Callable[[Event], None]):
        """
        Deliver, on the reactor thread and in revision order, every event for keys under
        ``prefix`` with a revision greater than ``from_revision``, then every later one as
        it is committed.  Returns an IWatch.  Raises CompactedError at once when
        ``from_revision < compacted_revision`` (see "Compaction boundary" above).
        """

    def sync():
        """
        Deferred firing once every write committed before the call, by this server or
        any other over the same data, has reached the watches (so ``revision`` is at
        least the newest such write), or None when that holds already: a store that is
        the only writer of its data (memory, SQLite) is always there, and answers None
        so that a read it precedes stays free of Deferreds; etcd asks the cluster
        (``storage/etcd3``).
        This is what lets a consistent read be served from the watch cache (upstream's
        ``ConsistentListFromCache``).
        """

    def needs_rewrite(key: str) -> bool:
        """
        Whether ``key``'s stored value was last read in a stale form (written with an
        old encryption key, or unencrypted under an encrypting configuration): an update
        that changes nothing must still write it, so rewriting every object rotates keys.
        """

    def compact(revision: int):
        """
        Deferred[None]: drop history at and below ``revision``; current values and the
        state at ``revision`` stay.  Fails with CompactedError when ``revision`` is not
        above ``compacted_revision`` and with FutureRevisionError when it is above
        ``revision`` (as etcd does).
        """
