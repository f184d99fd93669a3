"""
The ``kms`` provider, API v2 (upstream ``envelope/kmsv2``): envelope encryption with a
key-management plugin reached over gRPC on a UNIX socket (``platform.kms.apis.v2``).

- A data-encryption seed (32 random bytes) is made locally and sealed once by the
  plugin's ``Encrypt``; every write derives a one-use key from it
  (``aes.HKDFExtendedNonceGCM``, the storage key as AAD) and stores an
  ``EncryptedObject`` (encrypted data, the plugin's key ID, the sealed seed, the
  plugin's annotations) after the ``platform:enc:kms:v2:<name>:`` prefix.
- The plugin's ``Status`` is asked at most every ``status_interval`` seconds (upstream
  polls once a minute) when writing: a new ``key_id`` there makes a new seed, so new
  writes go under the new key while older data still reads.
- Reads look the sealed seed up in a cache (one entry per seed and key ID, at most
  ``cache_size``), and ask the plugin's ``Decrypt`` only when it is missing.

Writing never waits on the plugin where it writes.  A backend asks ``prepare`` on the
reactor before it queues a write (``transformers.prepare``): the seed is sealed and the
status asked there, as gRPC futures, one refresh at a time shared by every write that
waits; ``to_storage`` then only derives a key and encrypts, in the storage threads.  So
a plugin that hangs holds back the writes it would encrypt, for its ``timeout``, and
no other write: before, the call ran in the SQLite writer thread, and every write to
every resource waited behind it.  Only a write with no seed yet waits; once one is
sealed, writes go on with it while the status is asked in the background (upstream
writes with its current seed too, refreshed by its probe).

``Decrypt`` is still called in the thread that reads (the SQLite reader threads, the
etcd store's pool), with the configured ``timeout``.  A write that cannot get a seed
fails; a read that cannot decrypt fails with a ``TransformError`` (the object reads as
corrupt until the plugin answers).
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Optional

import attrs
import grpc
from google.protobuf.message import DecodeError
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.python.failure import Failure
from zope.interface import implementer

from platformd.protos.platform.apiserver.kmsv2.v2 import api_pb2 as _stored_pb2
from platformd.protos.platform.kms.apis.v2 import api_pb2 as _api_pb2, api_pb2_grpc
from platformd.storage.encryption.aes import SEED_SIZE, HKDFExtendedNonceGCM
from platformd.storage.encryption.lru import LRUCache
from platformd.storage.interface import TransformError
from platformd.storage.transformers import IValueTransformer

#: The plugin API version a healthy v2 plugin reports.
KMS_API_VERSION = "v2"
#: The generated messages (protoc's modules carry no type information).
api_pb2: Any = _api_pb2
stored_pb2: Any = _stored_pb2
#: Upstream polls the plugin's status once a minute.
STATUS_INTERVAL = 60.0
#: Upstream's bounds on what is stored beside the data.
MAX_KEY_ID_SIZE = 1024
MAX_DEK_SOURCE_SIZE = 1024
DEFAULT_CACHE_SIZE = 1000


class KMSError(TransformError):
    """The plugin could not be used (unreachable, too slow, unhealthy, bad answer)."""


@attrs.frozen
class _WriteState:
    key_id: str
    encrypted_source: bytes
    annotations: dict
    transformer: HKDFExtendedNonceGCM


class KMSv2Client:
    """
    The plugin's three calls, each with ``timeout``; errors are ``KMSError``.  ``status``
    and ``encrypt`` are made from the reactor, as gRPC futures whose outcome comes back
    with ``callFromThread`` (no thread waits on them); ``decrypt`` blocks the thread that
    reads.
    """

    def __init__(self, name: str, endpoint: str, timeout: float):
        self.name = name
        self.timeout = timeout
        # Making a channel connects lazily: no I/O here.
        self._channel = grpc.insecure_channel(endpoint)
        self._stub = api_pb2_grpc.KeyManagementServiceStub(self._channel)

    def _error(self, what: str, error: grpc.RpcError) -> KMSError:
        code = error.code() if hasattr(error, "code") else None
        details = error.details() if hasattr(error, "details") else error
        return KMSError(f"failed to {what} with KMS provider {self.name}: "
                        f"{getattr(code, 'name', code)}: {details}")

    def _call_async(self, reactor, what: str, method, request) -> Deferred:
        """Deferred of ``method``'s answer to ``request`` (fired on the reactor)."""
        answered: Deferred = Deferred()

        def done(future):
            try:
                answered.callback(future.result())
            except grpc.RpcError as error:  # the channel closed too: CANCELLED
                answered.errback(Failure(self._error(what, error)))
        future = method.future(request, timeout=self.timeout)
        future.add_done_callback(lambda future: reactor.callFromThread(done, future))
        return answered

    def status(self, reactor) -> Deferred:
        return self._call_async(reactor, "get status", self._stub.Status,
                                api_pb2.StatusRequest())

    def encrypt(self, reactor, plaintext: bytes) -> Deferred:
        return self._call_async(reactor, "encrypt DEK", self._stub.Encrypt,
                                api_pb2.EncryptRequest(plaintext=plaintext,
                                                       uid=str(uuid.uuid4())))

    def decrypt(self, obj) -> bytes:
        try:
            response = self._stub.Decrypt(api_pb2.DecryptRequest(
                ciphertext=obj.encryptedDEKSource, uid=str(uuid.uuid4()), key_id=obj.keyID,
                annotations=dict(obj.annotations)), timeout=self.timeout)
        except grpc.RpcError as error:
            raise self._error("decrypt DEK", error) from None
        return response.plaintext

    def close(self) -> None:
        self._channel.close()


