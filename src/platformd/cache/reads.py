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
"""

from __future__ import annotations

from typing import Optional

import attrs
from twisted.internet.defer import inlineCallbacks, returnValue
from zope.interface import Attribute, Interface, implementer

from platformd import errors
from platformd.cache import continuetokens
from platformd.cache.watchcache import CachedObject

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

    def subscribe(kind, namespace, watcher):
        """Offer ``watcher`` every later event of ``kind`` in ``namespace`` ("" for all)."""

    def unsubscribe(kind, namespace, watcher):
        """Stop offering events to ``watcher``."""


@implementer(ICacheReader)
class CacheReader:
    def __init__(self, cache, snapshots, storage, gates, wait: float = TOO_LARGE_WAIT):
        self.cache = cache
        self.snapshots = snapshots
        self.storage = storage
        self.gates = gates
        self.wait = wait

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

    @inlineCallbacks
    def list(self, kind, namespace: str, plan: str, resource_version: Optional[int],
             continue_token: str = "", limit: Optional[int] = None):
        prefix = _prefix(kind, namespace)
        kind_cache = self.cache.for_kind(kind)
        if plan == CONTINUATION:
            token = continuetokens.decode(continue_token, prefix)
            if self.snapshots.expired(token):
                raise continuetokens.gone()
            yield self.reach(token.revision)  # a token from another server, perhaps
            entries = yield self._state(kind_cache, prefix, token.revision, continuation=True)
            # A token dated after now (forged, or from a replica whose clock runs ahead)
            # counts from now: the next page's token carries now, so its TTL runs.
            issued = min(token.issued, self.clock.seconds())
            returnValue(Listing(token.revision, entries, token.start, issued, prefix))
        if plan in (EXACTLY, NOT_OLDER):
            if resource_version is None:
                raise ValueError(f"the {plan} plan needs a resourceVersion")
            yield self.reach(resource_version)
            if plan == EXACTLY:
                entries = yield self._state(kind_cache, prefix, resource_version)
                returnValue(Listing(resource_version, entries, "", self.clock.seconds(),
                                    prefix))
        elif plan == MOST_RECENT:
            yield self.sync()  # a consistent read
        revision = self.cache.revision
        entries = kind_cache.current(prefix)
        if limit:
            self.snapshots.put(prefix, revision, entries)
        returnValue(Listing(revision, entries, "", self.clock.seconds(), prefix))

    def continue_token(self, listing: Listing, next_start: str) -> str:
        return continuetokens.encode(
            continuetokens.Token(listing.revision, next_start, listing.issued), listing.prefix)

    @inlineCallbacks
    def _state(self, kind_cache, prefix: str, revision: int, continuation: bool = False):
        """The objects under ``prefix`` at ``revision`` in key order, or 410 Gone."""
        if revision == self.cache.revision:
            entries = kind_cache.current(prefix)
            self.snapshots.put(prefix, revision, entries)
            returnValue(entries)
        snapshot = self.snapshots.get(prefix, revision)
        if snapshot is not None:
            returnValue(snapshot)
        if revision < self.cache.horizon:
            if continuation:
                raise continuetokens.gone()
            raise errors.gone(f"too old resource version: {revision} ({self.cache.horizon})")
        if revision > self.cache.revision:
            raise too_large(revision, self.cache.revision)
        if self.gates["ListFromCacheSnapshot"]:
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
        if rv:
            yield self.reach(rv)
        elif initial_events:
            # Upstream starts such a watch at etcd's current revision (the cacher's
            # getWatchCacheResourceVersion); unset alone is its legacy "any" start.
            yield self.sync()
        kind_cache = self.cache.for_kind(kind)
        if initial_events or (not rv and initial_events is None):
            revision = self.cache.revision
            end = revision if initial_events and options.allow_bookmarks else None
            returnValue(WatchStart(revision, kind_cache.current(_prefix(kind, namespace)), (),
                                   end))
        if not rv:
            returnValue(WatchStart(self.cache.revision, [], (), None))
        if rv < self.cache.horizon:
            raise errors.gone(f"too old resource version: {rv} ({self.cache.horizon})")
        returnValue(WatchStart(rv, [], kind_cache.events_after(rv), None))

    def subscribe(self, kind, namespace: str, watcher) -> None:
        self.cache.for_kind(kind).add_watcher(namespace, watcher)

    def unsubscribe(self, kind, namespace: str, watcher) -> None:
        self.cache.for_kind(kind).remove_watcher(namespace, watcher)


def _prefix(kind, namespace: str) -> str:
    """The storage keys of ``kind`` in ``namespace`` (every namespace when empty)."""
    return kind.namespace_prefix(namespace) if namespace and kind.namespaced \
        else kind.storage_prefix


def too_large(requested: int, current: int) -> errors.StatusError:
    return errors.StatusError(
        # storage.NewTooLargeResourceVersionError -> apierrors.NewTimeoutError's prefix.
        504, "Timeout", f"Timeout: Too large resource version: {requested}, current: {current}",
        causes=(errors.Cause("ResourceVersionTooLarge", "Too large resource version", ""),),
        retry_after=1)
