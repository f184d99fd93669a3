"""
The watch cache as the handlers read it: an object, a collection at the version spec
4.9's tables choose, and the starting point of a watch — and nothing else.

The handlers (``api/reads.py``, ``api/watch.py``) parse the request, ask ``CacheReader``
for a ``Listing`` or a ``WatchStart`` and render it; which revision a plan means, how
long to wait for a version not yet seen (504 ``Too large resource version``), when a
version is gone (410), how an older state is rebuilt (snapshots, the event history, or
the backing store with ``ListFromCacheSnapshot`` off) and how continue tokens are
scoped to their collection all live here.  An etcd-backed cache (issue 17) answers the
same interface, which is what lets a replica serve another's resourceVersion.

A kind added at run time (``WatchCache.add_kind``) is read once loaded: a request that
arrives while it loads waits for it (at most ``wait`` seconds, then 429 ``storage is
(re)initializing``, upstream's answer while a cacher is not ready); its history begins
at its load (``WatchCache.horizon_of``: older versions are 410 Gone).  A kind not served
(never added, or removed, perhaps while the request waited) is 404, as a path that
names no resource; a removed kind's snapshots are dropped with it.
"""

from __future__ import annotations

from typing import Optional

import attrs
from twisted.internet.defer import Deferred, inlineCallbacks, returnValue
from zope.interface import Attribute, Interface, implementer

from platformd import errors
from platformd.cache import continuetokens
from platformd.cache.watchcache import CachedObject
from platformd.informing import UnknownKindError

# Read plans (spec 4.9), as ``api/listoptions.ListOptions.list_plan`` names them.
MOST_RECENT = "MostRecent"
ANY = "Any"
NOT_OLDER = "NotOlderThan"
EXACTLY = "Exact"
CONTINUATION = "Continuation"

#: How long a read of a version the cache has not reached waits for it (spec 4.9).
TOO_LARGE_WAIT = 3.0


@attrs.frozen
class Listing:
    """A collection at one revision: every object in scope, in key order."""

    revision: int
    entries: list
    #: The key a continuation resumes at ("" for a first page).
    start: str
    #: When the paged list this page belongs to began (a token's age counts from it).
    issued: float
    prefix: str


@attrs.frozen
class WatchStart:
    """Where a watch begins (spec 4.9's watch table)."""

    revision: int
    #: The current state, sent as ADDED events first (Get State), else empty.
    initial: list
    #: Held events after ``revision`` to replay (Start at Exact), else empty.
    replay: object
    #: The revision of the initial-events-end bookmark, or None for none.
    end_bookmark: Optional[int]


class ICacheReader(Interface):
    revision = Attribute("The newest revision the cache holds.")
    clock = Attribute("The clock the cache keeps time by.")

    def sync():
        """
        Deferred firing once the cache holds every write committed before the call, or
        None when it does already (``WatchCache.sync``).
        """

    def list(kind, namespace, plan, resource_version, continue_token, limit):
        """Deferred[Listing] (spec 4.9's list table; 410, 504 as it says)."""

    def continue_token(listing, next_start):
        """The continue token of the page after ``listing``'s, starting at key ``next_start``."""

    def watch_start(kind, namespace, options):
        """Deferred[WatchStart] (spec 4.9's watch table)."""

    def bookmark_revision(kind):
        """The revision a bookmark of ``kind``'s watch may carry now."""

    def subscribe(kind, namespace, watcher):
        """
        Offer ``watcher`` every later event of ``kind`` in ``namespace`` ("" for all)
        (``watcher.offer(event)``); once the kind stops being served (at once if it is
        not), ``watcher.kind_removed()``: nothing more comes.
        """

    def unsubscribe(kind, namespace, watcher):
        """Stop offering events to ``watcher`` (nothing for a kind no longer served)."""


