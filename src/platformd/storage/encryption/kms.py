"""
The ``kms`` provider, API v2 (upstream ``envelope/kmsv2``): envelope encryption with a
key-management plugin reached over gRPC on a UNIX socket (``platform.kms.apis.v2``).

- A data-encryption seed (32 random bytes) is made locally and sealed once by the
  plugin's ``Encrypt``; every write derives a one-use key from it
  (``aes.HKDFExtendedNonceGCM``, the storage key as AAD) and stores an
  ``EncryptedObject`` (encrypted data, the plugin's key ID, the sealed seed, the
  plugin's annotations) after the ``platform:enc:kms:v2:<name>:`` prefix.
- The plugin's ``Status`` is asked at most every ``status_interval`` seconds (upstream
  polls once a minute) when writing, and by the health check (``check``, cached as
  ``probes.LastAnswer`` says): a new ``key_id`` there makes a new seed, so new writes
  go under the new key while older data still reads.  Both are upstream's probe
  (``kmsv2PluginProbe.check``), with its words: a failed call is ``failed to perform
  status section of the healthz check for KMS Provider <name>, error: <gRPC error>``,
  a bad answer ``kmsv2 Provider <name> is not healthy, error: ...``.
- Reads look the sealed seed up in a cache (one entry per seed and key ID, at most
  ``cache_size``), and ask the plugin's ``Decrypt`` only when it is missing.

Writing never waits on the plugin where it writes.  A backend asks ``prepare`` on the
reactor before it queues a write (``transformers.prepare``): the seed is sealed and the
status asked there, as gRPC futures, one refresh at a time shared by every write and
health check that waits (``deferreds.Shared``); ``to_storage`` then only derives a key
and encrypts, in the storage threads.  So a plugin that hangs holds back the writes it
would encrypt, for its ``timeout``, and no other write: before, the call ran in the
SQLite writer thread, and every write to every resource waited behind it.  Only a write with no seed yet waits; once one is
sealed, writes go on with it while the status is asked in the background (upstream
writes with its current seed too, refreshed by its probe).

``Decrypt`` is still called in the thread that reads (the SQLite reader threads, the
etcd store's pool), with the configured ``timeout``.  A write that cannot get a seed
fails with the probe's error; a read that cannot decrypt fails with a
``TransformError`` (the object reads as corrupt until the plugin answers).

Left out from upstream: the seed does not expire (upstream refuses writes three minutes
after its probe last succeeded, ``kmsv2PluginWriteDEKSourceMaxTTL``), so the words of a
failed rotation leave out upstream's ``expirationTimestamp``; the annotations an
``Encrypt`` returns are not validated.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from typing import Any, Optional

import attrs
import grpc
from google.protobuf.message import DecodeError
from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.python.failure import Failure
from zope.interface import implementer

from platformd.util.deferreds import Shared
from platformd.protos.platform.apiserver.kmsv2.v2 import api_pb2 as _stored_pb2
from platformd.protos.platform.kms.apis.v2 import api_pb2 as _api_pb2, api_pb2_grpc
from platformd.storage.encryption.aes import SEED_SIZE, HKDFExtendedNonceGCM
from platformd.storage.encryption.fielderrors import aggregate
from platformd.storage.encryption.lru import LRUCache
from platformd.storage.encryption.probes import LastAnswer
from platformd.storage.interface import TransformError
from platformd.storage.transformers import IValueTransformer

#: The plugin API versions a healthy v2 plugin reports (upstream ``KMSAPIVersionv2``,
#: ``KMSAPIVersionv2beta1``), the first named in the error.
KMS_API_VERSIONS = ("v2", "v2beta1")
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


def status_text(error: grpc.RpcError) -> str:
    """A gRPC error as grpc-go's ``status.Error`` prints it."""
    code = error.code() if hasattr(error, "code") else None
    name = "".join(part.capitalize() for part in getattr(code, "name", "Unknown").split("_"))
    details = error.details() if hasattr(error, "details") else str(error)
    return f"rpc error: code = {name} desc = {details}"


def key_id_problem(key_id: str) -> Optional[str]:
    """upstream's ``ValidateKeyID`` (sizes in bytes)."""
    if not key_id:
        return "keyID is empty"
    size = len(key_id.encode())
    if size > MAX_KEY_ID_SIZE:
        return f"keyID is {size} bytes, which exceeds the max size of {MAX_KEY_ID_SIZE}"
    return None


def dek_source_problem(source: bytes) -> Optional[str]:
    """upstream's ``validateEncryptedDEKSource``."""
    if not source:
        return "encrypted DEK source is empty"
    if len(source) > MAX_DEK_SOURCE_SIZE:
        return (f"encrypted DEK source is {len(source)} bytes, which exceeds the max size "
                f"of {MAX_DEK_SOURCE_SIZE}")
    return None


