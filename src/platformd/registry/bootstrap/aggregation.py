"""
The ClusterRole aggregation controller (upstream's
``pkg/controller/clusterroleaggregation``): the rules of a ClusterRole with an
``aggregationRule`` are the rules of every other ClusterRole matching any of its
``clusterRoleSelectors`` — selector by selector, matching roles by name, each rule once
(the first time it is seen); an empty selector (``{}``, valid upstream) matches every
role, as ``LabelSelectorAsSelector`` makes it.  The role is written only when that
differs from its rules.

It follows the watch cache (a ``KindCache`` listener, on the reactor): a changed
ClusterRole is recomputed when it aggregates, and so is every aggregating role a
selector of which matches the changed role's labels, old or new (``edit`` carries the
``aggregate-to-admin`` label, so a change reaching ``edit`` reaches ``admin`` next).
Roles to recompute are gathered and done in one pass on a later reactor turn
(``clock.callLater(0, ...)``), so a burst of changes costs one pass; ``start()`` does a
full pass.  Writes go through the generic store's ``update`` as the server
(``context.internal()``, field manager ``clusterrole-aggregation-controller``); a role
whose sync fails is tried again as upstream's workqueue retries it (``retry_delay``),
and its failures are logged at most once a minute (``ratelog``): a stored role that
cannot be synced must not flood the log.
"""

from __future__ import annotations

from typing import Optional

from twisted.internet.defer import inlineCallbacks
from twisted.logger import Logger

from platformd import errors, ratelog
from platformd.cache.watchcache import CorruptObjectError
from platformd.context import internal
from platformd.patch.managedfields import Manager
from platformd.registry import rbac
from platformd.labelselectors import compile_selector, matches
from platformd.registry.bootstrap.rules import rule_key, rules_equal

log = Logger()

MANAGER = Manager("clusterrole-aggregation-controller", "Update")
#: Upstream's ``DefaultTypedControllerRateLimiter`` per item: the first retry after
#: 5 ms, each next one after twice as long, at most 1000 s.
RETRY_BASE, RETRY_MAX = 0.005, 1000.0


def retry_delay(failures: int) -> float:
    """Seconds before the retry that follows ``failures`` failures in a row (1, 2 ...)."""
    return min(RETRY_BASE * 2 ** min(failures - 1, 64), RETRY_MAX)


def _labels(entry) -> dict:
    return (entry.obj.get("metadata") or {}).get("labels") or {}


def _selectors(obj: dict, warnings: ratelog.RateLimitedLog) -> Optional[list]:
    """
    The compiled selectors of an aggregating role (None when it does not aggregate;
    each is None when it matches everything, for ``matches``).
    """
    rule = obj.get("aggregationRule")
    if rule is None:
        return None
    try:
        return [compile_selector(s) for s in rule.get("clusterRoleSelectors") or ()]
    except ValueError as e:
        warnings.warn(f"ClusterRole {obj['metadata'].get('name')} has an invalid "
                      f"aggregation selector: {e}")
        return []


