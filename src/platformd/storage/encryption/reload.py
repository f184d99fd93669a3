"""
The transformer a backend holds when ``--encryption-provider-config`` is given, and its
automatic reload (``--encryption-provider-config-automatic-reload``).

``Swappable`` delegates to the current ``ByKeyPrefix``; replacing it is one attribute
store, so the storage threads see either the old or the new one, never a mix.  The
``EncryptionReloader`` polls the file (``FilePoller``); a new file that does not load
keeps the old transformers and logs why, as upstream's dynamic reload does.
"""

from __future__ import annotations

from typing import Callable, Iterable

from twisted.logger import Logger
from zope.interface import implementer

from platformd.filepoll import DEFAULT_INTERVAL, FilePoller
import platformd.storage.encryption.config as cfg
from platformd.storage.encryption.build import build
from platformd.storage.encryption.errors import EncryptionConfigError
from platformd.storage.transformers import IDENTITY, IValueTransformer, is_stale, prepare

log = Logger()


@implementer(IValueTransformer)
class Swappable:
    """A transformer whose contents can be replaced while in use (thread-safe)."""

    def __init__(self, current: IValueTransformer = IDENTITY):
        self.current = current
        #: The KMS envelopes of the current configuration (closed when replaced).
        self.envelopes: list = []

    def swap(self, current: IValueTransformer, envelopes: Iterable = ()) -> None:
        self.current, self.envelopes = current, list(envelopes)

    def to_storage(self, key: str, value: bytes) -> bytes:
        return self.current.to_storage(key, value)

    def from_storage(self, key: str, data: bytes) -> bytes:
        return self.current.from_storage(key, data)

    def stale(self, key: str, data: bytes) -> bool:
        return is_stale(self.current, key, data)

    def prepare(self, key: str, reactor):
        return prepare(self.current, key, reactor)


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