def _hash(text: str) -> str:
    """upstream's ``GetHashIfNotEmpty``, how key IDs appear in its errors."""
    return f"sha256:{hashlib.sha256(text.encode()).hexdigest()}" if text else ""


@attrs.frozen
class _WriteState:
    key_id: str
    encrypted_source: bytes
    annotations: dict
    transformer: HKDFExtendedNonceGCM


class KMSv2Client:
    """
    The plugin's three calls, each with ``timeout`` and waiting for the connection until
    then (gRPC wait-for-ready, as upstream's client); errors are ``KMSError``.  ``status``
    and ``encrypt`` are made from the reactor, as gRPC futures whose outcome comes back
    with ``callFromThread`` (no thread waits on them), failing with gRPC's words for the
    probe to wrap in upstream's; ``decrypt`` blocks the thread that reads.
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

    def _call_async(self, reactor, method, request) -> Deferred:
        """Deferred of ``method``'s answer to ``request`` (fired on the reactor)."""
        answered: Deferred = Deferred()

        def done(future):
            try:
                answered.callback(future.result())
            except grpc.RpcError as error:  # the channel closed too: CANCELLED
                answered.errback(Failure(KMSError(status_text(error))))
        future = method.future(request, timeout=self.timeout, wait_for_ready=True)
        future.add_done_callback(lambda future: reactor.callFromThread(done, future))
        return answered

    def status(self, reactor) -> Deferred:
        return self._call_async(reactor, self._stub.Status, api_pb2.StatusRequest())

    def encrypt(self, reactor, plaintext: bytes, uid: str) -> Deferred:
        return self._call_async(reactor, self._stub.Encrypt,
                                api_pb2.EncryptRequest(plaintext=plaintext, uid=uid))

    def decrypt(self, obj) -> bytes:
        try:
            response = self._stub.Decrypt(api_pb2.DecryptRequest(
                ciphertext=obj.encryptedDEKSource, uid=str(uuid.uuid4()), key_id=obj.keyID,
                annotations=dict(obj.annotations)), timeout=self.timeout,
                wait_for_ready=True)
        except grpc.RpcError as error:
            raise self._error("decrypt DEK", error) from None
        return response.plaintext

    def close(self) -> None:
        self._channel.close()


