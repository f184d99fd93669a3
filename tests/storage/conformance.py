"""
The IStorage contract as tests, written once and run against every backend.

A backend's tests mix these into a trial ``TestCase`` that defines the hooks:

- ``make_storage(**options)``: a coroutine giving a started, empty store, built with
  ``options`` (``transformer=``), that is stopped at cleanup;
- ``stored_values(store)``: every version's value as the backend holds it (in memory or
  on disk), in revision order, tombstones left out;
- ``put_stored(store, key, data)``: make ``data`` the stored bytes of ``key``'s current
  version, as if the disk had been edited.

``StorageConformance`` is the contract; ``SealedConformance`` is the same contract with
every value sealed at rest by ``SealingTransformer``, so everything a store hands back
(reads, ranges, watch events and their ``prev``, write results, errors) is shown to be
plaintext; ``TransformerConformance`` checks the seam itself; ``PrepareConformance``
that a transformer still to be prepared (KMS v2) holds back only its own writes;
``SizeLimitConformance`` is what the durable backends refuse as etcd does.  The tests await every
Deferred, so they serve synchronous and threaded backends alike.
"""

from __future__ import annotations

import hashlib

import attrs

from twisted.internet.defer import Deferred
from zope.interface import implementer
from zope.interface.verify import verifyObject

from platformd import errors
from platformd.storage.interface import (
    DELETE,
    PUT,
    CompactedError,
    CorruptValue,
    Event,
    FutureRevisionError,
    IStorage,
    IWatch,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    RevisionMismatchError,
    TransformError,
)
from platformd.storage.mvcc import Create, Delete, Update
from platformd.storage.transformers import IdentityTransformer, IValueTransformer


@implementer(IValueTransformer)
class SealingTransformer:
    """
    A stand-in for encryption: ``sealed:``, a tag binding the value to its key (the key
    as authenticated data), then the value's bytes XORed.  Reading checks both.
    """

    PREFIX = b"sealed:"

    def to_storage(self, key: str, value: bytes) -> bytes:
        return self.PREFIX + self._tag(key, value) + self._flip(value)

    def from_storage(self, key: str, data: bytes) -> bytes:
        if not data.startswith(self.PREFIX):
            raise TransformError(f"{key}: not sealed")
        tag, body = data[len(self.PREFIX):][:8], data[len(self.PREFIX) + 8:]
        value = self._flip(body)
        if tag != self._tag(key, value):
            raise TransformError(f"{key}: sealed for another key")
        return value

    @staticmethod
    def _tag(key: str, value: bytes) -> bytes:
        return hashlib.sha256(key.encode() + b"\0" + value).digest()[:8]

    @staticmethod
    def _flip(data: bytes) -> bytes:
        return bytes(byte ^ 0x5A for byte in data)


class GatedTransformer(SealingTransformer):
    """
    ``SealingTransformer`` that cannot write a key under ``/gated/`` until prepared, as a
    KMS v2 plugin cannot before it has sealed a seed: ``prepare`` answers a Deferred
    the test fires (``gates``) until ``ready``.
    """

    def __init__(self):
        self.ready = False
        self.gates: list = []

    def prepare(self, key: str, reactor):
        if self.ready or not key.startswith("/gated/"):
            return None
        gate: Deferred = Deferred()
        self.gates.append(gate)
        return gate

    def to_storage(self, key: str, value: bytes) -> bytes:
        assert self.ready or not key.startswith("/gated/"), f"{key} written unprepared"
        return super().to_storage(key, value)


class Sink:
    """A watch sink that records its events and lets a test wait for them."""

    def __init__(self):
        self.events = []
        self._waiting = []  # (count, Deferred)

    def __call__(self, event):
        self.events.append(event)
        ready = [waiter for waiter in self._waiting if waiter[0] <= len(self.events)]
        for waiter in ready:
            self._waiting.remove(waiter)
            waiter[1].callback(None)

    def wait(self, count: int) -> Deferred:
        """Fires once ``count`` events have arrived."""
        waiter = Deferred()
        if len(self.events) >= count:
            waiter.callback(None)
        else:
            self._waiting.append((count, waiter))
        return waiter


