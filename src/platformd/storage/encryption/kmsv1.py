"""
The ``kms`` provider, API v1 (upstream ``envelope.envelopeTransformer`` and
``envelope.gRPCService``; deprecated upstream, behind feature gate ``KMSv1``).

Every write makes a fresh 32-byte data-encryption key (DEK), has the plugin's
``Encrypt`` seal it, and stores, after the ``platform:enc:kms:v1:<name>:`` prefix::

    uint16 big-endian length of the sealed DEK ‖ sealed DEK ‖ AES-GCM(data)

AES-GCM is ``aes.GCM`` (random nonce, the storage key as authenticated data).  Reads
try AES-GCM, then AES-CBC (upstream's ``unionTransformers``: v1.24 and earlier wrote
CBC; such a read is *stale*, so an unchanged update rewrites it with GCM).  The
decrypted DEK's transformer is cached by its sealed form (``cachesize``
entries, LRU; negative turns the cache off), so a read asks ``Decrypt`` only on a miss.

The plugin speaks ``platform.kms.apis.v1beta1``; before its first ``Encrypt`` or
``Decrypt`` the client asks ``Version`` once and refuses a plugin that is not
``v1beta1`` (upstream's interceptor).  Every call waits for the connection (gRPC
wait-for-ready, as upstream) up to ``timeout``, and runs in the thread that transforms
(the SQLite writer and reader threads), never on the reactor.  Plugin errors are
upstream's unwrapped gRPC status text; as ``KMSError`` a write fails and a read is a
corrupt object.  The health check is ``KMSv1Probe`` (upstream's ``kmsPluginProbe``).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from typing import Any, Optional

import grpc
from twisted.internet.defer import Deferred, succeed
from twisted.internet.threads import deferToThreadPool
from zope.interface import implementer

from platformd.util.deferreds import Shared
from platformd.protos.platform.kms.apis.v1beta1 import api_pb2 as _api_pb2, api_pb2_grpc
from platformd.storage.encryption.aes import CBC, GCM
from platformd.storage.encryption.fielderrors import aggregate
from platformd.storage.encryption.kms import KMSError, status_text
from platformd.storage.encryption.lru import LRUCache
from platformd.storage.encryption.probes import LastAnswer
from platformd.storage.interface import TransformError
from platformd.storage.transformers import IValueTransformer

#: The plugin API version (upstream ``kmsapiVersion``).
KMS_API_VERSION = "v1beta1"
#: Upstream's ``generateKey(32)``.
DEK_SIZE = 32
#: cryptobyte's 2-byte length prefix.
_LENGTH = struct.Struct(">H")
#: How many CBC reads are remembered as stale (see ``KMSv1Envelope.stale``).
STALE_MEMORY = 1024
api_pb2: Any = _api_pb2


class KMSv1Client:
    """Upstream's v1 ``gRPCService``: Encrypt and Decrypt, after one Version check."""

    def __init__(self, name: str, endpoint: str, timeout: float):
        self.name = name
        self.timeout = timeout
        # Making a channel connects lazily: no I/O here.
        self._channel = grpc.insecure_channel(endpoint)
        self._stub = api_pb2_grpc.KeyManagementServiceStub(self._channel)
        self._lock = threading.Lock()
        self._version_checked = False

    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout, wait_for_ready=True)
        except grpc.RpcError as error:
            raise KMSError(status_text(error)) from None

    def check_version(self) -> None:
        with self._lock:
            if self._version_checked:
                return
            try:
                response = self._call(self._stub.Version,
                                      api_pb2.VersionRequest(version=KMS_API_VERSION))
            except KMSError as error:
                raise KMSError(f"failed get version from remote KMS provider: {error}") \
                    from None
            if response.version != KMS_API_VERSION:
                raise KMSError(f"KMS provider api version {response.version} is not "
                               f"supported, only {KMS_API_VERSION} is supported now")
            self._version_checked = True

    def encrypt(self, plain: bytes) -> bytes:
        self.check_version()
        return self._call(self._stub.Encrypt, api_pb2.EncryptRequest(
            plain=plain, version=KMS_API_VERSION)).cipher

    def decrypt(self, cipher: bytes) -> bytes:
        self.check_version()
        return self._call(self._stub.Decrypt, api_pb2.DecryptRequest(
            cipher=cipher, version=KMS_API_VERSION)).plain

    def close(self) -> None:
        self._channel.close()


