"""
The ClusterRole aggregation controller (upstream's
``pkg/controller/clusterroleaggregation``): the rules of a ClusterRole with an
``aggregationRule`` are the rules of every other ClusterRole matching any of its
``clusterRoleSelectors`` — selector by selector, matching roles by name, each rule once
(the first time it is seen); an empty selector (``{}``, valid upstream) matches every
role, as ``LabelSelectorAsSelector`` makes it.  The role is written only when that
differs from its rules.

It follows the ClusterRole informer (``cache/informers.py``): a changed ClusterRole is
recomputed when it aggregates, and so is every aggregating role a selector of which
matches the changed role's labels, old or new (``edit`` carries the
``aggregate-to-admin`` label, so a change reaching ``edit`` reaches ``admin`` next).
Roles to recompute go on the work queue (``controllers/queue.py``): one worker drains
it on a later reactor turn, so a burst of changes costs each role one sync; ``start()``
queues every aggregating role (the informer's initial adds).  Writes go through the
generic store's ``update`` as the server (``context.internal()``, field manager
``clusterrole-aggregation-controller``); a role whose sync fails is tried again through
the queue's rate limiter (upstream's ``DefaultControllerRateLimiter``: 5 ms, doubling,
at most 1000 s), and its failures are logged at most once a minute (``ratelog``): a
stored role that cannot be synced must not flood the log.
"""

from __future__ import annotations

from typing import Optional

from twisted.logger import Logger

from platformd import errors
from platformd.util import ratelog
from platformd.cache.informers import EventHandlers
from platformd.cache.watchcache import CorruptObjectError
from platformd.context import internal
from platformd.controllers.queue import WorkQueue
from platformd.controllers.worker import Controller, work
from platformd.patch.managedfields import Manager
from platformd.registry import rbac
from platformd.util.labelselectors import compile_selector, matches
from platformd.registry.bootstrap.rules import rule_key, rules_equal

log = Logger()

MANAGER = Manager("clusterrole-aggregation-controller", "Update")


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


class ClusterRoleAggregator(Controller):
    """
    ``ClusterRoleAggregator(clock, informers, stores)``: ``clock`` the reactor (or a
    Clock), ``informers`` the ``cache.informers.Informers``, ``stores`` the generic
    stores by ``kind.gvr``.  ``start()`` once the cache has loaded; ``stop()`` stops
    following it.
    """

    def __init__(self, clock, informers, stores, kind=rbac.CLUSTER_ROLE):
        super().__init__(clock)
        self.kind = kind
        self.informer = informers.for_kind(kind)
        self.store = stores[kind.gvr]
        self._log = ratelog.RateLimitedLog(log, clock=clock)

    # -- following the cache ------------------------------------------------------------

    def start(self) -> None:
        if self.queue is not None:
            return
        self.queue = WorkQueue(self.clock)
        self.follow(self.informer, EventHandlers(
            on_add=lambda new: self._changed(new, None),
            on_update=lambda old, new: self._changed(new, old),
            on_delete=lambda old: self._changed(None, old)))
        work(self.queue, self.sync, lambda name: f"aggregating ClusterRole {name} failed; retrying",
             self._log)

    def _entries(self):
        for entry in self.informer.lister.list():
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

    def _changed(self, new, old) -> None:
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
        for name in sorted(names):
            assert self.queue is not None  # handlers are registered only while started
            self.queue.add(name)

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
        entry = self.informer.lister.get(None, name)
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