@implementer(ICacheReader)
class CacheReader:
    def __init__(self, cache, snapshots, storage, gates, wait: float = TOO_LARGE_WAIT):
        self.cache = cache
        self.snapshots = snapshots
        self.storage = storage
        self.gates = gates
        self.wait = wait
        cache.when_kind_removed(lambda kind: snapshots.drop(kind.storage_prefix))

    @property
    def revision(self) -> int:
        return self.cache.revision

    @property
    def clock(self):
        return self.cache.clock

    def sync(self):
        """
        Bring the cache up to every write committed before now, by any server over the
        same storage (upstream's ``ConsistentListFromCache``: a quorum read of the
        current revision, then wait for the cache to reach it).
        """
        return self.cache.sync()

    @inlineCallbacks
    def reach(self, revision: int):
        """Wait until the cache holds ``revision``; 504 Too large resource version if not."""
        if self.cache.revision >= revision:
            return
        yield self.sync()  # written through another server, perhaps
        if self.cache.revision >= revision:
            return
        reached = yield self.cache.wait_for(revision, self.wait)
        if not reached:
            raise too_large(revision, self.cache.revision)

    def until_loaded(self, kind) -> Optional[Deferred]:
        """
        None when ``kind`` is loaded (no Deferred on the common path); else a Deferred
        firing once its load (``WatchCache.add_kind``) is in, 429 if it takes longer
        than ``wait``.  404 for a kind not served.
        """
        try:
            if self.cache.for_kind(kind).loaded:
                return None
        except UnknownKindError:
            raise errors.not_found_path() from None
        return self.cache.wait_loaded(kind, self.wait).addCallback(self._after_load, kind)

    def _after_load(self, _loaded: bool, kind) -> None:
        """Loaded: go on; removed meanwhile: 404; still loading (timed out): 429."""
        self._kind_cache(kind)

    def _kind_cache(self, kind):
        """``kind``'s loaded cache now (after a wait: it may have been removed), or 404."""
        try:
            kind_cache = self.cache.for_kind(kind)
        except UnknownKindError:
            raise errors.not_found_path() from None
        if not kind_cache.loaded:  # removed and added again meanwhile
            raise _initializing()
        return kind_cache

    @inlineCallbacks
    def list(self, kind, namespace: str, plan: str, resource_version: Optional[int],
             continue_token: str = "", limit: Optional[int] = None):
        prefix = _prefix(kind, namespace)
        yield self.until_loaded(kind)  # (None: on at once)
        if plan == CONTINUATION:
            token = continuetokens.decode(continue_token, prefix)
            if self.snapshots.expired(token):
                raise continuetokens.gone()
            yield self.reach(token.revision)  # a token from another server, perhaps
            entries = yield self._state(kind, prefix, token.revision, continuation=True)
            # A token dated after now (forged, or from a replica whose clock runs ahead)
            # counts from now: the next page's token carries now, so its TTL runs.
            issued = min(token.issued, self.clock.seconds())
            returnValue(Listing(token.revision, entries, token.start, issued, prefix))
        if plan in (EXACTLY, NOT_OLDER):
            if resource_version is None:
                raise ValueError(f"the {plan} plan needs a resourceVersion")
            yield self.reach(resource_version)
            if plan == EXACTLY:
                entries = yield self._state(kind, prefix, resource_version)
                returnValue(Listing(resource_version, entries, "", self.clock.seconds(),
                                    prefix))
        elif plan == MOST_RECENT:
            yield self.sync()  # a consistent read
        kind_cache = yield self._ready(kind, self.cache.revision)
        revision = kind_cache.state_revision(self.cache.revision)
        entries = kind_cache.current(prefix)
        if limit:
            self.snapshots.put(prefix, revision, entries)
        returnValue(Listing(revision, entries, "", self.clock.seconds(), prefix))

    def continue_token(self, listing: Listing, next_start: str) -> str:
        return continuetokens.encode(
            continuetokens.Token(listing.revision, next_start, listing.issued), listing.prefix)

    @inlineCallbacks
    def _ready(self, kind, revision: int):
        """``kind``'s cache once it holds what the cache held at ``revision`` (a
        converted version view may still be converting: ``KindCache.ready_at``; its
        conversion's error is the read's)."""
        yield self._kind_cache(kind).ready_at(revision)
        return self._kind_cache(kind)

    def bookmark_revision(self, kind) -> int:
        """The revision a bookmark of ``kind``'s watch may carry: every event of the
        kind up to it has been offered (a converted view's may lag the cache's)."""
        try:
            return self.cache.for_kind(kind).state_revision(self.cache.revision)
        except UnknownKindError:
            return self.cache.revision

    @inlineCallbacks
    def _state(self, kind, prefix: str, revision: int, continuation: bool = False):
        """The objects under ``prefix`` at ``revision`` in key order, or 410 Gone."""
        kind_cache = yield self._ready(kind, revision)
        if revision == kind_cache.state_revision(self.cache.revision):
            entries = kind_cache.current(prefix)
            self.snapshots.put(prefix, revision, entries)
            returnValue(entries)
        snapshot = self.snapshots.get(prefix, revision)
        if snapshot is not None:
            returnValue(snapshot)
        horizon = self.cache.horizon_of(kind)
        if revision < horizon:
            if continuation:
                raise continuetokens.gone()
            raise errors.gone(f"too old resource version: {revision} ({horizon})")
        if revision > self.cache.revision:
            raise too_large(revision, self.cache.revision)
        if self.gates["ListFromCacheSnapshot"] or kind_cache.feed is not None:
            # (A converted view's objects are not those stored: its history has them.)
            entries = kind_cache.state_at(prefix, revision)
        else:
            result = yield self.storage.range(prefix, revision)
            entries = [CachedObject(kv.key, kv.value, kv.mod_revision, kv.create_revision)
                       for kv in result.kvs]
        self.snapshots.put(prefix, revision, entries)
        returnValue(entries)

    @inlineCallbacks
    def watch_start(self, kind, namespace: str, options):
        """
        Get State and Start at Most Recent (no version, or ``sendInitialEvents``), Start
        at Most Recent without state (``sendInitialEvents=false``), or Start at Exact:
        replay the held events after the version (410 once they are gone).
        """
        rv = options.resource_version
        initial_events = options.send_initial_events
        yield self.until_loaded(kind)  # (None: on at once)
        if rv:
            yield self.reach(rv)
        elif initial_events:
            # Upstream starts such a watch at etcd's current revision (the cacher's
            # getWatchCacheResourceVersion); unset alone is its legacy "any" start.
            yield self.sync()
        kind_cache = yield self._ready(kind, rv or self.cache.revision)
        if initial_events or (not rv and initial_events is None):
            revision = kind_cache.state_revision(self.cache.revision)
            end = revision if initial_events and options.allow_bookmarks else None
            returnValue(WatchStart(revision, kind_cache.current(_prefix(kind, namespace)), (),
                                   end))
        if not rv:
            returnValue(WatchStart(kind_cache.state_revision(self.cache.revision), [], (),
                                   None))
        horizon = self.cache.horizon_of(kind)
        if rv < horizon:
            raise errors.gone(f"too old resource version: {rv} ({horizon})")
        returnValue(WatchStart(rv, [], kind_cache.events_after(rv), None))

    def subscribe(self, kind, namespace: str, watcher) -> None:
        try:
            kind_cache = self.cache.for_kind(kind)
        except UnknownKindError:
            kind_cache = None
        if kind_cache is None or kind_cache.removed:
            watcher.kind_removed()  # removed since the watch started
        else:
            kind_cache.add_watcher(namespace, watcher)

    def unsubscribe(self, kind, namespace: str, watcher) -> None:
        try:
            kind_cache = self.cache.for_kind(kind)
        except UnknownKindError:
            return  # its watchers went with it
        kind_cache.remove_watcher(namespace, watcher)


def _prefix(kind, namespace: str) -> str:
    """The storage keys of ``kind`` in ``namespace`` (every namespace when empty)."""
    return kind.namespace_prefix(namespace) if namespace and kind.namespaced \
        else kind.storage_prefix


def _initializing() -> errors.StatusError:
    """Upstream's answer while a cacher is not ready (``NewTooManyRequests``)."""
    return errors.StatusError(429, "TooManyRequests", "storage is (re)initializing",
                              retry_after=1)


def too_large(requested: int, current: int) -> errors.StatusError:
    return errors.StatusError(
        # storage.NewTooLargeResourceVersionError -> apierrors.NewTimeoutError's prefix.
        504, "Timeout", f"Timeout: Too large resource version: {requested}, current: {current}",
        causes=(errors.Cause("ResourceVersionTooLarge", "Too large resource version", ""),),
        retry_after=1)