@implementer(IValueTransformer)
class _GCMOrCBC:
    """Upstream's ``unionTransformers{gcm, cbc}`` for one DEK: writes GCM, reads either."""

    def __init__(self, dek: bytes):
        if len(dek) not in (16, 24, 32):
            raise TransformError(f"crypto/aes: invalid key size {len(dek)}")
        self._gcm, self._cbc = GCM(dek), CBC(dek)

    def to_storage(self, key: str, value: bytes) -> bytes:
        return self._gcm.to_storage(key, value)

    def from_storage(self, key: str, data: bytes) -> bytes:
        return self.read(key, data)[0]

    def read(self, key: str, data: bytes) -> tuple:
        """``(value, whether the CBC fallback read it)``."""
        errors = []
        for index, transformer in enumerate((self._gcm, self._cbc)):
            try:
                return transformer.from_storage(key, data), index > 0
            except TransformError as error:
                errors.append(str(error))
        raise TransformError(aggregate(errors))


@implementer(IValueTransformer)
class KMSv1Envelope:
    """The transformer after the provider's prefix (see module docstring). Thread-safe."""

    #: The configuration's ``apiVersion`` of this provider.
    api_version = "v1"

    def __init__(self, client: KMSv1Client, cache_size: int):
        self.client = client
        #: Sealed DEK → its transformer; upstream's cache is off when cachesize <= 0.
        self._cache = LRUCache(cache_size)
        #: (storage key, last cipher block) of values the CBC fallback read lately.
        self._cbc_reads = LRUCache(STALE_MEMORY)
        #: How many times the plugin was asked to Decrypt (tests, metrics).
        self.decrypt_calls = 0

    def to_storage(self, key: str, value: bytes) -> bytes:
        dek = os.urandom(DEK_SIZE)
        sealed = self.client.encrypt(dek)
        if len(sealed) > 0xFFFF:
            raise TransformError(f"cryptobyte: pending child length {len(sealed)} exceeds "
                                 "2-byte length prefix")
        transformer = _GCMOrCBC(dek)
        self._cache.add(sealed, transformer)
        return _LENGTH.pack(len(sealed)) + sealed + transformer.to_storage(key, value)

    def from_storage(self, key: str, data: bytes) -> bytes:
        if len(data) < _LENGTH.size or len(data) < _LENGTH.size + _LENGTH.unpack_from(data)[0]:
            raise TransformError("invalid data encountered by envelope transformer: failed "
                                 "to read uint16 length prefixed data")
        end = _LENGTH.size + _LENGTH.unpack_from(data)[0]
        sealed = data[_LENGTH.size:end]
        transformer = self._cache.get(sealed)
        if transformer is None:
            self.decrypt_calls += 1
            transformer = _GCMOrCBC(self.client.decrypt(sealed))
            self._cache.add(sealed, transformer)
        value, fallback = transformer.read(key, data[end:])
        if fallback:
            self._cbc_reads.add((key, data[-16:]), True)
        return value

    def stale(self, key: str, data: bytes) -> bool:
        """
        Read by the CBC fallback (upstream's ``unionTransformers`` answers stale when
        other than its first read).  Asked right after ``from_storage`` by the same
        storage thread; remembering those reads spares a second decryption per read.
        """
        return self._cbc_reads.get((key, data[-16:])) is not None

    def health_check(self, reactor) -> "KMSv1Probe":
        return KMSv1Probe(self.client, reactor)

    def close(self) -> None:
        self.client.close()


class KMSv1Probe:
    """
    upstream's ``kmsPluginProbe``: ``ping`` sealed by ``Encrypt`` and unsealed by
    ``Decrypt``, each within the provider's timeout, in a thread of the reactor's pool
    (the client blocks); the answer kept as ``probes.LastAnswer`` says, one probe at a
    time.  Calling it is a Deferred of None or upstream's reason.
    """

    def __init__(self, client: KMSv1Client, reactor, clock=time.monotonic):
        self.client = client
        self._last = LastAnswer(clock)
        self._probe = Shared(lambda: deferToThreadPool(
            reactor, reactor.getThreadPool(), self._round_trip).addCallback(self._last.record))

    def __call__(self) -> Deferred:
        if self._last.fresh():
            return succeed(self._last.reason)
        return self._probe.join()

    def _round_trip(self) -> Optional[str]:
        try:
            sealed = self.client.encrypt(b"ping")
        except KMSError as error:
            return self._failed("encrypt", error)
        try:
            self.client.decrypt(sealed)
        except KMSError as error:
            return self._failed("decrypt", error)
        return None

    def _failed(self, section: str, error: KMSError) -> str:
        return (f"failed to perform {section} section of the healthz check for KMS "
                f"Provider {self.client.name}, error: {error}")
