"""
What one watcher may see (spec 2.1.7, 4.5, 4.6): the objects of its kind under its key
prefix (its namespace, for a namespaced watch) that match its label, field and shard
selectors.

Every object a watch stream sends — the initial state, replayed history after a
resourceVersion, live events — is judged by the stream's ``WatchScope`` and nothing
else.  The watch cache indexes live watchers by namespace only to save work; no path
relies on that index, or on a caller having filtered first, to keep another
namespace's or another selection's objects out of a stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import attrs

from platformd.cache.watchcache import ADDED, DELETED, MODIFIED, CorruptObjectError

if TYPE_CHECKING:
    from platformd.api.listoptions import ListOptions


@attrs.frozen
class WatchScope:
    #: Storage key prefix: ``/registry/{resource}/`` or ``/registry/{resource}/{ns}/``.
    prefix: str
    #: The watch's ``ListOptions``: ``matches(obj)`` for its selectors, ``filtered``
    #: when it has any.
    options: ListOptions

    def admits(self, entry) -> bool:
        """Whether one object version (a ``CachedObject``) is in scope."""
        if not entry.key.startswith(self.prefix):
            return False
        if not self.options.filtered:
            return True
        try:
            return self.options.matches(entry.obj)
        except CorruptObjectError:
            # Undecodable bytes match no selector; an unfiltered watch still hears of
            # the object (as a stub) so that it can drop it.
            return False

    def event_type(self, event) -> Optional[str]:
        """
        The type ``event`` (a ``CacheEvent``) has for this watcher, or None when the
        watcher must not hear of it.  With selectors, an object that starts matching
        arrives as ADDED and one that stops matching as DELETED (carrying its last
        matching content), as upstream's cacheWatcher turns updates into transitions.
        """
        if not event.key.startswith(self.prefix):
            return None
        if not self.options.filtered:
            return event.type
        new_ok = event.new is not None and self.admits(event.new)
        old_ok = event.old is not None and self.admits(event.old)
        if new_ok:
            return MODIFIED if old_ok else ADDED
        return DELETED if old_ok else None
