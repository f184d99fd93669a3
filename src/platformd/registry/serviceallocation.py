"""
Service cluster IPs and node ports: upstream's ``ipallocator``/``portallocator`` over
its etcd-backed allocation bitmaps (``RangeAllocation`` objects at
``/registry/ranges/serviceips``, ``/registry/ranges/secondaryserviceips`` and
``/registry/ranges/servicenodeports``), and the ``Allocators`` of the services' REST
storage (``pkg/registry/core/service/storage/alloc.go``) that decide, for a create or
an update, what a Service gets and what it gives back.

Correct across replicas.  Each bitmap is one stored object, changed only by
compare-and-swap through the storage interface (``IStorage.update`` with the revision
the change was computed on): two servers racing for the same address both compute
their change on revision R; one write lands, the other fails with
``RevisionMismatchError``, takes the stored bitmap it carries and decides again (the
address now taken: the next free one, or for a requested address
``provided IP is already allocated``).  A replica keeps the last bitmap it saw and
writes on it directly, so an allocation costs one storage write, no read; a refusal
decided on that copy is decided again on a fresh read before it stands (another
replica may have released the address).  One write per bitmap is in flight at a time
on a replica (upstream's allocator holds a lock across its etcd update): changes that
arrive meanwhile are decided together on one copy and written as one.

A create's or an update's allocations ride with the Service (issue 32; what
upstream's ``alloc.go`` wishes for).  ``ServiceHooks.begin_create``/``begin_update``
only reserve them on this replica (``Bitmap.reserve``: decided on the last bitmap
seen, taken to every other decision here while the write goes through validation and
admission), and the generic store writes the Service through ``Transaction.write``: one
``IStorage.commit`` (one etcd Txn) of the Service (compared absent, or at the version
the update read) and of each changed bitmap, compared at the revision it was decided
on; an update's releases (a type change, a node port dropped) are cleared in the same
commit.  So an allocation costs no round trip of its own.  The Service's own condition
failing is the store's as for any write (409 AlreadyExists, or the update decided again
on the newer object); another replica's change of a bitmap meanwhile fails it on that
bitmap, whose new version the replica then holds: if that change took none of the
reserved offsets the commit is made again on it, else the allocation was decided on
what is no longer so and the store decides the whole write again
(``interfaces.DecideAgain``: from the request's object, admission included, where a
requested address now taken is upstream's 422 ``provided IP is already allocated``).  A
reservation is dropped when the write fails anywhere, so a failed write writes and
leaks nothing.  While another change of a bitmap is in flight on this replica (clients
at once), a reservation is written with the changes waiting behind it, as one write,
then the Service alone, and a release after it: one write in flight per bitmap still,
and no commit sent only to lose to this replica's own.  A removal gives back what
the Service held in its own commit too (``ServiceHooks.begin_delete``: the Service
compared at the version read, each bitmap at the revision seen, the offsets cleared;
upstream's ``afterDelete`` releases after the removal, so a server dying between leaks
until the repair), but for a bitmap with a change in flight on this replica, whose
release follows the removal as before.

A storage no other server shares (SQLite not shared, memory; ``Allocators(clock=...)``): the
bitmaps are decided in memory, synchronously, and written behind every
``FLUSH_INTERVAL`` seconds and at stop; the services are the truth a restart rebuilds
them from.

Transactions.  ``allocate_create``/``allocate_update`` return a ``Transaction``: what
was allocated (``revert`` releases it: validation, admission or the write failed) and
what is to be released once the write succeeded (``commit``: an update that dropped a
node port or changed the type).  A dry run allocates nothing: upstream's dry-run
allocators (a requested address is checked against the range only; "any address" is
the range's network address, a node port the first free one after the range's base).

Repair (``Repair``): upstream's ``ipallocator/controller/repair.go`` and
``portallocator/controller/repair.go``: at start, before the server is ready, and then
every three minutes, each bitmap is rebuilt from the stored services; an address the
bitmap holds that no service has is kept for two more rounds (it may be an allocation
whose service is still being written, on this replica or another) and released on the
third.  A missing bitmap (a fresh store) or one of another range (the flag changed) is
written anew from the services.  So a restart never hands out an address in use.
"""

from __future__ import annotations

import base64
import random
import re
from typing import Callable, Optional, Sequence

import orjson
from zope.interface import implementer
from twisted.internet.defer import Deferred, fail, inlineCallbacks, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from platformd import errors
from platformd.context import internal
from platformd.registry.interfaces import DecideAgain, IWriteHooks
from platformd.util.deferreds import then
from platformd.model import fielderrors as fe
from platformd.registry.kinds import netaddr
from platformd.registry.kinds import service as svc
from platformd.util.servicenetwork import ServiceNetwork
from platformd.storage import mvcc
from platformd.storage.interface import (
    KeyExistsError, KeyNotFoundError, KeyValue, RevisionMismatchError,
)

log = Logger()

SERVICE_IPS_KEY = "/registry/ranges/serviceips"
SECONDARY_SERVICE_IPS_KEY = "/registry/ranges/secondaryserviceips"
NODE_PORTS_KEY = "/registry/ranges/servicenodeports"
#: Seconds between writes of a bitmap this server holds alone.
FLUSH_INTERVAL = 1.0
#: Compare-and-swap attempts before a change gives up (409).
RETRIES = 32
#: Upstream's repair interval and the rounds a leaked address is kept.
REPAIR_INTERVAL = 180.0
REPAIRS_BEFORE_LEAK_CLEANUP = 3

ERR_FULL = "range is full"
ERR_IP_ALLOCATED = "provided IP is already allocated"
ERR_PORT_ALLOCATED = "provided port is already allocated"


class AllocationError(Exception):
    """An allocation refused (upstream's ``ErrAllocated``, ``ErrNotInRange``, ``ErrFull``)."""


class Unavailable(Exception):
    """The bitmap is not (yet) stored, or is of another range: nothing can be allocated."""


# -- the stored bitmaps ------------------------------------------------------------------

def _decode(data: bytes, size: int) -> bytearray:
    """The bitmap of a ``RangeAllocation``'s ``data`` (a Go ``big.Int``'s bytes, most
    significant first): bit i of the result's byte i//8 is offset i."""
    number = int.from_bytes(data, "big")
    nbytes = (size + 7) // 8
    if number >> (nbytes * 8):
        number &= (1 << (nbytes * 8)) - 1
    return bytearray(number.to_bytes(nbytes, "little"))