class ClusterRoleAggregator:
    """
    ``ClusterRoleAggregator(clock, cache, stores)``: ``clock`` the reactor (or a Clock),
    ``cache`` the ``WatchCache``, ``stores`` the generic stores by ``kind.gvr``.
    ``start()`` once the cache has loaded; ``stop()`` stops following it.
    """

    def __init__(self, clock, cache, stores, kind=rbac.CLUSTER_ROLE):
        self.clock = clock
        self.kind = kind
        self.cache = cache.for_kind(kind)
        self.store = stores[kind.gvr]
        self._pending: set = set()
        self._call = None
        self._retries: dict = {}
        #: Failures in a row per role, for ``retry_delay`` (forgotten on success).
        self._failures: dict = {}
        self._log = ratelog.RateLimitedLog(log, clock=clock)
        self._running = False
        self._following = False

    # -- following the cache ------------------------------------------------------------

    def start(self) -> None:
        if self._following:
            return
        self._following = True
        self.cache.listeners.append(self._changed)
        self._schedule(name for name, _ in self._aggregating())

    def stop(self) -> None:
        if not self._following:
            return
        self._following = False
        self.cache.listeners.remove(self._changed)
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        for call in self._retries.values():
            if call.active():
                call.cancel()
        self._retries.clear()
        self._failures.clear()
        self._pending.clear()

    def _entries(self):
        for entry in list(self.cache.objects.values()):
            try:
                yield entry, entry.obj
            except CorruptObjectError:
                continue

    def _aggregating(self):
        """(name, compiled selectors) of every ClusterRole with an aggregation rule."""
        for entry, obj in self._entries():
            selectors = _selectors(obj, self._log)
            if selectors is not None:
                yield entry.name, selectors

    def _changed(self, type_, new, old, revision) -> None:
        names = set()
        labels = []
        for entry in (new, old):
            if entry is None:
                continue
            try:
                obj = entry.obj
            except CorruptObjectError:
                continue
            labels.append((obj.get("metadata") or {}).get("labels") or {})
            if entry is new and obj.get("aggregationRule") is not None:
                names.add(new.name)
        for name, selectors in self._aggregating():
            if any(matches(s, each) for s in selectors for each in labels):
                names.add(name)
        self._schedule(names)

    def _schedule(self, names) -> None:
        if not self._following:
            return
        self._pending.update(names)
        if self._pending and self._call is None and not self._running:
            self._call = self.clock.callLater(0, self._run)

    # -- one pass -----------------------------------------------------------------------

    @inlineCallbacks
    def _run(self):
        self._call = None
        self._running = True
        try:
            while self._pending and self._following:
                names = sorted(self._pending)
                self._pending.clear()
                for name in names:
                    try:
                        yield self.sync(name)
                    except Exception:
                        if not self._following:
                            return  # stopped meanwhile, and the storage with it
                        self._log.failure(f"aggregating ClusterRole {name} failed; retrying")
                        self._retry(name)
                    else:
                        self._failures.pop(name, None)
        finally:
            self._running = False

    def _retry(self, name: str) -> None:
        if not self._following or name in self._retries:
            return

        def again():
            self._retries.pop(name, None)
            self._schedule([name])

        failures = self._failures[name] = self._failures.get(name, 0) + 1
        self._retries[name] = self.clock.callLater(retry_delay(failures), again)

    def aggregated_rules(self, obj: dict) -> Optional[list]:
        """The rules ``obj`` should hold (None when it does not aggregate)."""
        selectors = _selectors(obj, self._log)
        if selectors is None:
            return None
        name = obj["metadata"].get("name")
        entries = sorted(self._entries(), key=lambda pair: pair[0].name)
        rules, seen = [], set()
        for selector in selectors:
            for entry, other in entries:
                if entry.name == name or not matches(selector, _labels(entry)):
                    continue
                for rule in other.get("rules") or ():
                    key = rule_key(rule)
                    if key not in seen:
                        seen.add(key)
                        rules.append(rule)
        return rules

    def sync(self, name: str):
        """
        Deferred (or None when nothing is written): recompute the ClusterRole ``name``
        and write its rules if they differ.
        """
        entry = self.cache.get(self.kind.storage_key(None, name))
        if entry is None:
            return None
        rules = self.aggregated_rules(entry.obj)
        if rules is None or rules_equal(rules, entry.obj.get("rules")):
            return None

        def updated(current):
            if current is None:
                raise errors.not_found(self.kind.plural, self.kind.group, name)
            wanted = self.aggregated_rules(current)
            if wanted is not None and not rules_equal(wanted, current.get("rules")):
                if wanted:
                    current["rules"] = [dict(r) for r in wanted]
                else:
                    current.pop("rules", None)
            return current

        d = self.store.update(internal(), None, name, updated, manager=MANAGER)
        return d.addErrback(self._gone)

    @staticmethod
    def _gone(failure):
        """A role deleted meanwhile needs nothing more."""
        failure.trap(errors.StatusError)
        if failure.value.code != 404:
            return failure
        return None
