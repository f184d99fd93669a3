"""
Value transformers: what a backend does to a value between the API server and the disk.

This is the seam encryption at rest plugs into, as upstream's
``k8s.io/apiserver/pkg/storage/value.Transformer``: every value a backend stores passes
through ``to_storage`` on its way in and ``from_storage`` on its way out, so everything
above the storage interface (the watch cache, the handlers) only ever sees plaintext.
The storage key is given to both as authenticated data (upstream's
``DefaultContext(key)``): an encrypting transformer binds each ciphertext to its key, so
a value copied to another key no longer decodes.

``IdentityTransformer`` stores values as they are; it is every backend's default.
``ByKeyPrefix`` chooses a transformer per resource by key prefix
(``/registry/secrets/`` → an encrypting one, anything else identity), which is what an
EncryptionConfiguration will be turned into.

``Transformed`` is the backends' side: it applies one transformer to keys' values and
events, and turns a value that does not transform back into a ``CorruptValue`` (see
``platformd.storage.interface``) instead of failing the whole read.

A transformer that must reach a plugin before it can write (KMS v2) is asked on the
reactor before a write is queued (``prepare``), so that a slow plugin holds back only
the writes it encrypts, not the backend's writer.
"""

from __future__ import annotations

from typing import Callable, Optional

import attrs
from twisted.internet.defer import Deferred
from zope.interface import Interface, implementer

from platformd.util.deferreds import then
from platformd.storage.interface import DELETE, CorruptValue, Event, KeyValue, TransformError


class IValueTransformer(Interface):
    """Turns values into what is stored and back, with the storage key as authenticated data."""

    def to_storage(key: str, value: bytes) -> bytes:
        """The bytes to store for ``value`` under ``key``."""

    def from_storage(key: str, data: bytes) -> bytes:
        """
        The value ``data``, stored under ``key``, stands for.  Raises
        ``TransformError`` when ``data`` does not transform back: it was written under
        another key, with another secret, was tampered with, or is in no format this
        transformer reads.  Any other exception is a bug of the transformer.
        """


@implementer(IValueTransformer)
class IdentityTransformer:
    """Values stored as they are: the default, and upstream's ``identity`` provider."""

    def to_storage(self, key: str, value: bytes) -> bytes:
        return value

    def from_storage(self, key: str, data: bytes) -> bytes:
        return data

    def __repr__(self) -> str:
        return "IdentityTransformer()"


IDENTITY = IdentityTransformer()


def is_stale(transformer, key: str, data: bytes) -> bool:
    """
    Whether ``data`` under ``key`` was written by other than what writes now (an old
    encryption key, or plaintext under an encrypting configuration): upstream's ``stale``
    answer from ``TransformFromStorage``, which makes an unchanged update still write, so
    rewriting every object moves it to the current key.  A transformer that can tell
    has a ``stale(key, data)`` method; others never are.
    """
    stale = getattr(transformer, "stale", None)
    return stale is not None and stale(key, data)


def prepare(transformer, key: str, reactor) -> Optional[Deferred]:
    """
    On the reactor, before a write of ``key`` is queued: None when ``to_storage`` can
    write it at once (every transformer but a KMS plugin's), else a Deferred firing
    once it can, or failing with the ``TransformError`` the write fails with.  A
    transformer that must reach something remote before it writes (a KMS v2 plugin, to
    seal a data key) has a ``prepare(key, reactor)`` method and does it there, so that
    ``to_storage``, called where the backend stores, never waits on it.
    """
    method = getattr(transformer, "prepare", None)
    return None if method is None else method(key, reactor)