@implementer(IValueTransformer)
class KMSv2Envelope:
    """The transformer after the provider's prefix (see module docstring). Thread-safe."""

    def __init__(self, client: KMSv2Client, cache_size: int = DEFAULT_CACHE_SIZE,
                 status_interval: float = STATUS_INTERVAL, clock=time.monotonic):
        self.client = client
        self.status_interval = status_interval
        self.clock = clock
        #: What writes use; replaced whole on the reactor, read by the storage threads.
        self._state: Optional[_WriteState] = None
        #: When the status last answered healthy (reactor only).
        self._checked: Optional[float] = None
        #: The refresh under way, and the writes waiting for its outcome (reactor only).
        self._refreshing = False
        self._waiting: list = []
        #: (sealed seed, key ID) → its transformer.
        self._cache = LRUCache(cache_size)
        #: How many times the plugin was asked to Decrypt (tests, metrics).
        self.decrypt_calls = 0

    # writing

    def prepare(self, key: str, reactor) -> Optional[Deferred]:
        """
        On the reactor, before a write is queued: None when ``to_storage`` can write at
        once, else a Deferred firing once it can (a seed is sealed) or failing with the
        plugin's ``KMSError``.  A status check that is due starts in the background.
        """
        due = self._checked is None or self.clock() - self._checked >= self.status_interval
        if due and not self._refreshing:
            self._refreshing = True
            ensureDeferred(self._refresh(reactor)).addBoth(self._refreshed)
        if self._state is not None:
            return None
        waiting: Deferred = Deferred()
        self._waiting.append(waiting)
        return waiting

    async def _refresh(self, reactor) -> None:
        """Ask the status; seal a new seed for a new key ID (or the first)."""
        key_id = self._healthy_key_id(await self.client.status(reactor))
        if self._state is None or self._state.key_id != key_id:
            seed = os.urandom(SEED_SIZE)
            self._state = self._new_state(seed, await self.client.encrypt(reactor, seed))
        self._checked = self.clock()

    def _refreshed(self, outcome) -> None:
        """Hand the outcome to the writes that waited; a failure is theirs only."""
        self._refreshing = False
        waiting, self._waiting = self._waiting, []
        for write in waiting:
            if write.called:  # cancelled (its request's deadline)
                continue
            if self._state is not None:
                write.callback(None)
            else:
                assert isinstance(outcome, Failure)
                write.errback(Failure(outcome.value))

    def to_storage(self, key: str, value: bytes) -> bytes:
        state = self._state
        if state is None:  # not prepared (a configuration swapped in since): upstream's
            raise KMSError("got unexpected nil transformer")
        obj = stored_pb2.EncryptedObject(
            encryptedData=state.transformer.to_storage(key, value), keyID=state.key_id,
            encryptedDEKSource=state.encrypted_source, annotations=state.annotations,
            encryptedDEKSourceType=stored_pb2.HKDF_SHA256_XNONCE_AES_GCM_SEED)
        return obj.SerializeToString()

    def _healthy_key_id(self, response) -> str:
        problems = []
        if response.healthz != "ok":
            problems.append(f"got unexpected healthz status: {response.healthz}")
        if response.version != KMS_API_VERSION:
            problems.append(f"expected KMSv2 API version {KMS_API_VERSION}, "
                            f"got {response.version}")
        if not response.key_id:
            problems.append(f"expected KMSv2 KeyID to be set, got {response.key_id}")
        if problems:
            detail = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
            raise KMSError(f"kmsv2 Provider {self.client.name} is not healthy, error: {detail}")
        return response.key_id

    def _new_state(self, seed: bytes, response) -> _WriteState:
        if not response.key_id or len(response.key_id) > MAX_KEY_ID_SIZE:
            raise KMSError(f"KMS provider {self.client.name} returned an invalid keyID")
        if not response.ciphertext or len(response.ciphertext) > MAX_DEK_SOURCE_SIZE:
            raise KMSError(f"KMS provider {self.client.name} returned an invalid "
                           "encryptedDEKSource")
        state = _WriteState(response.key_id, response.ciphertext, dict(response.annotations),
                            HKDFExtendedNonceGCM(seed))
        self._cache.add((state.encrypted_source, state.key_id), state.transformer)
        return state

    # reading

    def from_storage(self, key: str, data: bytes) -> bytes:
        obj = stored_pb2.EncryptedObject()
        try:
            obj.ParseFromString(data)
        except DecodeError as error:
            raise TransformError(f"failed to unmarshal encrypted object: {error}") from None
        if not obj.keyID:
            raise TransformError("failed to validate encrypted object: keyID is empty")
        if not obj.encryptedDEKSource:
            raise TransformError("failed to validate encrypted object: "
                                 "encrypted DEK source is empty")
        return self._transformer(obj).from_storage(key, obj.encryptedData)

    def _transformer(self, obj):
        cache_key = (obj.encryptedDEKSource, obj.keyID)
        found = self._cache.get(cache_key)
        if found is not None:
            return found
        self.decrypt_calls += 1
        seed = self.client.decrypt(obj)
        if obj.encryptedDEKSourceType == stored_pb2.HKDF_SHA256_XNONCE_AES_GCM_SEED:
            try:
                transformer = HKDFExtendedNonceGCM(seed)
            except ValueError as error:
                raise TransformError(str(error)) from None
        else:
            raise TransformError(f"unsupported encrypted DEK source type "
                                 f"{obj.encryptedDEKSourceType}")
        self._cache.add(cache_key, transformer)
        return transformer

    def close(self) -> None:
        self.client.close()