def created(kv: KeyValue) -> Event:
    return Event(PUT, kv, None)


async def write_history(store) -> list:
    """
    Five writes: create /a/1 and /a/2, update /a/1, create /b/1, delete /a/2.  The
    versions they made, in order.
    """
    return [
        await store.create("/a/1", b"one"),
        await store.create("/a/2", b"two"),
        await store.update("/a/1", b"uno"),
        await store.create("/b/1", b"bee"),
        await store.delete("/a/2"),
    ]


class StorageConformance:
    """Tests every IStorage backend passes (see module docstring)."""

    async def test_provides_interfaces(self):
        """The store provides IStorage and its watches IWatch."""
        store = await self.make_storage()
        self.assertTrue(verifyObject(IStorage, store))
        self.assertTrue(verifyObject(IWatch, store.watch("", store.revision, Sink())))

    async def test_revisions_increase(self):
        """Creates, updates and deletes take ever newer revisions; updates keep create_revision."""
        store = await self.make_storage()
        one, two, uno, bee, gone = await write_history(store)
        revisions = [kv.mod_revision for kv in (one, two, uno, bee, gone)]
        self.assertEqual(revisions, sorted(set(revisions)))
        self.assertEqual(store.revision, gone.mod_revision)
        self.assertEqual(uno, KeyValue("/a/1", b"uno", one.create_revision, uno.mod_revision))
        self.assertEqual(one.create_revision, one.mod_revision)

    async def test_create_existing(self):
        """A second create of a key fails with KeyExistsError and changes nothing."""
        store = await self.make_storage()
        first = await store.create("/k", b"1")
        error = await self.assertFailure(store.create("/k", b"2"), KeyExistsError)
        self.assertEqual(error.key, "/k")
        self.assertEqual(store.revision, first.mod_revision)
        self.assertEqual(await store.get("/k"), first)

    async def test_stale_compare_and_swap(self):
        """An update or delete at a stale revision fails, carrying the stored version."""
        store = await self.make_storage()
        first = await store.create("/k", b"1")
        second = await store.update("/k", b"2", expected_revision=first.mod_revision)
        for write in (store.update("/k", b"3", expected_revision=first.mod_revision),
                      store.delete("/k", expected_revision=first.mod_revision)):
            error = await self.assertFailure(write, RevisionMismatchError)
            self.assertEqual((error.key, error.current), ("/k", second))
        self.assertEqual(await store.get("/k"), second)
        self.assertEqual(store.revision, second.mod_revision)

    async def test_missing_key(self):
        """Updating or deleting a key that is absent, or deleted, fails with KeyNotFoundError."""
        store = await self.make_storage()
        await store.create("/gone", b"1")
        await store.delete("/gone")
        for key in ("/never", "/gone"):
            for write in (store.update(key, b"x"), store.delete(key),
                          store.update(key, b"x", expected_revision=1)):
                error = await self.assertFailure(write, KeyNotFoundError)
                self.assertEqual(error.key, key)

    async def test_unconditional_update(self):
        """An update without an expected revision replaces whatever is stored."""
        store = await self.make_storage()
        first = await store.create("/k", b"1")
        await store.update("/k", b"2")
        third = await store.update("/k", b"3")
        self.assertEqual(third, KeyValue("/k", b"3", first.create_revision, store.revision))
        self.assertEqual(await store.get("/k"), third)

    async def test_get(self):
        """get gives the current version, and None for a key never written or deleted."""
        store = await self.make_storage()
        one, two, uno, bee, gone = await write_history(store)
        self.assertEqual(await store.get("/a/1"), uno)
        self.assertIsNone(await store.get("/a/2"))
        self.assertIsNone(await store.get("/a"))

    async def test_range_prefix(self):
        """range gives the keys under a prefix, in key order, at the current revision."""
        store = await self.make_storage()
        for key in ("/a/2", "/b/1", "/a/1", "/a1", "/a/10"):
            await store.create(key, key.encode())
        result = await store.range("/a/")
        self.assertEqual([kv.key for kv in result.kvs], ["/a/1", "/a/10", "/a/2"])
        self.assertEqual([kv.value for kv in result.kvs], [b"/a/1", b"/a/10", b"/a/2"])
        self.assertEqual(result.revision, store.revision)
        everything = await store.range("")
        self.assertEqual([kv.key for kv in everything.kvs],
                         ["/a/1", "/a/10", "/a/2", "/a1", "/b/1"])

    async def test_range_at_older_revision(self):
        """range at an older revision gives the state as it was then."""
        store = await self.make_storage()
        one, two, uno, bee, gone = await write_history(store)
        then = await store.range("/", two.mod_revision)
        self.assertEqual(then.kvs, [one, two])
        self.assertEqual(then.revision, two.mod_revision)
        self.assertEqual((await store.range("/a/", uno.mod_revision)).kvs, [uno, two])
        self.assertEqual((await store.range("/", 0)).kvs, [])
        self.assertEqual((await store.range("/", store.revision)).kvs, [uno, bee])

    async def test_range_at_future_revision(self):
        """range at a revision the store has not reached fails with FutureRevisionError."""
        store = await self.make_storage()
        await write_history(store)
        error = await self.assertFailure(store.range("/", store.revision + 1),
                                         FutureRevisionError)
        self.assertEqual((error.requested, error.current), (store.revision + 1, store.revision))

    async def test_watch_from_zero(self):
        """A watch from revision 0 gets every event under its prefix, in order, then live ones."""
        store = await self.make_storage()
        one, two, uno, bee, gone = await write_history(store)
        sink = Sink()
        store.watch("/a/", 0, sink)
        await sink.wait(4)
        three = await store.create("/a/3", b"three")
        await sink.wait(5)
        self.assertEqual(sink.events, [
            created(one), created(two), Event(PUT, uno, one), Event(DELETE, gone, two),
            created(three),
        ])

    async def test_watch_from_middle(self):
        """A watch from a revision gets only the events after it."""
        store = await self.make_storage()
        one, two, uno, bee, gone = await write_history(store)
        sink = Sink()
        store.watch("/", uno.mod_revision, sink)
        await sink.wait(2)
        again = await store.update("/b/1", b"bee2", expected_revision=bee.mod_revision)
        await sink.wait(3)
        self.assertEqual(sink.events, [created(bee), Event(DELETE, gone, two),
                                       Event(PUT, again, bee)])

    async def test_watch_from_future_revision(self):
        """A watch from a revision not reached yet gets only the events after it."""
        store = await self.make_storage()
        sink = Sink()
        store.watch("/", store.revision + 2, sink)
        for n in range(3):
            await store.create(f"/{n}", b"")
        self.assertEqual([event.kv.key for event in sink.events], ["/2"])

    async def test_watch_before_acknowledgement(self):
        """A live watch has the event of a write before the write's Deferred fires."""
        store = await self.make_storage()
        sink = Sink()
        store.watch("/", store.revision, sink)
        seen_at_acknowledgement = []

        def acknowledged(kv):
            seen_at_acknowledgement.extend(sink.events)
            return kv

        kv = await store.create("/k", b"1").addCallback(acknowledged)
        self.assertEqual(seen_at_acknowledgement, [created(kv)])

    async def test_delete_event(self):
        """A DELETE event carries the last value, the deletion's revision and the last version."""
        store = await self.make_storage()
        sink = Sink()
        store.watch("/", store.revision, sink)
        kv = await store.create("/k", b"last")
        deleted = await store.delete("/k", expected_revision=kv.mod_revision)
        self.assertEqual(deleted, KeyValue("/k", b"last", kv.create_revision, store.revision))
        self.assertEqual(sink.events[-1], Event(DELETE, deleted, kv))
        self.assertEqual(sink.events[-1].revision, store.revision)

    async def test_recreate_after_delete(self):
        """A key created again after its deletion starts anew, with a create event and revision."""
        store = await self.make_storage()
        sink = Sink()
        store.watch("/", 0, sink)
        await store.create("/k", b"1")
        await store.delete("/k")
        again = await store.create("/k", b"2")
        self.assertEqual(again.create_revision, again.mod_revision)
        self.assertEqual(sink.events[-1], created(again))
        history = Sink()
        store.watch("/", 0, history)
        await history.wait(3)
        self.assertEqual(history.events, sink.events)

    async def test_compaction(self):
        """After compact(C) reads and watches below C fail; the state at C and all after it stay."""
        store = await self.make_storage()
        one, two, uno, bee, gone = await write_history(store)
        compacted = bee.mod_revision
        self.assertIsNone(await store.compact(compacted))
        self.assertEqual(store.compacted_revision, compacted)
        error = await self.assertFailure(store.range("/", compacted - 1), CompactedError)
        self.assertEqual((error.requested, error.compacted), (compacted - 1, compacted))
        self.assertEqual((await store.range("/", compacted)).kvs, [uno, two, bee])
        self.assertEqual((await store.range("/")).kvs, [uno, bee])
        self.assertEqual(await store.get("/a/1"), uno)
        error = self.assertRaises(CompactedError, store.watch, "/", compacted - 1, Sink())
        self.assertEqual((error.requested, error.compacted), (compacted - 1, compacted))
        sink = Sink()
        store.watch("/", compacted, sink)
        await sink.wait(1)
        self.assertEqual(sink.events, [Event(DELETE, gone, two)])
        await self.assertFailure(store.compact(compacted), CompactedError)
        await self.assertFailure(store.compact(store.revision + 1), FutureRevisionError)

    async def test_compaction_of_deletion(self):
        """Compacting at a deletion's revision keeps the key absent, and its revision used."""
        store = await self.make_storage()
        one, two, uno, bee, gone = await write_history(store)
        await store.compact(gone.mod_revision)
        self.assertEqual((await store.range("/", gone.mod_revision)).kvs, [uno, bee])
        self.assertIsNone(await store.get("/a/2"))
        again = await store.create("/a/2", b"again")
        self.assertEqual(again.mod_revision, gone.mod_revision + 1)

    async def test_cancel(self):
        """A cancelled watch gets no more events and its done Deferred fires with None."""
        store = await self.make_storage()
        sink = Sink()
        watch = store.watch("/", store.revision, sink)
        first = await store.create("/k", b"1")
        watch.cancel()
        watch.cancel()
        await store.update("/k", b"2")
        self.assertEqual(sink.events, [created(first)])
        self.assertIsNone(self.successResultOf(watch.done))

    async def test_watches_are_independent(self):
        """Each watch gets the events under its own prefix, from its own revision."""
        store = await self.make_storage()
        one, two, uno, bee, gone = await write_history(store)
        a_sink, b_sink = Sink(), Sink()
        store.watch("/a/", uno.mod_revision, a_sink)
        store.watch("/b/", 0, b_sink)
        await a_sink.wait(1)
        await b_sink.wait(1)
        self.assertEqual(a_sink.events, [Event(DELETE, gone, two)])
        self.assertEqual(b_sink.events, [created(bee)])


    #: Whether a commit's versions share one revision (etcd, memory); SQLite gives
    #: them consecutive ones (``IStorage.commit``).
    COMMIT_AT_ONE_REVISION = True

    def assert_commit_revisions(self, store, kvs: list, before: int):
        """``kvs``, a commit's versions, took the revisions after ``before`` as the
        backend promises, the last being the store's."""
        revisions = [kv.mod_revision for kv in kvs]
        if self.COMMIT_AT_ONE_REVISION:
            self.assertEqual(revisions, [store.revision] * len(kvs))
        else:
            self.assertEqual(revisions, list(range(before + 1, before + 1 + len(kvs))))
        self.assertEqual(store.revision, revisions[-1])
        self.assertGreater(revisions[0], before)

    async def test_commit(self):
        """A commit writes several keys at once: each version as its single write would
        give it, reads and live and replayed watches seeing them in op order."""
        store = await self.make_storage()
        a = await store.create("/a", b"A")
        doomed = await store.create("/d", b"D")
        live = Sink()
        store.watch("/", store.revision, live)
        before = store.revision
        new, changed, gone = await store.commit([
            Create("/n", b"N"), Update("/a", b"A2", a.mod_revision), Delete("/d", None)])
        self.assert_commit_revisions(store, [new, changed, gone], before)
        self.assertEqual(new, KeyValue("/n", b"N", new.mod_revision, new.mod_revision))
        self.assertEqual(changed, KeyValue("/a", b"A2", a.create_revision,
                                           changed.mod_revision))
        self.assertEqual(gone, attrs.evolve(doomed, mod_revision=gone.mod_revision))
        events = [created(new), Event(PUT, changed, a), Event(DELETE, gone, doomed)]
        await live.wait(3)
        self.assertEqual(live.events, events)
        self.assertEqual((await store.range("/")).kvs, [changed, new])
        replayed = Sink()
        store.watch("/", before, replayed)
        await replayed.wait(3)
        after = await store.create("/z", b"Z")
        await replayed.wait(4)
        self.assertEqual(replayed.events, events + [created(after)])

    async def test_commit_is_all_or_nothing(self):
        """A commit one of whose conditions fails writes nothing and fails as that write
        alone would, the first failing one in op order."""
        store = await self.make_storage()
        a = await store.create("/a", b"A")
        a2 = await store.update("/a", b"A2")
        live = Sink()
        store.watch("/", store.revision, live)
        stale = await self.assertFailure(
            store.commit([Create("/n", b"N"), Update("/a", b"A3", a.mod_revision)]),
            RevisionMismatchError)
        self.assertEqual((stale.key, stale.current), ("/a", a2))
        exists = await self.assertFailure(
            store.commit([Create("/n", b"N"), Create("/a", b"again"),
                          Update("/x", b"x", None)]), KeyExistsError)
        self.assertEqual(exists.key, "/a")
        missing = await self.assertFailure(
            store.commit([Update("/a", b"A3", a2.mod_revision), Delete("/m", None),
                          Create("/a2", b"x")]), KeyNotFoundError)
        self.assertEqual(missing.key, "/m")
        self.assertEqual(store.revision, a2.mod_revision)
        self.assertEqual((await store.range("/")).kvs, [a2])
        landed = await store.create("/after", b"")
        await live.wait(1)
        self.assertEqual(live.events, [created(landed)])

    async def test_commit_refuses_a_key_twice(self):
        """A commit of one key twice, or of nothing, is a caller's bug."""
        store = await self.make_storage()
        self.assertRaises(ValueError, store.commit, [Create("/k", b"1"), Delete("/k", None)])
        self.assertRaises(ValueError, store.commit, [])