@implementer(IValueTransformer)
@attrs.frozen
class ByKeyPrefix:
    """
    A transformer per resource: each key goes to the transformer of the longest prefix
    in ``transformers`` it starts with (e.g. ``{"/registry/secrets/": aes}``), and to
    ``default`` when none matches.
    """

    transformers: dict = attrs.field(converter=dict)
    default: IValueTransformer = IDENTITY
    #: For a resource served later (a custom resource), whose prefix is not among
    #: ``transformers``: ``*.<group>``'s transformer by group, else ``*.*``'s
    #: (``everything``; None: ``default``), read off its key's
    #: ``/registry/<resource>.<group>/``.
    groups: dict = attrs.field(factory=dict, converter=dict)
    everything: Optional[IValueTransformer] = None
    #: The prefixes, longest first, so the first match is the longest.
    _prefixes: tuple = attrs.field(init=False)

    @_prefixes.default
    def _longest_first(self) -> tuple:
        return tuple(sorted(self.transformers, key=len, reverse=True))

    def choose(self, key: str) -> IValueTransformer:
        """The transformer of ``key``."""
        for prefix in self._prefixes:
            if key.startswith(prefix):
                return self.transformers[prefix]
        if (self.groups or self.everything is not None) and key.startswith("/registry/"):
            end = key.find("/", len("/registry/"))
            _resource, _, group = key[len("/registry/"):end].partition(".")
            chosen = self.groups.get(group) or self.everything
            if chosen is not None:
                return chosen
        return self.default

    def to_storage(self, key: str, value: bytes) -> bytes:
        return self.choose(key).to_storage(key, value)

    def from_storage(self, key: str, data: bytes) -> bytes:
        return self.choose(key).from_storage(key, data)

    def stale(self, key: str, data: bytes) -> bool:
        return is_stale(self.choose(key), key, data)

    def prepare(self, key: str, reactor) -> Optional[Deferred]:
        return prepare(self.choose(key), key, reactor)


@attrs.frozen
class Transformed:
    """
    A backend's use of its transformer: stored forms in, plaintext out.

    ``value`` and ``kv`` read back, never raising for data that does not transform back:
    they give a ``CorruptValue`` carrying the ``TransformError``, which the watch cache
    reports as a corrupt object, so one such key neither stops a list, a watch or the
    server's start nor hides from an unsafe delete.
    """

    transformer: IValueTransformer = IDENTITY
    #: Keys last read in a stale form (``is_stale``): an update that changes nothing still
    #: writes them (``IStorage.needs_rewrite``).  Touched by the storage threads: set
    #: membership changes are atomic.
    stale_keys: set = attrs.field(factory=set, eq=False)

    @property
    def identity(self) -> bool:
        """Whether values are stored as they are (bulk reads then skip the calls)."""
        return isinstance(self.transformer, IdentityTransformer)

    def then_prepared(self, key: str, value: Optional[bytes], reactor,
                      write: Callable[[], Deferred]) -> Deferred:
        """
        On the reactor: ``write()`` at once, or once the transformer can store ``value``
        under ``key`` without waiting (``prepare``); a deletion (``value`` None) stores
        nothing and waits for nothing.  Writes of other keys are not held back meanwhile.
        """
        prepared = None if value is None else prepare(self.transformer, key, reactor)
        return then(prepared, lambda _: write())

    def then_all_prepared(self, ops: list, reactor, write: Callable[[], Deferred]) -> Deferred:
        """``then_prepared`` for every operation of ``ops`` (``mvcc``'s; their ``key`` and
        ``value``), one after the other: ``write()`` once all of them can be stored."""
        if not ops:
            return write()
        first, rest = ops[0], ops[1:]
        return self.then_prepared(first.key, first.value, reactor,
                                  lambda: self.then_all_prepared(rest, reactor, write))

    def stored(self, key: str, value: bytes) -> bytes:
        """What to store for ``value`` under ``key`` (after ``prepare``)."""
        self.stale_keys.discard(key)
        return self.transformer.to_storage(key, value)

    def value(self, key: str, data: bytes) -> bytes:
        """The plaintext of ``data`` stored under ``key``, or a CorruptValue."""
        try:
            value = self.transformer.from_storage(key, data)
        except TransformError as error:
            return CorruptValue.of(error)
        if is_stale(self.transformer, key, data):
            self.stale_keys.add(key)
        return value

    def kv(self, stored: Optional[KeyValue]) -> Optional[KeyValue]:
        """``stored`` (a version as stored, or None) with its value read back."""
        return None if stored is None else self._kv(stored)

    def _kv(self, stored: KeyValue) -> KeyValue:
        value = self.value(stored.key, stored.value)
        # Identity hands back the very bytes: keep the version itself (no copy per read).
        return stored if value is stored.value else attrs.evolve(stored, value=value)

    def event(self, stored: Event) -> Event:
        """``stored`` (an event whose versions are as stored) with its values read back."""
        prev = self.kv(stored.prev)
        if stored.type == DELETE:  # the deletion holds the last value: read it once
            assert prev is not None, f"{stored.kv.key}: a deletion with no version before it"
            kv = attrs.evolve(prev, mod_revision=stored.revision)
        else:
            kv = self._kv(stored.kv)
        return Event(stored.type, kv, prev)
