"""
The disruption controller: keeps every PodDisruptionBudget's status up to date
(upstream's ``pkg/controller/disruption/disruption.go``, v1.36).

It follows informers on PodDisruptionBudgets and Pods: a budget added, changed or
deleted, or a pod added, changed or deleted that a budget selects, puts the budget
(``(namespace, name)``) on the work queue, which one worker drains.  A sync (upstream's
``trySync``):

* the pods are those of the budget's namespace its selector matches (a null selector
  none, an empty one all);
* ``expectedPods`` and ``desiredHealthy`` (``getExpectedPodCount``): with an integer
  ``minAvailable``, the number of pods and ``minAvailable``; with a percentage
  ``minAvailable`` or any ``maxUnavailable``, the sum of the scales of the pods'
  controllers (``getExpectedScale``) — pods without a controller are left out (upstream's
  "unmanaged pods"), and a pod whose controller this server cannot find (no workload
  kinds are served here: ReplicaSets, Deployments, StatefulSets, ReplicationControllers
  and the scale subresource) is an error, ``found no controllers for pod "p"``;
  percentages are rounded up (``GetScaledValueFromIntOrPercent``);
* ``disruptedPods`` keeps the pods an eviction recorded less than two minutes ago that
  are not yet terminating (``buildDisruptedPodMap``), and the budget is looked at again
  when the first of them is due;
* ``currentHealthy`` counts the Ready pods that are neither terminating nor recorded as
  disrupted (``countHealthyPods``); ``disruptionsAllowed`` is ``currentHealthy -
  desiredHealthy`` (never below 0, and 0 while ``expectedPods`` is 0);
* the status (with ``observedGeneration`` and the ``DisruptionAllowed`` condition,
  ``SufficientPods``/``InsufficientPods``) is written through the status subresource on
  the condition that the budget has not changed, unless it already says so.

A sync that fails other than by a conflict writes the fail-safe status
(``disruptionsAllowed`` 0, ``DisruptionAllowed`` False ``SyncFailed`` with the error);
a conflict or a failed write is retried through the queue's rate limiter (5 ms doubling,
as upstream's).  Not done: events (``NoPods``, ``UnmanagedPods``, ...), and clearing a
stale ``DisruptionTarget`` pod condition after two minutes (upstream's second queue).

It is a step of the daemon's boot sequence, started once the cache has loaded.
"""

from __future__ import annotations

import calendar
import math
import re
import time
from typing import Optional

from twisted.internet.defer import inlineCallbacks
from twisted.logger import Logger

from platformd import errors
from platformd.cache.informers import EventHandlers
from platformd.context import internal
from platformd.controllers.queue import WorkQueue
from platformd.controllers.worker import Controller, work
from platformd.model.times import rfc3339
from platformd.registry.kinds import poddisruptionbudget as pdbs
from platformd.util.labelselectors import compile_selector, labels_of
from platformd.util.ratelog import RateLimitedLog

log = Logger()

#: Upstream's ``DeletionTimeout``: how long an eviction's pod may take to go.
DELETION_TIMEOUT = 2 * 60.0


def _seconds(stamp: str) -> Optional[float]:
    try:
        return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    except (TypeError, ValueError):
        return None


def _controller_of(pod: dict) -> Optional[dict]:
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


_PERCENT = re.compile(r"^([0-9]+)%$")