@implementer(IValueTransformer)
class KMSv2Envelope:
    """The transformer after the provider's prefix (see module docstring). Thread-safe."""

    #: The configuration's ``apiVersion`` of this provider.
    api_version = "v2"

    def __init__(self, client: KMSv2Client, cache_size: int = DEFAULT_CACHE_SIZE,
                 status_interval: float = STATUS_INTERVAL, clock=time.monotonic):
        self.client = client
        self.status_interval = status_interval
        self.clock = clock
        #: What writes use; replaced whole on the reactor, read by the storage threads.
        self._state: Optional[_WriteState] = None
        #: When the status last answered healthy (reactor only).
        self._checked: Optional[float] = None
        #: The API version of the first healthy status (upstream's must not change).
        self._version: Optional[str] = None
        #: The probe under way, shared by the writes and health checks waiting for it.
        self._probe = Shared(lambda reactor: ensureDeferred(self._refresh(reactor)))
        #: The last probe's answer, for the health check (reactor only).
        self._last = LastAnswer(clock)
        #: (sealed seed, key ID) → its transformer.
        self._cache = LRUCache(cache_size)
        #: How many times the plugin was asked to Decrypt (tests, metrics).
        self.decrypt_calls = 0

    # writing

    def prepare(self, key: str, reactor) -> Optional[Deferred]:
        """
        On the reactor, before a write is queued: None when ``to_storage`` can write at
        once, else a Deferred firing once it can (a seed is sealed) or failing with the
        probe's ``KMSError``.  A status check that is due starts in the background.
        """
        due = self._checked is None or self.clock() - self._checked >= self.status_interval
        if due and not self._probe.running:
            # Its failure is for the health check (and the log) to report, not this write.
            self._probe.join(reactor).addErrback(lambda _: None)
        if self._state is not None:
            return None
        return self._probe.join(reactor).addErrback(self._unless_seeded)

    def _unless_seeded(self, failure):
        """A failed probe fails a waiting write only when there is no seed to write with."""
        return failure if self._state is None else None

    def health_check(self, reactor):
        """This provider's check for ``probes.ProviderChecks``."""
        return lambda: self.check(reactor)

    def check(self, reactor) -> Deferred:
        """
        The health check (a Deferred of None or the reason): the last probe's answer
        while fresh, else a probe (joining one under way).
        """
        if self._last.fresh():
            return succeed(self._last.reason)
        return self._probe.join(reactor).addCallbacks(lambda _: None, lambda f: str(f.value))

    async def _refresh(self, reactor) -> None:
        """upstream's ``kmsv2PluginProbe.check`` (no cache): the status, then rotation."""
        name = self.client.name
        try:
            response = await self.client.status(reactor)
        except KMSError as error:
            raise self._answer(f"failed to perform status section of the healthz check for "
                               f"KMS Provider {name}, error: {error}") from None
        problems = self._status_problems(response)
        if key_id_problem(response.key_id) is None:
            problems.append(await self._rotate(reactor, response.key_id))
        problems = [problem for problem in problems if problem is not None]
        if problems:
            raise self._answer(f"kmsv2 Provider {name} is not healthy, error: "
                               f"{aggregate(problems)}")
        self._last.record(None)
        self._checked = self.clock()

    def _answer(self, reason: str) -> KMSError:
        """The probe's failure, remembered for the health check."""
        self._last.record(reason)
        return KMSError(reason)

    def _status_problems(self, response) -> list:
        """upstream's ``isKMSv2ProviderHealthyAndMaybeRotateDEK`` before the rotation."""
        problems = []
        if response.healthz != "ok":
            problems.append(f"got unexpected healthz status: {response.healthz}")
        if response.version not in KMS_API_VERSIONS:
            problems.append(f"expected KMSv2 API version {KMS_API_VERSIONS[0]}, "
                            f"got {response.version}")
        else:
            self._version = self._version or response.version
            if response.version != self._version:
                problems.append("KMSv2 API version should not change after the initial "
                                f"status response version {self._version}, "
                                f"got {response.version}")
        key_problem = key_id_problem(response.key_id)
        if key_problem is not None:
            problems.append(f'got invalid KMSv2 KeyID hash "{_hash(response.key_id)}": '
                            f"{key_problem}")
        return problems

    async def _rotate(self, reactor, key_id: str) -> Optional[str]:
        """
        upstream's ``rotateDEKOnKeyIDChange``: a new seed sealed unless the current one is
        under ``key_id``; on failure the current seed stays, and its error is returned.
        """
        state = self._state
        if state is not None and state.key_id == key_id:
            return None
        uid, seed = str(uuid.uuid4()), os.urandom(SEED_SIZE)
        response, problem = None, "<nil>"
        try:
            response = await self.client.encrypt(reactor, seed, uid)
        except KMSError as error:
            problem = f"failed to encrypt DEK, error: {error}"
        else:
            try:
                generated = self._generated(seed, response)
            except KMSError as error:
                problem = str(error)
            else:
                if generated.key_id == key_id:
                    self._state = generated
                    self._cache.add((generated.encrypted_source, generated.key_id),
                                    generated.transformer)
                    return None
        return (f'failed to rotate DEK uid="{uid}", useSeed=true, errState='
                f'{"<nil>" if state is not None else "got unexpected nil transformer"}, '
                f'errGen={problem}, statusKeyIDHash="{_hash(key_id)}", '
                f'encryptKeyIDHash="{_hash(response.key_id if response else "")}", '
                f'stateKeyIDHash="{_hash(state.key_id if state is not None else "")}"')

    def _generated(self, seed: bytes, response) -> _WriteState:
        """upstream's ``GenerateTransformer`` after ``Encrypt``: its answer validated."""
        problem = dek_source_problem(response.ciphertext)
        if problem is not None:
            raise KMSError(f"failed to validate encrypted DEK source: {problem}")
        problem = key_id_problem(response.key_id)
        if problem is not None:
            raise KMSError(f"failed to validate key id: {problem}")
        return _WriteState(response.key_id, response.ciphertext, dict(response.annotations),
                           HKDFExtendedNonceGCM(seed))

    def to_storage(self, key: str, value: bytes) -> bytes:
        state = self._state
        if state is None:  # not prepared (a configuration swapped in since): upstream's
            raise KMSError("got unexpected nil transformer")
        obj = stored_pb2.EncryptedObject(
            encryptedData=state.transformer.to_storage(key, value), keyID=state.key_id,
            encryptedDEKSource=state.encrypted_source, annotations=state.annotations,
            encryptedDEKSourceType=stored_pb2.HKDF_SHA256_XNONCE_AES_GCM_SEED)
        return obj.SerializeToString()

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
        """Close the plugin's connection once the probe under way, if any, has ended."""
        if self._probe.running:
            self._probe.join().addBoth(lambda _: self.client.close())
        else:
            self.client.close()