class SealedConformance(StorageConformance):
    """The contract again, every value sealed at rest: callers see only plaintext."""

    async def make_storage(self, **options):
        return await super().make_storage(transformer=SealingTransformer(), **options)


class TransformerConformance:
    """The value-transformer seam (see module docstring)."""

    async def test_identity_by_default(self):
        """Without a transformer values are stored as they are."""
        store = await self.make_storage()
        self.assertIsInstance(store.transformer, IdentityTransformer)
        await write_history(store)
        self.assertEqual(self.stored_values(store), [b"one", b"two", b"uno", b"bee"])

    async def test_stored_transformed(self):
        """Every value is held as the transformer made it from its key and value."""
        sealing = SealingTransformer()
        store = await self.make_storage(transformer=sealing)
        versions = await write_history(store)
        self.assertEqual(self.stored_values(store),
                         [sealing.to_storage(kv.key, kv.value) for kv in versions[:4]])
        for data in self.stored_values(store):
            for value in (b"one", b"two", b"uno", b"bee"):
                self.assertNotIn(value, data)

    async def test_commit_stored_transformed(self):
        """A commit's values are held as the transformer makes each of its key."""
        sealing = SealingTransformer()
        store = await self.make_storage(transformer=sealing)
        kvs = await store.commit([Create("/a", b"one"), Create("/b", b"two")])
        self.assertEqual([kv.value for kv in kvs], [b"one", b"two"])
        self.assertEqual(self.stored_values(store),
                         [sealing.to_storage("/a", b"one"), sealing.to_storage("/b", b"two")])

    async def test_reads_plaintext_after_compaction(self):
        """Ranges and watches over what compaction left read back plaintext."""
        store = await self.make_storage(transformer=SealingTransformer())
        one, two, uno, bee, gone = await write_history(store)
        await store.compact(bee.mod_revision)
        self.assertEqual((await store.range("/", bee.mod_revision)).kvs, [uno, two, bee])
        sink = Sink()
        store.watch("/", bee.mod_revision, sink)
        await sink.wait(1)
        self.assertEqual(sink.events, [Event(DELETE, gone, two)])

    async def test_key_is_authenticated(self):
        """A value moved to another key does not read back: it is a CorruptValue there."""
        store = await self.make_storage(transformer=SealingTransformer())
        a = await store.create("/a", b"A")
        b = await store.create("/b", b"B")
        [sealed_a, _] = self.stored_values(store)
        self.put_stored(store, "/b", sealed_a)
        moved = await store.get("/b")
        self.assertIsInstance(moved.value, CorruptValue)
        self.assertIsInstance(moved.value.error, TransformError)
        self.assertEqual(moved, KeyValue("/b", moved.value, b.create_revision, b.mod_revision))
        self.assertEqual((await store.range("/")).kvs, [a, moved])
        self.assertEqual(await store.get("/a"), a)

    async def test_corrupt_value_still_written(self):
        """A key whose value does not read back can be updated and deleted; events say so."""
        store = await self.make_storage(transformer=SealingTransformer())
        b = await store.create("/b", b"B")
        self.put_stored(store, "/b", b"garbage")
        sink = Sink()
        store.watch("/", store.revision, sink)
        error = await self.assertFailure(store.update("/b", b"x", expected_revision=0),
                                         RevisionMismatchError)
        self.assertIsInstance(error.current.value, CorruptValue)
        again = await store.update("/b", b"again", expected_revision=b.mod_revision)
        self.assertIsInstance(sink.events[0].prev.value, CorruptValue)
        self.assertEqual(sink.events[0].kv, again)
        self.put_stored(store, "/b", b"garbage")
        gone = await store.delete("/b")
        self.assertIsInstance(gone.value, CorruptValue)
        self.assertEqual(sink.events[1], Event(DELETE, gone, attrs.evolve(
            gone, mod_revision=again.mod_revision)))