def _encode(bits: bytearray) -> bytes:
    number = int.from_bytes(bits, "little")
    return number.to_bytes((number.bit_length() + 7) // 8, "big")


def _has(bits: bytearray, offset: int) -> bool:
    return bool(bits[offset >> 3] & (1 << (offset & 7)))


def _set(bits: bytearray, offset: int) -> None:
    bits[offset >> 3] |= 1 << (offset & 7)


def _clear(bits: bytearray, offset: int) -> None:
    bits[offset >> 3] &= ~(1 << (offset & 7)) & 0xff


_NOT_FULL = re.compile(rb"[^\xff]")


def _first_clear(bits: bytearray, start: int, end: int) -> int:
    """The first clear offset in [start, end), or -1: whole set bytes skipped in C."""
    at = start
    while at < end and at & 7:
        if not bits[at >> 3] & (1 << (at & 7)):
            return at
        at += 1
    while at < end:
        match = _NOT_FULL.search(bits, at >> 3, (end + 7) >> 3)
        if match is None:
            return -1
        at = match.start() << 3
        for bit in range(8):
            if at + bit >= end:
                return -1
            if not bits[(at + bit) >> 3] & (1 << bit):
                return at + bit
        at += 8
    return -1


def _offsets(bits: bytearray):
    for index, byte in enumerate(bits):
        while byte:
            low = byte & -byte
            yield index * 8 + low.bit_length() - 1
            byte ^= low


class Bitmap:
    """
    One ``RangeAllocation`` in storage (see the module docstring): ``spec`` its range's
    text, ``size`` the offsets it holds, ``offset`` where dynamic allocation starts
    (upstream's random scan of the upper band, then the lower).
    """

    def __init__(self, storage, key: str, spec: str, size: int, offset: int,
                 rng: Optional[random.Random] = None, clock=None):
        self.storage = storage
        #: With a clock, the bitmap is this server's alone (a storage no other server
        #: shares): changes are decided in memory and the stored copy is written behind,
        #: at most every ``FLUSH_INTERVAL`` seconds (see ``Allocators``).
        self.clock = clock
        self.exclusive = clock is not None
        self._flush_call = None
        self._dirty = False
        #: Changes waiting for the write in flight (compare-and-swap mode).
        self._queue: list = []
        self._writing = False
        #: Offsets this replica has given to creates whose writes (the object's and the
        #: bitmap's together, ``Transaction.write``) are still to come: taken to every
        #: other decision here, in no stored bitmap yet.
        self.reserved: set = set()
        self.key = key
        self.spec = spec
        self.size = size
        self.offset = offset
        self.rng = rng or random.Random()
        #: The last stored version seen: its revision (0: none seen) and bitmap.
        self.revision = 0
        self.bits = bytearray((size + 7) // 8)

    # The stored form.

    def value(self, bits: bytearray) -> bytes:
        return orjson.dumps({
            "kind": "RangeAllocation", "apiVersion": "v1", "metadata": {},
            "range": self.spec, "data": base64.b64encode(_encode(bits)).decode("ascii")})

    def _parse(self, kv) -> tuple:
        """(range, bitmap) of a stored version."""
        try:
            stored = orjson.loads(kv.value)
            return stored.get("range", ""), _decode(base64.b64decode(stored.get("data") or ""),
                                                    self.size)
        except (ValueError, TypeError):
            return "", bytearray((self.size + 7) // 8)

    def take(self, kv) -> None:
        """Hold ``kv`` (a stored version read or written meanwhile) if it is newer."""
        spec, bits = self._parse(kv)
        if spec != self.spec:
            self.revision = 0
            raise Unavailable("the provided network does not match the current range")
        if kv.mod_revision >= self.revision:
            self.revision, self.bits = kv.mod_revision, bits

    @inlineCallbacks
    def load(self):
        kv = yield self.storage.get(self.key)
        if kv is None:
            self.revision = 0
            raise Unavailable(f"cannot allocate resources of type {self.key.rsplit('/', 1)[-1]}"
                              " at this time")
        self.take(kv)

    def has(self, offset: int) -> bool:
        """Whether the last bitmap seen holds ``offset`` (dry runs ask this)."""
        return 0 <= offset < self.size and _has(self.bits, offset)

    # Changes.

    def change(self, decide: Callable):
        """
        Deferred: ``decide(bits)`` applied (see ``_change``); in memory, at once, when
        the bitmap is this server's alone.
        """
        if not self.exclusive or not self.revision:
            return self._change(decide)
        bits = bytearray(self.bits)
        try:
            result = decide(bits)
        except AllocationError:
            return fail()
        if bits != self.bits:
            self.bits = bits
            self._changed()
        return succeed(result)

    def _changed(self) -> None:
        self._dirty = True
        if self._flush_call is None:
            self._flush_call = self.clock.callLater(FLUSH_INTERVAL, self._flush_later)

    def _flush_later(self) -> None:
        self._flush_call = None
        self.flush().addErrback(lambda f: log.warn("writing {key} failed: {why}", key=self.key,
                                                   why=f.getErrorMessage()))

    @inlineCallbacks
    def flush(self):
        """Write the bitmap this server holds alone (no-op when nothing changed)."""
        if self._flush_call is not None and self._flush_call.active():
            self._flush_call.cancel()
        self._flush_call = None
        if not self.exclusive or not self._dirty:
            return
        self._dirty = False
        value = self.value(self.bits)
        try:
            kv = yield self.storage.update(self.key, value, None)
        except KeyNotFoundError:
            kv = yield self.storage.create(self.key, value)
        self.revision = max(self.revision, kv.mod_revision)

    def _change(self, decide: Callable):
        """
        Deferred: ``decide(bits)`` (a copy of the stored bitmap, changed in place)
        applied to the stored bitmap by compare-and-swap; its result.  Changes wait
        their turn, one write in flight per bitmap (upstream's allocator holds a lock
        across its etcd update): those that arrive meanwhile are decided together and
        written as one.
        """
        d: Deferred = Deferred()
        self._queue.append((decide, d))
        if not self._writing:
            self.resume()
        return d

    @property
    def idle(self) -> bool:
        """Whether a write may carry a change of the stored bitmap now: it is shared,
        known, and no write of it is in flight or waiting on this replica."""
        return not self.exclusive and bool(self.revision) and not self._writing \
            and not self._queue

    def hold(self) -> None:
        """A write carrying a change of this bitmap is in flight (``Transaction.write``):
        changes wait their turn as behind one of its own."""
        self._writing = True

    def resume(self) -> None:
        """The write in flight is done: the changes that waited are decided and written."""
        self._writing = bool(self._queue)
        if self._writing:
            self._drain().addBoth(self._drained)

    def _drained(self, result) -> None:
        if isinstance(result, Failure):
            log.failure("changing {key} failed", result, key=self.key)
        self._writing = False
        self.resume()  # changes queued by the last batch's callbacks

    @inlineCallbacks
    def _drain(self):
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                results = yield self._apply(batch)
            except Exception:
                failure = Failure()
                for _decide, d in batch:
                    d.errback(failure)
                continue
            for (_decide, d), result in zip(batch, results):
                if isinstance(result, Failure):
                    d.errback(result)
                else:
                    d.callback(result)

    @inlineCallbacks
    def _apply(self, batch: list):
        """
        The results (or ``Failure``s) of ``batch``'s decisions, made one after the other
        on one copy and written once.  A refusal (``AllocationError``) decided on a copy
        not just read has the stored one read and everything decided again.
        """
        fresh = False
        for _attempt in range(RETRIES):
            if not self.revision:
                yield self.load()
                fresh = True
            bits = bytearray(self.bits)
            results: list = []
            refused = False
            for decide, _d in batch:
                try:
                    results.append(decide(bits))
                except AllocationError:
                    refused = True
                    results.append(Failure())
            if refused and not fresh:
                yield self.load()
                fresh = True
                continue
            if bits == self.bits:
                return results
            try:
                kv = yield self.storage.update(self.key, self.value(bits), self.revision)
            except RevisionMismatchError as e:
                self.take(e.current)
                fresh = True
                continue
            except KeyNotFoundError:
                self.revision = 0
                continue
            if kv.mod_revision > self.revision:
                self.revision, self.bits = kv.mod_revision, bits
            return results
        raise errors.conflict("serviceipallocations", "", self.key.rsplit("/", 1)[-1],
                              "too many concurrent allocations; try again")

    def choosing(self, offset: Optional[int]) -> Callable:
        """
        The choice of an allocation of ``offset`` (None: a free one, at random in the
        upper band first): given a bitmap, which it does not change, it answers the
        offset or raises ``AllocationError``.  An offset reserved here is taken.
        """
        if offset is not None:
            def choose(bits):
                if _has(bits, offset) or offset in self.reserved:
                    raise AllocationError("allocated")
                return offset
            return choose
        start_high = self.rng.randrange(self.size - self.offset) if self.size > self.offset \
            else 0
        start_low = self.rng.randrange(self.offset) if self.offset else 0

        def choose_next(bits):
            found = self._free(bits, start_high, start_low)
            if found < 0:
                raise AllocationError(ERR_FULL)
            return found
        return choose_next

    def allocating(self, offset: Optional[int]) -> Callable:
        """The decision of an allocation of ``offset`` (see ``choosing``): it sets the
        offset chosen in the bitmap it is given and answers it."""
        choose = self.choosing(offset)

        def decide(bits):
            found = choose(bits)
            _set(bits, found)
            return found
        return decide

    def allocate(self, offset: Optional[int] = None):
        """Deferred[int]: ``offset`` (None: a free one) allocated and written."""
        return self.change(self.allocating(offset))

    def reserve(self, offset: Optional[int] = None):
        """
        ``offset`` (None: a free one) chosen on the last bitmap seen and reserved, to be
        written with the object that takes it (``Transaction.write``): at once (an int)
        when a bitmap has been seen and has it free, the common case, which costs no
        Deferred; else a Deferred[int] of the choice made on a fresh read (none seen
        yet, or a refusal decided on a copy not just read: another replica may have
        released the offset).
        """
        choose = self.choosing(offset)
        if self.revision:
            try:
                found = choose(self.bits)
            except AllocationError:
                pass
            else:
                self.reserved.add(found)
                return found
        return self.load().addCallback(self._reserve_loaded, choose)

    def _reserve_loaded(self, _, choose: Callable) -> int:
        found = choose(self.bits)
        self.reserved.add(found)
        return found

    def setting(self, offsets: list, clearing: Sequence[int] = ()) -> Callable:
        """The decision that sets ``offsets`` (reserved here) in a stored bitmap and
        clears ``clearing`` (given back), or raises ``AllocationError`` when another
        server has taken one of ``offsets`` meanwhile."""
        def decide(bits):
            if any(_has(bits, offset) for offset in offsets):
                raise AllocationError("allocated")
            for offset in offsets:
                _set(bits, offset)
            for offset in clearing:
                _clear(bits, offset)
        return decide

    def _free(self, bits: bytearray, start_high: int, start_low: int) -> int:
        """The first free offset (``_first_free``) from ``offset + start_high`` on in the
        upper band (wrapping), else from ``start_low`` in the lower band; -1 when full."""
        low, high = self.offset, self.size
        at = low + start_high
        found = self._first_free(bits, at, high)
        if found < 0:
            found = self._first_free(bits, low, at)
        if found < 0 and low:
            found = self._first_free(bits, start_low, low)
            if found < 0:
                found = self._first_free(bits, 0, start_low)
        return found

    def _first_free(self, bits: bytearray, start: int, end: int) -> int:
        """The first offset in [start, end) clear in ``bits`` and not reserved here, or
        -1 (the reservations skipped one by one: a few at a time are in flight)."""
        found = _first_clear(bits, start, end)
        while found >= 0 and found in self.reserved:
            found = _first_clear(bits, found + 1, end)
        return found

    def release(self, offsets):
        wanted = [o for o in offsets if 0 <= o < self.size]
        if not wanted:
            return succeed(None)

        def decide(bits):
            for offset in wanted:
                _clear(bits, offset)
        return self.change(decide)

    # Repair.

    @inlineCallbacks
    def rebuild(self, in_use: set, leaks: dict):
        """
        Write the bitmap of ``in_use`` (offsets) plus the leaks still held (upstream's
        repair ``runOnce``); ``leaks`` (offset → rounds left) is updated.
        """
        if self.exclusive and self.revision:
            # What this server holds is the truth: rebuilt from it, synchronously.
            kv = KeyValue(self.key, self.value(self.bits), 0, self.revision)
            self.bits, next_leaks = self._rebuilt(kv, in_use, leaks)
            leaks.clear()
            leaks.update(next_leaks)
            self._dirty = True
            yield self.flush()
            return
        for _attempt in range(RETRIES):
            kv = yield self.storage.get(self.key)
            rebuilt, next_leaks = self._rebuilt(kv, in_use, leaks)
            try:
                if kv is None:
                    written = yield self.storage.create(self.key, self.value(rebuilt))
                elif self._parse(kv) == (self.spec, rebuilt):
                    written = kv
                else:
                    written = yield self.storage.update(self.key, self.value(rebuilt),
                                                        kv.mod_revision)
            except (RevisionMismatchError, KeyExistsError, KeyNotFoundError):
                continue
            leaks.clear()
            leaks.update(next_leaks)
            if written.mod_revision >= self.revision:
                self.revision, self.bits = written.mod_revision, rebuilt
            return
        raise RuntimeError(f"{self.key}: too many concurrent writers during repair")

    def _rebuilt(self, kv, in_use: set, leaks: dict) -> tuple:
        """The bitmap of ``in_use`` and the stored leaks still held, and the leaks'
        rounds left after this one."""
        rebuilt = bytearray((self.size + 7) // 8)
        for offset in in_use:
            if 0 <= offset < self.size:
                _set(rebuilt, offset)
        next_leaks = {}
        if kv is not None:
            spec, stored = self._parse(kv)
            if spec == self.spec:
                for offset in _offsets(stored):
                    if offset >= self.size or _has(rebuilt, offset):
                        continue
                    count = leaks.get(offset, REPAIRS_BEFORE_LEAK_CLEANUP - 1)
                    if count > 0:
                        next_leaks[offset] = count - 1
                        _set(rebuilt, offset)
                    else:
                        log.info("{key}: offset {offset} appears to have leaked: cleaning "
                                 "up", key=self.key, offset=offset)
            else:
                log.warn("{key}: stored range {old} is not {new}: rebuilt from the "
                         "services", key=self.key, old=spec, new=self.spec)
        return rebuilt, next_leaks


# -- transactions ------------------------------------------------------------------------

class Transaction:
    """
    What one create or update allocated, and what it releases once written.

    ``carried`` (a create's, over a shared storage: ``ServiceHooks``): what it takes is
    only reserved on this replica (``Bitmap.reserve``) and written with the object, in
    one storage transaction (``create``); else each allocation is written at once.
    """

    def __init__(self, dry_run: bool = False, carried: bool = False):
        self.dry_run = dry_run
        self.carried = carried
        #: (Bitmap, offset) allocated and written: released on revert.
        self.allocated: list = []
        #: (Bitmap, offset) reserved, to be written with the object (``create``).
        self.reserved: list = []
        #: (Bitmap, offset) to release on commit.
        self.to_release: list = []

    def allocate(self, bitmap: Bitmap, offset: Optional[int] = None):
        """``offset`` (None: a free one) taken from ``bitmap``: reserved (``carried``),
        an int at once when the bitmap seen has it free (``Bitmap.reserve``), else a
        Deferred[int]; or written (a Deferred[int])."""
        if self.carried:
            return then(bitmap.reserve(offset), self._reserved, bitmap)
        return bitmap.allocate(offset).addCallback(self._allocated, bitmap)

    def _reserved(self, offset: int, bitmap: Bitmap) -> int:
        self.reserved.append((bitmap, offset))
        return offset

    def _allocated(self, offset: int, bitmap: Bitmap) -> int:
        self.allocated.append((bitmap, offset))
        return offset

    @inlineCallbacks
    def write(self, storage, op):
        """
        Deferred[KeyValue]: ``op`` (the object's ``mvcc.Create``, its ``Update`` or its
        ``Delete``) in ``storage`` with what this transaction changes: one
        ``IStorage.commit`` of the object and every bitmap it changes (what it reserved
        set, and for an update or a removal what it gives back cleared), each compared
        with the revision it was decided on
        (the object first: the cache, which does not hold the bitmaps, has the object
        when it reaches the revision).  Another server's change of a bitmap meanwhile
        fails the commit: when it took none of the offsets, the commit is made again on
        its bitmap; when it took one, the allocation was decided on what is no longer
        so (``DecideAgain``: the store decides the write again, the bitmap now fresh).
        The object's own conflict is the store's (its error passed on).  While a change
        of a bitmap is in flight on this replica, the reservations wait for it and are
        written together with the changes that waited (one write, as before this seam),
        then the object alone, and what it gives back is released after (``commit``).
        """
        for _attempt in range(RETRIES):
            by_bitmap: dict = {}
            for bitmap, offset in self.reserved:
                by_bitmap.setdefault(bitmap, ([], []))[0].append(offset)
            if by_bitmap and not all(bitmap.idle for bitmap in by_bitmap):
                yield self._write_reserved({b: sets for b, (sets, _) in by_bitmap.items()})
                continue
            for bitmap, offset in self.to_release:
                # Of a bitmap with a write in flight: after the object, as before
                # (``commit``).
                if self.carried and 0 <= offset < bitmap.size and bitmap.idle:
                    by_bitmap.setdefault(bitmap, ([], []))[1].append(offset)
            if not by_bitmap:
                kvs = yield storage.commit([op])
                return kvs[0]
            changed = {}
            try:
                for bitmap, (sets, clears) in by_bitmap.items():
                    bits = bytearray(bitmap.bits)
                    bitmap.setting(sets, clears)(bits)
                    changed[bitmap] = bits
            except AllocationError:
                raise DecideAgain(f"{bitmap.key}: another server took an offset reserved"
                                  " here") from None
            ops = [op] + [mvcc.Update(bitmap.key, bitmap.value(bits), bitmap.revision)
                          for bitmap, bits in changed.items()]
            for bitmap in changed:
                bitmap.hold()
            try:
                kvs = yield storage.commit(ops)
            except (RevisionMismatchError, KeyNotFoundError) as e:
                for bitmap in changed:
                    bitmap.resume()
                if e.key == op.key:
                    raise
                self._lost(by_bitmap, e)
                continue
            except BaseException:
                for bitmap in changed:
                    bitmap.resume()
                raise
            for (bitmap, bits), kv in zip(changed.items(), kvs[1:]):
                if kv.mod_revision > bitmap.revision:
                    bitmap.revision, bitmap.bits = kv.mod_revision, bits
                bitmap.reserved.difference_update(by_bitmap[bitmap][0])
                bitmap.resume()
            self.reserved = []
            self.to_release = [pair for pair in self.to_release if pair[0] not in changed]
            return kvs[0]
        raise errors.conflict("serviceipallocations", "", op.key.rsplit("/", 1)[-1],
                              "too many concurrent allocations; try again")

    @staticmethod
    def _lost(by_bitmap: dict, error) -> None:
        """
        A commit failed on a bitmap (``error``): hold the version another server wrote
        (the next attempt checks the reservations against it), or raise ``DecideAgain``
        when the bitmap is gone or of another range.
        """
        bitmap = next(b for b in by_bitmap if b.key == error.key)
        if isinstance(error, KeyNotFoundError):
            bitmap.revision = 0
            raise DecideAgain(f"{bitmap.key} was removed")
        try:
            bitmap.take(error.current)
        except Unavailable as e:
            raise DecideAgain(str(e)) from None

    @inlineCallbacks
    def _write_reserved(self, by_bitmap: dict):
        """Write the reservations with the changes waiting on their bitmaps (see
        ``create``); ``DecideAgain`` if another server took one of them meanwhile."""
        for bitmap, offsets in by_bitmap.items():
            try:
                yield bitmap.change(bitmap.setting(offsets))
            except (AllocationError, Unavailable) as e:
                raise DecideAgain(f"{bitmap.key}: {e}") from None
            bitmap.reserved.difference_update(offsets)
            moved = [(bitmap, offset) for offset in offsets]
            self.allocated.extend(moved)
            self.reserved = [pair for pair in self.reserved if pair not in moved]

    @inlineCallbacks
    def _release(self, pairs: list):
        by_bitmap: dict = {}
        for bitmap, offset in pairs:
            by_bitmap.setdefault(bitmap, []).append(offset)
        for bitmap, offsets in by_bitmap.items():
            try:
                yield bitmap.release(offsets)
            except Exception as e:  # noqa: BLE001 -- the repair cleans up what this leaves
                log.warn("releasing {offsets} in {key} failed (the repair will): {why}",
                         offsets=offsets, key=bitmap.key, why=e)

    def _unreserve(self) -> None:
        for bitmap, offset in self.reserved:
            bitmap.reserved.discard(offset)
        self.reserved = []

    def commit(self):
        self._unreserve()  # none left once ``create`` has written them
        pairs, self.to_release, self.allocated = self.to_release, [], []
        if self.dry_run or not pairs:
            return succeed(None)
        return self._release(pairs)

    def revert(self):
        self._unreserve()
        pairs, self.allocated, self.to_release = self.allocated, [], []
        if self.dry_run or not pairs:
            return succeed(None)
        return self._release(pairs)

    def finish(self, success: bool):
        return self.commit() if success else self.revert()


def _invalid(name: str, causes) -> errors.StatusError:
    return errors.invalid("Service", "", name, causes)


def _policy(spec: dict) -> str:
    return spec.get("ipFamilyPolicy") or svc.SINGLE_STACK


def _family_of(ip: str) -> str:
    return "IPv6" if netaddr.is_ipv6_string(ip) else "IPv4"


def _same(old: dict, new: dict, field: str) -> bool:
    return list(old.get(field) or ()) == list(new.get(field) or ())


class Allocators:
    """Upstream's ``Allocators`` (``alloc.go``) over ``Bitmap``s in ``storage``."""

    def __init__(self, storage, network: ServiceNetwork = ServiceNetwork(),
                 rng: Optional[random.Random] = None, clock=None):
        """
        ``clock`` given: ``storage`` is this server's alone (SQLite, memory), so the
        bitmaps are decided in memory and written behind (every ``FLUSH_INTERVAL``
        seconds and at stop): a restart rebuilds them from the services (``Repair``),
        which are the truth; without, every change is a compare-and-swap write (etcd,
        shared by replicas).
        """
        self.network = network
        #: Whether other servers share ``storage`` (no ``clock``).
        self.shared = clock is None
        rng = rng or random.Random()
        keys = (SERVICE_IPS_KEY, SECONDARY_SERVICE_IPS_KEY)
        #: family → (IPRange, Bitmap), the primary range's family first.
        self.ips = {r.family: (r, Bitmap(storage, key, r.spec, r.size, r.offset, rng, clock))
                    for r, key in zip(network.ranges, keys)}
        self.default_family = network.ranges[0].family
        ports = network.node_ports
        self.ports = ports
        self.port_bitmap = Bitmap(storage, NODE_PORTS_KEY, ports.spec, ports.size,
                                  ports.offset, rng, clock)

    @inlineCallbacks
    def flush(self):
        """Write what the bitmaps held alone have changed (at stop)."""
        for bitmap in self.bitmaps:
            yield bitmap.flush()

    @property
    def bitmaps(self) -> list:
        return [bitmap for _r, bitmap in self.ips.values()] + [self.port_bitmap]

    # -- IP families (initIPFamilyFields) -------------------------------------------------

    def init_ip_family_fields(self, new: dict, old: Optional[dict]) -> None:
        spec = new["spec"]
        old_spec = (old or {}).get("spec") or {}
        if spec.get("type") == svc.EXTERNAL_NAME:
            return
        if _matching_prefer_dual_stack(spec, old_spec if old is not None else None):
            return
        if spec.get("ipFamilyPolicy") is None:
            if old is not None and old_spec.get("ipFamilyPolicy") is not None:
                spec["ipFamilyPolicy"] = old_spec["ipFamilyPolicy"]
            elif spec.get("clusterIP") == svc.NONE and not spec.get("selector"):
                spec["ipFamilyPolicy"] = svc.REQUIRE_DUAL_STACK
            else:
                spec["ipFamilyPolicy"] = svc.SINGLE_STACK
        name = new["metadata"].get("name", "")
        causes = svc.validate_cluster_ips_related_fields(spec)
        if causes:
            raise _invalid(name, causes)
        policy = spec["ipFamilyPolicy"]
        if old is not None:
            if policy == svc.SINGLE_STACK:
                if _same(old_spec, spec, "clusterIPs") and len(spec.get("clusterIPs") or ()) > 1:
                    spec["clusterIPs"] = spec["clusterIPs"][:1]
                if _same(old_spec, spec, "ipFamilies") and len(spec.get("ipFamilies") or ()) > 1:
                    spec["ipFamilies"] = spec["ipFamilies"][:1]
            else:
                if spec.get("clusterIPs") and \
                        len(spec["clusterIPs"]) < len(old_spec.get("clusterIPs") or ()):
                    causes.append(fe.invalid("spec.ipFamilyPolicy", policy, "must be "
                                             "'SingleStack' to release the secondary cluster IP"))
                if spec.get("ipFamilies") and \
                        len(spec["ipFamilies"]) < len(old_spec.get("ipFamilies") or ()):
                    causes.append(fe.invalid("spec.ipFamilyPolicy", policy, "must be "
                                             "'SingleStack' to release the secondary IP family"))
        if policy == svc.SINGLE_STACK:
            if len(spec.get("clusterIPs") or ()) == 2:
                causes.append(fe.invalid("spec.ipFamilyPolicy", policy, "must be "
                                         "'RequireDualStack' or 'PreferDualStack' when multiple "
                                         "cluster IPs are specified"))
            if len(spec.get("ipFamilies") or ()) == 2:
                causes.append(fe.invalid("spec.ipFamilyPolicy", policy, "must be "
                                         "'RequireDualStack' or 'PreferDualStack' when multiple "
                                         "IP families are specified"))
        families = spec.setdefault("ipFamilies", [])
        for i, ip in enumerate(spec.get("clusterIPs") or ()):
            if ip == svc.NONE:
                break
            family = _family_of(ip)
            if i >= len(families):
                if family not in self.ips:
                    causes.append(fe.invalid(f"spec.clusterIPs[{i}]",
                                             fe.go_json(spec["clusterIPs"]),
                                             f"{family} is not configured on this cluster"))
                else:
                    families.append(family)
        if causes:
            raise _invalid(name, causes)
        if spec.get("clusterIP") == svc.NONE and not spec.get("selector"):
            if not families:
                families.append(self.default_family)
            if len(families) < 2 and policy != svc.SINGLE_STACK:
                families.append("IPv6" if families[0] == "IPv4" else "IPv4")
            return
        if policy == svc.REQUIRE_DUAL_STACK and len(self.ips) < 2:
            causes.append(fe.invalid("spec.ipFamilyPolicy", policy,
                                     "this cluster is not configured for dual-stack services"))
        for i, family in enumerate(families):
            if family not in self.ips:
                causes.append(fe.invalid(f"spec.ipFamilies[{i}]", family,
                                         "not configured on this cluster"))
        if causes:
            raise _invalid(name, causes)
        if not families:
            families.append(self.default_family)
        if policy != svc.SINGLE_STACK and len(families) == 1 and len(self.ips) == 2:
            families.append("IPv6" if families[0] == "IPv4" else "IPv4")

    # -- cluster IPs ------------------------------------------------------------------------

    @inlineCallbacks
    def _alloc_ips(self, obj: dict, wanted: dict, txn: Transaction):
        """``allocIPs``: family → requested IP ("" for any); family → IP given."""
        spec = obj["spec"]
        name = obj["metadata"].get("name", "")
        given = {}
        for family, ip in wanted.items():
            ip_range, bitmap = self.ips[family]
            if not ip:
                if txn.dry_run:
                    given[family] = str(ip_range.network.network_address)
                    continue
                try:
                    offset = yield txn.allocate(bitmap)
                except (AllocationError, Unavailable) as e:
                    raise errors.internal(f"failed to allocate a serviceIP: {e}") from None
                given[family] = ip_range.address(offset)
                continue
            offset = ip_range.offset_of(ip)
            problem = None
            if offset < 0:
                problem = ip_range.not_in_range(ip)
            elif not txn.dry_run:
                try:
                    yield txn.allocate(bitmap, offset)
                except AllocationError:
                    problem = ERR_IP_ALLOCATED
                except Unavailable as e:
                    problem = str(e)
            if problem is not None:
                raise _invalid(name, [fe.invalid(
                    "spec.clusterIPs", fe.go_json(list(spec.get("clusterIPs") or ())),
                    f"failed to allocate IP {ip}: {problem}")])
            given[family] = ip
        return given

    @inlineCallbacks
    def _alloc_cluster_ips(self, obj: dict, txn: Transaction):
        """``allocClusterIPs``: every family's address, into the service."""
        spec = obj["spec"]
        if spec.get("type") == svc.EXTERNAL_NAME:
            return
        ips = spec.get("clusterIPs")
        if ips and ips[0] == svc.NONE:
            return
        ips = spec.setdefault("clusterIPs", [])
        wanted = {}
        for i, family in enumerate(spec.get("ipFamilies") or ()):
            if i > len(ips) - 1:
                ips.append("")
            wanted[family] = ips[i]
        given = yield self._alloc_ips(obj, wanted, txn)
        for family, ip in given.items():
            for i, check in enumerate(spec["ipFamilies"]):
                if check == family:
                    ips[i] = ip
                    if i == 0:
                        spec["clusterIP"] = ip

    def _release_pairs(self, spec: dict) -> list:
        """(Bitmap, offset) of the service's cluster IPs, by family."""
        pairs = []
        ips = [ip for ip in spec.get("clusterIPs") or () if ip and ip != svc.NONE]
        families = list(spec.get("ipFamilies") or ())
        for i, ip in enumerate(ips):
            family = families[i] if i < len(families) else _family_of(ip)
            if family not in self.ips:
                continue
            ip_range, bitmap = self.ips[family]
            offset = ip_range.offset_of(ip)
            if offset >= 0:
                pairs.append((bitmap, offset))
        return pairs

    # -- node ports -------------------------------------------------------------------------

    @inlineCallbacks
    def _port(self, obj: dict, txn: Transaction, requested: Optional[int], path: str,
              taken: list):
        """One node port (``PortAllocationOperation.Allocate``/``AllocateNext``)."""
        bitmap = self.port_bitmap
        ports = self.ports
        if requested:
            if txn.dry_run:
                if bitmap.has(ports.offset_of(requested)) or requested in taken:
                    raise _invalid(obj["metadata"].get("name", ""), [
                        fe.invalid(path, requested, ERR_PORT_ALLOCATED)])
                taken.append(requested)
                return requested
            offset = ports.offset_of(requested)
            problem = None
            if offset < 0:
                problem = ports.not_in_range()
            else:
                try:
                    yield txn.allocate(bitmap, offset)
                except AllocationError:
                    problem = ERR_PORT_ALLOCATED
                except Unavailable as e:
                    problem = str(e)
            if problem is not None:
                raise _invalid(obj["metadata"].get("name", ""), [
                    fe.invalid(path, requested, problem)])
            taken.append(requested)
            return requested
        if txn.dry_run:
            last = max(taken) if taken else ports.base
            for _ in range(100):
                last += 1
                if not bitmap.has(ports.offset_of(last)):
                    break
            taken.append(last)
            return last
        try:
            offset = yield txn.allocate(bitmap)
        except (AllocationError, Unavailable) as e:
            raise errors.internal(f"failed to allocate a nodePort: {e}") from None
        taken.append(ports.base + offset)
        return ports.base + offset

    @inlineCallbacks
    def _init_node_ports(self, obj: dict, txn: Transaction, taken: list):
        """``initNodePorts`` (create)."""
        spec = obj["spec"]
        by_port: dict = {}
        service_ports = spec.get("ports") or []
        for i, port in enumerate(service_ports):
            if not port.get("nodePort") and not _should_allocate_node_ports(spec):
                continue
            allocated = by_port.get(port.get("port", 0), 0)
            if not allocated:
                requested = next((p.get("nodePort") for p in service_ports
                                  if p.get("port") == port.get("port") and p.get("nodePort")), 0)
                got = yield self._port(obj, txn, requested, f"spec.ports[{i}].nodePort", taken)
                port["nodePort"] = got
                by_port[port.get("port", 0)] = got
            elif port.get("nodePort", 0) != allocated:
                if not port.get("nodePort"):
                    port["nodePort"] = allocated
                else:
                    yield self._port(obj, txn, port["nodePort"], f"spec.ports[{i}].nodePort",
                                     taken)

    @inlineCallbacks
    def _update_node_ports(self, obj: dict, old_spec: dict, txn: Transaction, taken: list):
        """``updateNodePorts``."""
        spec = obj["spec"]
        old_numbers = svc.node_ports({"ports": old_spec.get("ports")})
        seen: set = set()
        chosen: list = []
        for i, port in enumerate(spec.get("ports") or []):
            if not port.get("nodePort") and not _should_allocate_node_ports(spec):
                continue
            number = port.get("nodePort") or 0
            if number:
                if number not in old_numbers and number not in seen:
                    yield self._port(obj, txn, number, f"spec.ports[{i}].nodePort", taken)
                    seen.add(number)
            else:
                number = yield self._port(obj, txn, 0, f"spec.ports[{i}].nodePort", taken)
                port["nodePort"] = number
            key = (port.get("protocol"), number)
            if key in chosen:
                raise errors.internal(f"duplicate nodePort: {{{key[0]} {key[1]}}}")
            chosen.append(key)
        new_numbers = svc.node_ports({"ports": spec.get("ports")})
        for number in old_numbers:
            if number not in new_numbers:
                txn.to_release.append((self.port_bitmap, self.ports.offset_of(number)))

    @inlineCallbacks
    def _health_check_create(self, obj: dict, txn: Transaction, taken: list):
        spec = obj["spec"]
        if not svc.needs_health_check(spec):
            return
        requested = spec.get("healthCheckNodePort") or 0
        try:
            got = yield self._port(obj, txn, requested, "spec.healthCheckNodePort", taken)
        except errors.StatusError as e:
            what = f"requested HealthCheck NodePort {requested}" if requested else \
                "a HealthCheck NodePort 0"
            raise errors.internal(f"failed to allocate {what}: "
                                  f"{e.message.rsplit(': ', 1)[-1]}") from None
        spec["healthCheckNodePort"] = got

    # -- the transactions -------------------------------------------------------------------

    @inlineCallbacks
    def allocate_create(self, obj: dict, dry_run: bool, carried: bool = False):
        """
        Deferred[Transaction]: upstream's ``allocateCreate``.  ``carried``: over a
        shared storage, what is taken is reserved, to be written with the object by the
        transaction's ``create`` (``ServiceHooks``); else it is written at once.
        """
        txn = Transaction(dry_run, carried and self.shared)
        try:
            self.init_ip_family_fields(obj, None)
            yield self._alloc_cluster_ips(obj, txn)
            taken: list = []
            if svc.needs_node_port(obj["spec"]):
                yield self._init_node_ports(obj, txn, taken)
            yield self._health_check_create(obj, txn, taken)
        except BaseException:
            yield txn.revert()
            raise
        return txn

    @inlineCallbacks
    def allocate_update(self, obj: dict, old: dict, dry_run: bool, carried: bool = False):
        """Deferred[Transaction]: upstream's ``patchAllocatedValues`` then
        ``allocateUpdate``; ``carried`` as for ``allocate_create`` (what the update gives
        back is then cleared in the same commit, too)."""
        txn = Transaction(dry_run, carried and self.shared)
        spec, old_spec = obj["spec"], old.get("spec") or {}
        _patch_allocated_values(spec, old_spec)
        try:
            self.init_ip_family_fields(obj, old)
            yield self._update_cluster_ips(obj, old, txn)
            taken: list = []
            if svc.needs_node_port(old_spec) and spec.get("type") in (
                    svc.EXTERNAL_NAME, svc.CLUSTER_IP):
                for number in svc.node_ports(old_spec):
                    txn.to_release.append((self.port_bitmap, self.ports.offset_of(number)))
            if svc.needs_node_port(spec):
                yield self._update_node_ports(obj, old_spec, txn, taken)
            yield self._update_health_check(obj, old_spec, txn, taken)
        except BaseException:
            yield txn.revert()
            raise
        return txn

    @inlineCallbacks
    def _update_cluster_ips(self, obj: dict, old: dict, txn: Transaction):
        """``updateClusterIPs``: type changes, dual-stack upgrades and downgrades."""
        spec, old_spec = obj["spec"], old.get("spec") or {}
        if _matching_prefer_dual_stack(spec, old_spec):
            return
        if old_spec.get("type") == svc.EXTERNAL_NAME and spec.get("type") != svc.EXTERNAL_NAME:
            yield self._alloc_cluster_ips(obj, txn)
            return
        if (old_spec.get("clusterIPs") or [""])[0] == svc.NONE:
            return
        if old_spec.get("type") != svc.EXTERNAL_NAME and spec.get("type") == svc.EXTERNAL_NAME:
            txn.to_release.extend(self._release_pairs(old_spec))
            return
        old_families = old_spec.get("ipFamilies") or []
        families = spec.get("ipFamilies") or []
        if len(old_families) == 1 and len(families) == 2:
            ips = spec.setdefault("clusterIPs", [])
            if len(ips) < 2:
                ips.append("")
            given = yield self._alloc_ips(obj, {families[1]: ips[1]}, txn)
            ips[1] = given[families[1]]
        elif len(old_families) == 2 and len(families) == 1:
            old_ips = old_spec.get("clusterIPs") or []
            if len(old_ips) > 1 and old_families[1] in self.ips:
                ip_range, bitmap = self.ips[old_families[1]]
                if ip_range.offset_of(old_ips[1]) >= 0:
                    txn.to_release.append((bitmap, ip_range.offset_of(old_ips[1])))

    @inlineCallbacks
    def _update_health_check(self, obj: dict, old_spec: dict, txn: Transaction, taken: list):
        spec = obj["spec"]
        needed, needs = svc.needs_health_check(old_spec), svc.needs_health_check(spec)
        old_port = old_spec.get("healthCheckNodePort") or 0
        if not needed and needs:
            yield self._health_check_create(obj, txn, taken)
        elif needed and not needs:
            if old_port:
                txn.to_release.append((self.port_bitmap, self.ports.offset_of(old_port)))
        elif needed and needs:
            if (spec.get("healthCheckNodePort") or 0) != old_port:
                raise _invalid(obj["metadata"].get("name", ""), [fe.invalid(
                    "spec.healthCheckNodePort", spec.get("healthCheckNodePort") or 0,
                    "cannot change healthCheckNodePort on loadBalancer service with "
                    "externalTraffic=Local during update")])

    def release(self, obj: dict):
        """Deferred: give back everything a removed service held
        (``releaseAllocatedResources``), written on its own."""
        return self.releasing(obj, carried=False).commit()

    def releasing(self, obj: dict, carried: bool = True) -> Transaction:
        """
        The transaction of a service's removal: everything it held, given back once
        the removal is written (``commit``).  ``carried`` (and over a shared storage):
        cleared in the removal's own commit (``Transaction.write``), so no server dying
        between the two leaks an address or a port.
        """
        spec = obj.get("spec") or {}
        txn = Transaction(carried=carried and self.shared)
        txn.to_release.extend(self._release_pairs(spec))
        for number in svc.node_ports(spec):
            offset = self.ports.offset_of(number)
            if offset >= 0:
                txn.to_release.append((self.port_bitmap, offset))
        return txn

    # -- repair -----------------------------------------------------------------------------

    @inlineCallbacks
    def repair(self, services, leaks: dict):
        """Rebuild every bitmap from ``services`` (dicts), see ``Repair``."""
        in_use: dict = {bitmap: set() for bitmap in self.bitmaps}
        for obj in services:
            spec = obj.get("spec") or {}
            if spec.get("type") != svc.EXTERNAL_NAME:
                for bitmap, offset in self._release_pairs(spec):
                    if offset in in_use[bitmap]:
                        log.warn("the cluster IP {ip} of {ns}/{name} is allocated to more "
                                 "than one service", ip=spec.get("clusterIP"),
                                 ns=obj["metadata"].get("namespace"),
                                 name=obj["metadata"].get("name"))
                    in_use[bitmap].add(offset)
            for number in svc.node_ports(spec):
                offset = self.ports.offset_of(number)
                if offset >= 0:
                    in_use[self.port_bitmap].add(offset)
        for bitmap in self.bitmaps:
            yield bitmap.rebuild(in_use[bitmap], leaks.setdefault(bitmap.key, {}))


def _should_allocate_node_ports(spec: dict) -> bool:
    if spec.get("type") == svc.NODE_PORT:
        return True
    if spec.get("type") == svc.LOAD_BALANCER:
        return spec.get("allocateLoadBalancerNodePorts") is not False
    return False


def _matching_prefer_dual_stack(spec: dict, old_spec: Optional[dict]) -> bool:
    """Upstream's ``isMatchingPreferDualStackClusterIPFields``."""
    if old_spec is None or spec.get("ipFamilyPolicy") is None:
        return False
    if old_spec.get("type") != spec.get("type"):
        return False
    if spec.get("type") not in (svc.CLUSTER_IP, svc.NODE_PORT, svc.LOAD_BALANCER):
        return False
    if spec.get("ipFamilyPolicy") != svc.PREFER_DUAL_STACK:
        return False
    if old_spec.get("ipFamilyPolicy") not in (None, svc.PREFER_DUAL_STACK):
        return False
    return _same(old_spec, spec, "clusterIPs") and _same(old_spec, spec, "ipFamilies")


def _patch_allocated_values(spec: dict, old_spec: dict) -> None:
    """Upstream's ``patchAllocatedValues``: what a client left out is kept."""
    if svc.needs_cluster_ip(old_spec) and svc.needs_cluster_ip(spec):
        if not spec.get("clusterIP") and old_spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
        if not spec.get("clusterIPs") and old_spec.get("clusterIPs"):
            spec["clusterIPs"] = list(old_spec["clusterIPs"])
    if svc.needs_node_port(old_spec) and svc.needs_node_port(spec):
        def used(s):
            return {p.get("nodePort") for p in s.get("ports") or () if p.get("nodePort")}
        both = used(old_spec) & used(spec)
        by_name = {p.get("name", ""): p.get("nodePort", 0) for p in old_spec.get("ports") or ()}
        for port in spec.get("ports") or ():
            if not port.get("nodePort"):
                old_value = by_name.get(port.get("name", ""), 0)
                if old_value and old_value not in both:
                    port["nodePort"] = old_value
    if svc.needs_health_check(old_spec) and svc.needs_health_check(spec):
        if not spec.get("healthCheckNodePort") and old_spec.get("healthCheckNodePort"):
            spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]


class Repair:
    """Runs ``Allocators.repair`` at start and every ``REPAIR_INTERVAL`` seconds over the
    services ``list_services()`` gives (dicts)."""

    def __init__(self, clock, allocators: Allocators, list_services: Callable,
                 interval: float = REPAIR_INTERVAL):
        self.clock = clock
        self.allocators = allocators
        self.list_services = list_services
        self.interval = interval
        self.leaks: dict = {}
        self._call = None
        self._running = None

    def run_once(self):
        return self.allocators.repair(self.list_services(), self.leaks)

    def start(self):
        d = self.run_once()
        d.addCallback(lambda _: self._schedule())
        return d

    def _schedule(self) -> None:
        self._call = self.clock.callLater(self.interval, self._tick)

    def _tick(self) -> None:
        self._call = None
        self._running = d = self.run_once()
        d.addErrback(self._failed)
        d.addBoth(lambda _: setattr(self, "_running", None))
        d.addCallback(lambda _: self._schedule() if self._call is None and
                      not self._stopped else None)

    _stopped = False

    def _failed(self, failure) -> None:
        """A round that failed (storage unavailable): tried again at the next; quiet
        once stopping (the storage may be going)."""
        if not self._stopped:
            log.warn("repairing the service allocations failed: {why}",
                     why=failure.getErrorMessage())

    def stop(self):
        self._stopped = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        d = self.allocators.flush()
        d.addErrback(lambda f: log.warn("writing the service allocations at stop failed: "
                                        "{why}", why=f.getErrorMessage()))
        return d


@implementer(IWriteHooks)
class ServiceHooks:
    """
    The services' store hooks (``GenericStore.hooks``): allocation before validation
    (upstream's ``beginCreate``/``beginUpdate``), the addresses and ports released with
    the removal (``begin_delete``; upstream's ``afterDelete`` releases after it), and
    after it (``afterDelete``) the Service's Endpoints deleted.
    """

    def __init__(self, allocators: Allocators, endpoints_store=None):
        self.allocators = allocators
        self.endpoints_store = endpoints_store

    def begin_create(self, ctx, obj: dict):
        """What the Service takes, written with it (``Transaction.write``)."""
        return self.allocators.allocate_create(obj, bool(ctx is not None and ctx.dry_run),
                                               carried=True)

    def begin_update(self, ctx, new: dict, old: dict):
        """What the Service takes and gives back, written with it (``Transaction.write``)."""
        return self.allocators.allocate_update(new, old, bool(ctx is not None and ctx.dry_run),
                                               carried=True)

    def begin_delete(self, ctx, obj: dict) -> Transaction:
        """What the Service gives back, written with its removal (``Transaction.write``;
        over SQLite and memory in memory once it is removed, written behind)."""
        return self.allocators.releasing(obj)

    @inlineCallbacks
    def after_delete(self, ctx, obj: dict):
        meta = obj.get("metadata") or {}
        if self.endpoints_store is not None:
            try:
                yield self.endpoints_store.delete(internal(), meta.get("namespace"),
                                                  meta.get("name", ""))
            except errors.StatusError as e:
                if e.reason != "NotFound":
                    log.warn("deleting the endpoints of service {ns}/{name} failed: {e}",
                             ns=meta.get("namespace"), name=meta.get("name"), e=e)