def scaled_value(value, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)``."""
    if isinstance(value, int):
        return value
    match = _PERCENT.match(value)
    if not value.endswith("%"):
        raise ValueError("invalid type: string is not a percentage")
    if match is None:
        raise ValueError(f'invalid value for IntOrString: invalid value "{value}"')
    return math.ceil(int(match.group(1)) * total / 100)


def expected_pod_count(pdb: dict, pods: list) -> tuple:
    """
    ``getExpectedPodCount``: ``(expectedCount, desiredHealthy, unmanaged pod names)``;
    a ``ValueError`` carries upstream's words when the count cannot be made.
    """
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        expected, unmanaged = _expected_scale(pods)
        desired = max(expected - scaled_value(spec["maxUnavailable"], expected), 0)
        return expected, desired, unmanaged
    low = spec.get("minAvailable")
    if low is None:
        return 0, 0, []
    if isinstance(low, int):
        return len(pods), low, []
    expected, unmanaged = _expected_scale(pods)
    return expected, scaled_value(low, expected), unmanaged


def _expected_scale(pods: list) -> tuple:
    """
    ``getExpectedScale``: the controllers' scales summed.  No workload controller is
    served here, so any pod with a controller is one whose controller cannot be found.
    """
    unmanaged = []
    for pod in pods:
        if _controller_of(pod) is None:
            unmanaged.append(pod["metadata"]["name"])
            continue
        raise ValueError(f'found no controllers for pod "{pod["metadata"]["name"]}"')
    return 0, unmanaged


def build_disrupted_pods(pods: list, pdb: dict, now: float) -> tuple:
    """``buildDisruptedPodMap``: ``(kept {name: time}, recheck time or None)``."""
    recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
    kept: dict = {}
    recheck = None
    if not recorded:
        return kept, recheck
    for pod in pods:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        stamp = recorded.get(meta["name"])
        if stamp is None:
            continue
        seconds = _seconds(stamp)
        expected = (seconds or 0.0) + DELETION_TIMEOUT
        if expected < now:
            log.info("pod {pod} was expected to be deleted but it wasn't, updating PDB {pdb}",
                     pod=f"{meta.get('namespace')}/{meta['name']}",
                     pdb=f"{pdb['metadata'].get('namespace')}/{pdb['metadata']['name']}")
            continue
        if recheck is None or expected < recheck:
            recheck = expected
        kept[meta["name"]] = stamp
    return kept, recheck


def count_healthy_pods(pods: list, disrupted: dict, now: float) -> int:
    """``countHealthyPods``."""
    healthy = 0
    for pod in pods:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        stamp = disrupted.get(meta["name"])
        if stamp is not None and (_seconds(stamp) or 0.0) + DELETION_TIMEOUT > now:
            continue
        if pdbs.pod_ready(pod):
            healthy += 1
    return healthy


def _failed(key) -> str:
    namespace, name = key
    return f"syncing PodDisruptionBudget {namespace}/{name} failed; retrying"


class DisruptionController(Controller):
    """``DisruptionController(clock, informers, stores, pdb_kind, pod_kind)``."""

    def __init__(self, clock, informers, stores, pdb_kind, pod_kind):
        super().__init__(clock)
        self.budgets = informers.for_kind(pdb_kind)
        self.pods = informers.for_kind(pod_kind)
        self.store = stores[pdb_kind.gvr]
        self._failures = RateLimitedLog(log, clock=clock)

    def start(self):
        if self.queue is not None:
            return
        self.queue = queue = WorkQueue(self.clock)

        def budget(entry):
            queue.add((entry.namespace, entry.name))

        def pod_changed(entry):
            if entry is None:
                return
            try:
                pod = entry.obj
            except Exception:  # a corrupt object selects nothing
                return
            for found in self._budgets_for(pod):
                queue.add((found.namespace, found.name))

        self.follow(self.budgets, EventHandlers(
            on_add=budget, on_update=lambda old, new: budget(new), on_delete=budget))
        self.follow(self.pods, EventHandlers(
            on_add=pod_changed,
            on_update=lambda old, new: (pod_changed(old), pod_changed(new)),
            on_delete=pod_changed))
        work(queue, self._sync, _failed, self._failures)

    def _budgets_for(self, pod: dict) -> list:
        """The budgets of the pod's namespace whose selector matches it."""
        namespace = pod["metadata"].get("namespace")
        labels = labels_of(pod)
        found = []
        for entry in self.budgets.lister.list(namespace):
            matches, ok = pdbs.selector_of(entry.obj)
            if ok and matches(labels):
                found.append(entry)
        return found

    @inlineCallbacks
    def _sync(self, key: tuple):
        namespace, name = key
        entry = self.budgets.lister.get(namespace, name)
        if entry is None:
            return
        pdb = entry.mutable()
        try:
            yield self._try_sync(key, pdb)
        except errors.StatusError as e:
            if e.code == 409:
                raise
            yield self._fail_safe(pdb, str(e))
        except ValueError as e:
            yield self._fail_safe(pdb, str(e))

    @inlineCallbacks
    def _try_sync(self, key: tuple, pdb: dict):
        selector = (pdb.get("spec") or {}).get("selector")
        if selector is not None:
            compile_selector(selector)  # an invalid one fails the sync with its words
        matches, _ = pdbs.selector_of(pdb)
        namespace = pdb["metadata"]["namespace"]
        pods = [entry.obj for entry in self.pods.lister.list(namespace)
                if matches(labels_of(entry.obj))]
        expected, desired, _unmanaged = expected_pod_count(pdb, pods)
        now = self.clock.seconds()
        disrupted, recheck = build_disrupted_pods(pods, pdb, now)
        healthy = count_healthy_pods(pods, disrupted, now)
        yield self._update_status(pdb, healthy, desired, expected, disrupted)
        if recheck is not None and self.queue is not None:
            self.queue.add_after(key, recheck - now)

    def _update_status(self, pdb: dict, healthy: int, desired: int, expected: int,
                       disrupted: dict):
        """``updatePdbStatus``: nothing when the status already says it all."""
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        status = pdb.get("status") or {}
        generation = pdb["metadata"].get("generation") or 0
        if (status.get("currentHealthy", 0) == healthy
                and status.get("desiredHealthy", 0) == desired
                and status.get("expectedPods", 0) == expected
                and status.get("disruptionsAllowed", 0) == allowed
                and (status.get("disruptedPods") or {}) == disrupted
                and status.get("observedGeneration", 0) == generation
                and pdbs.conditions_up_to_date(pdb)):
            return None
        new_status: dict = {"observedGeneration": generation}
        if disrupted:
            new_status["disruptedPods"] = disrupted
        new_status.update(disruptionsAllowed=allowed, currentHealthy=healthy,
                          desiredHealthy=desired, expectedPods=expected)
        if status.get("conditions") is not None:
            new_status["conditions"] = status["conditions"]
        pdbs.set_disruption_allowed_condition(new_status, rfc3339(self.clock.seconds()))
        pdb["status"] = new_status
        return self._write(pdb)

    def _fail_safe(self, pdb: dict, message: str):
        """``failSafe``: no disruption allowed, and why (``SyncFailed``)."""
        status = pdb.setdefault("status", {})
        status["disruptionsAllowed"] = 0
        conditions = status.setdefault("conditions", [])
        pdbs.set_condition(conditions, {
            "type": pdbs.DISRUPTION_ALLOWED, "status": "False", "reason": pdbs.SYNC_FAILED,
            "message": message, "observedGeneration": status.get("observedGeneration", 0)},
            rfc3339(self.clock.seconds()))
        return self._write(pdb)

    def _write(self, pdb: dict):
        """The status, on the condition that the budget is still the one read."""
        meta = pdb["metadata"]
        return self.store.update(internal(), meta["namespace"], meta["name"],
                                 lambda current: pdb, subresource="status")