class PrepareConformance:
    """A transformer's ``prepare`` holds back the writes it is asked for, and no other."""

    async def test_prepared_write_holds_back_only_itself(self):
        gated = GatedTransformer()
        store = await self.make_storage(transformer=gated)
        waiting = store.create("/gated/a", b"A")
        other = await store.create("/open/b", b"B")
        await store.delete("/open/b")  # a deletion stores no value: never held
        self.assertFalse(waiting.called)
        gated.ready = True
        gated.gates.pop().callback(None)
        a = await waiting
        self.assertEqual((a.value, a.mod_revision > other.mod_revision), (b"A", True))
        self.assertEqual(await store.get("/gated/a"), a)

    async def test_commit_waits_for_every_preparation(self):
        """A commit is written once every value of it can be: none of it before."""
        gated = GatedTransformer()
        store = await self.make_storage(transformer=gated)
        waiting = store.commit([Create("/open/a", b"A"), Create("/gated/b", b"B")])
        other = await store.create("/open/c", b"C")
        self.assertFalse(waiting.called)
        self.assertIsNone(await store.get("/open/a"))
        gated.ready = True
        gated.gates.pop().callback(None)
        a, b = await waiting
        self.assertGreater(a.mod_revision, other.mod_revision)
        self.assertEqual((await store.range("/open/")).kvs, [a, other])

    async def test_failed_preparation_fails_its_write(self):
        gated = GatedTransformer()
        store = await self.make_storage(transformer=gated)
        failing = store.create("/gated/a", b"A")
        gated.gates.pop().errback(TransformError("the plugin did not answer"))
        error = await self.assertFailure(failing, TransformError)
        self.assertEqual(str(error), "the plugin did not answer")
        self.assertIsNone(await store.get("/gated/a"))
        self.assertEqual((await store.create("/open/b", b"B")).value, b"B")


