"""
The transformer a backend holds when ``--encryption-provider-config`` is given, and its
automatic reload (``--encryption-provider-config-automatic-reload``).

``Swappable`` delegates to the current configuration (a ``_Generation``: its
``ByKeyPrefix``, KMS envelopes and their health checks); replacing it is one attribute
store under a lock, so the storage threads see either the old or the new one, never a
mix.  The ``EncryptionReloader`` polls the file (``FilePoller``); a new file that does
not load keeps the old transformers and logs why, as upstream's dynamic reload does.

A replaced configuration's KMS connections are closed once nothing uses them: every
call through ``Swappable`` (a storage thread's read or write, a ``prepare``, a health
check) counts as a user of the configuration it entered, and when the last user of a
replaced one leaves, each envelope is closed, a KMS v2 envelope after the probe it
started, if any, has ended (``KMSv2Envelope.close``).  Upstream cannot count: it closes
them after a grace period of twice the sum of the providers' timeouts (a KMS v1 timeout
counted twice, for its Encrypt and Decrypt), the bound on a call begun before the swap
(``DynamicTransformers.Set``, ``KMSCloseGracePeriod``).  Counting closes them as soon
as the last such call ends, and never while one runs.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import attrs
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from zope.interface import implementer

from platformd.files.filepoll import DEFAULT_INTERVAL, FilePoller
import platformd.storage.encryption.config as cfg
from platformd.storage.encryption.build import build
from platformd.storage.encryption.errors import EncryptionConfigError
from platformd.storage.encryption.probes import ProviderChecks
from platformd.storage.transformers import IDENTITY, IValueTransformer, is_stale, prepare

log = Logger()


@attrs.define(eq=False)
class _Generation:
    """One configuration in use, and how many calls are inside it (under the lock)."""

    transformer: IValueTransformer
    envelopes: list
    checks: ProviderChecks
    users: int = 0
    retired: bool = False


@implementer(IValueTransformer)
class Swappable:
    """A transformer whose contents can be replaced while in use (thread-safe)."""

    def __init__(self, reactor, current: IValueTransformer = IDENTITY):
        self._reactor = reactor
        self._lock = threading.Lock()
        self._generation = _Generation(current, [], ProviderChecks([], False))

    def swap(self, current: IValueTransformer, envelopes: Iterable = ()) -> None:
        envelopes = list(envelopes)
        generation = _Generation(current, envelopes, ProviderChecks.of(envelopes,
                                                                       self._reactor))
        with self._lock:
            old, self._generation = self._generation, generation
            old.retired = True
            unused = old.users == 0
        if unused:
            _close(old)

    def _enter(self) -> _Generation:
        with self._lock:
            generation = self._generation
            generation.users += 1
        return generation

    def _leave(self, generation: _Generation) -> None:
        with self._lock:
            generation.users -= 1
            unused = generation.retired and generation.users == 0
        if unused:  # maybe in a storage thread: the reactor closes
            self._reactor.callFromThread(_close, generation)

    @contextmanager
    def _using(self) -> Iterator[IValueTransformer]:
        """The transformer in use, its configuration counted as used meanwhile."""
        generation = self._enter()
        try:
            yield generation.transformer
        finally:
            self._leave(generation)

    def to_storage(self, key: str, value: bytes) -> bytes:
        with self._using() as current:
            return current.to_storage(key, value)

    def from_storage(self, key: str, data: bytes) -> bytes:
        with self._using() as current:
            return current.from_storage(key, data)

    def stale(self, key: str, data: bytes) -> bool:
        with self._using() as current:
            return is_stale(current, key, data)

    def prepare(self, key: str, reactor):
        with self._using() as current:
            return prepare(current, key, reactor)

    def health_checks(self, reload: bool) -> list:
        """
        The KMS checks to serve on ``/healthz`` and ``/readyz`` (``probes``): with
        ``reload``, one of whichever configuration is in use.
        """
        return self._generation.checks.served(reload, self._check)

    def _check(self) -> Deferred:
        generation = self._enter()
        answer = generation.checks.group()

        def left(result):
            self._leave(generation)
            return result
        return answer.addBoth(left)


def _close(generation: _Generation) -> None:
    for envelope in generation.envelopes:
        envelope.close()


def load_into(target: Swappable, path: str, served: Iterable[tuple],
              reload: bool = False, kms_v1: bool = False) -> None:
    """
    Load ``path`` and make ``target`` use it; ``EncryptionConfigError``.  ``kms_v1``:
    feature gate ``KMSv1``.
    """
    transformer, envelopes = build(cfg.load_file(path, reload), served, kms_v1)
    target.swap(transformer, envelopes)


class EncryptionReloader(FilePoller):
    """Reloads the configuration into ``target`` when the file's bytes change."""

    def __init__(self, path: str, target: Swappable, served: Callable[[], Iterable[tuple]],
                 clock, interval: float = DEFAULT_INTERVAL, kms_v1: bool = False):
        super().__init__(path, clock, "cannot read --encryption-provider-config {path}: "
                         "{error}", interval)
        self.target = target
        self.served = served
        self.kms_v1 = kms_v1

    def check(self) -> bool:
        data = self.changed()
        if data is None:
            return False
        try:
            transformer, envelopes = build(cfg.load(data, reload=True), self.served(),
                                           self.kms_v1)
        except EncryptionConfigError as error:
            log.error("--encryption-provider-config {path}: not reloaded, keeping the "
                      "previous configuration: {error}", path=self.path, error=str(error))
            return False
        self.target.swap(transformer, envelopes)
        log.info("--encryption-provider-config {path}: reloaded", path=self.path)
        return True