class SizeLimitConformance:
    """
    What an etcd with its default limits refuses to store (``storage/etcd3/txn.py``),
    refused alike by every durable backend: a value whose raft request is over 1.5 MiB
    (etcd's answer), or whose transaction is over 2 MiB (clientv3's, never sent).
    ``ROOT`` is what the store's keys start with for the etcd key to be
    ``/registry/configmaps/default/<name>``.
    """

    ROOT = "/registry"
    #: The largest create etcd 3.4 took there (value bytes), whatever its member's ID.
    LARGEST = 1_572_764
    #: A create of 2 MiB there, counted by hand: the compare (36 bytes, 38 with its tag
    #: and length), the put (2,097,189: the value with its tag and 4-byte length, the
    #: 32-byte key) in a request op (+5) in the transaction (+5).
    SENT_OVER = ("rpc error: code = ResourceExhausted desc = trying to send message "
                 "larger than max (2097237 vs. 2097152)")

    def key(self, name: str) -> str:
        return f"{self.ROOT}/configmaps/default/{name}"

    async def assert_refused(self, write, message: str):
        error = await self.assertFailure(write, errors.StatusError)
        self.assertEqual((error.code, error.reason, error.message), (500, "", message))

    async def test_value_over_request_limit(self):
        """A write etcd would refuse fails alone, answered in etcd's words."""
        store = await self.make_storage()
        largest = await store.create(self.key("a"), b"x" * self.LARGEST)
        self.assertEqual(len(largest.value), self.LARGEST)
        await self.assert_refused(store.create(self.key("b"), b"x" * (self.LARGEST + 2)),
                                  "etcdserver: request is too large")
        await self.assert_refused(store.update(self.key("a"), b"y" * (self.LARGEST + 2)),
                                  "etcdserver: request is too large")
        self.assertEqual((await store.get(self.key("a"))).value, largest.value)
        self.assertIsNone(await store.get(self.key("b")))

    async def test_commit_over_request_limit(self):
        """A commit is measured whole: two values each small enough alone are refused
        together, and neither is written."""
        store = await self.make_storage()
        half = b"x" * (self.LARGEST // 2 + 16)
        await self.assert_refused(
            store.commit([Create(self.key("a"), half), Create(self.key("b"), half)]),
            "etcdserver: request is too large")
        self.assertEqual((await store.range(self.ROOT)).kvs, [])
        await store.create(self.key("a"), half)

    async def test_value_over_send_limit(self):
        """A transaction over 2 MiB is refused as clientv3 refuses to send it."""
        store = await self.make_storage()
        await self.assert_refused(store.create(self.key("c"), b"x" * (2 * 1024 * 1024)),
                                  self.SENT_OVER)
        self.assertIsNone(await store.get(self.key("c")))
