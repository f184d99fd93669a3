"""
This node's pods, as the reactor knows them: the Pod kind's informer (the watch cache's)
filtered to ``spec.nodeName == node name``, indexed by UID, and the watchers to tell
about changes.
Everything here runs on the reactor; the gRPC threads call in through
``blockingCallFromThread`` and hear back through each watcher's ``WatchQueue``.

Lifecycle: ``initialising`` (every call is FAILED_PRECONDITION, spec 7.3) until ``start``
— called once the watch cache has loaded — then ``serving`` from memory alone, so the
answers stay available when the backing store is unreachable (spec 4.10.4); ``stop``
ends every watcher and refuses further calls with UNAVAILABLE.

How a pod leaving the node shows on a watch (the spec leaves it open): a pod deleted from
the store, or no longer bound to this node, is sent one last time as its last known
state, with ``metadata.deletionTimestamp`` set (the removal time, unless it was already
set), ``metadata.resourceVersion`` the revision of the removal and the annotation
``REMOVED_ANNOTATION`` giving why: ``Deleted`` or ``NodeChanged``.  A pod that is only
terminating (deletionTimestamp set, still stored) has no such annotation.
"""

from __future__ import annotations

import builtins

import grpc

from platformd.informing import EventHandlers, IInformer
from platformd.podinfo import errors
from platformd.podinfo.encoding import PodVersion
from platformd.podinfo.errors import PodsError
from platformd.podinfo.watchqueue import WatchQueue
from platformd.model.times import rfc3339

#: Set on the last message about a pod that left this node (see module docstring).
REMOVED_ANNOTATION = "pods.nodeagent.platform.io/removed"
DELETED, NODE_CHANGED = "Deleted", "NodeChanged"

INITIALISING, SERVING, STOPPED = "initialising", "serving", "stopped"


def _node_of(obj: dict) -> str:
    return (obj.get("spec") or {}).get("nodeName") or ""


def removed(obj: dict, why: str, revision: int, now: float) -> dict:
    """The last message about a pod that left this node: ``obj`` marked as removed."""
    meta = dict(obj.get("metadata") or {})
    meta["resourceVersion"] = str(revision)
    meta.setdefault("deletionTimestamp", rfc3339(now))
    meta["annotations"] = {**(meta.get("annotations") or {}), REMOVED_ANNOTATION: why}
    return {**obj, "metadata": meta}


class NodePods:
    """See the module docstring.  ``max_watchers`` bounds the open WatchPods streams."""

    def __init__(self, informer: IInformer, node_name: str, clock, max_watchers: int):
        #: The Pod kind's informer.
        self.informer = informer
        self._registration: object = None  # the informer's, while serving
        self.node_name = node_name
        self.clock = clock
        self.max_watchers = max_watchers
        self.state = INITIALISING
        #: This node's pods by UID.
        self.pods: dict = {}
        #: The open watch streams' queues (a dict for its order and O(1) removal).
        self.watchers: dict = {}

    def start(self) -> None:
        """
        The cache has loaded: index this node's pods (the informer's initial adds,
        delivered at once) and follow their changes.
        """
        if self.state != INITIALISING:
            return
        self._registration = self.informer.add_handler(EventHandlers(
            on_add=lambda new: self._changed(new, None, new.revision),
            on_update=lambda old, new: self._changed(new, old, new.revision),
            on_delete=lambda old: self._changed(None, old, old.revision)))
        self.state = SERVING

    def stop(self) -> None:
        if self.state == SERVING:
            self.informer.remove_handler(self._registration)
        self.state = STOPPED
        for queue in list(self.watchers):
            queue.end(errors.stopping())
        self.watchers.clear()

    # Called from gRPC threads through blockingCallFromThread.

    def list(self) -> list:
        self._check()
        return list(self.pods.values())

    def get(self, uid: str) -> PodVersion:
        self._check()
        version = self.pods.get(uid)
        if version is None:
            raise PodsError(grpc.StatusCode.NOT_FOUND,
                            f'pod with UID "{uid}" not found on node "{self.node_name}"')
        return version

    def watch(self, queue: WatchQueue) -> builtins.list:
        """Register ``queue`` for every later change; the current pods, to send first."""
        self._check()
        if len(self.watchers) >= self.max_watchers:
            raise PodsError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                            f"too many pod watchers (at most {self.max_watchers}); retry later")
        self.watchers[queue] = None
        return list(self.pods.values())

    def unwatch(self, queue: WatchQueue) -> None:
        self.watchers.pop(queue, None)

    def _check(self) -> None:
        if self.state == INITIALISING:
            raise errors.not_synced()
        if self.state == STOPPED:
            raise errors.stopping()

    def _changed(self, new, old, revision: int) -> None:
        """
        A pod changed somewhere (``new`` None: deleted, at ``revision``); tell the
        watchers if it is ours.
        """
        node = self.node_name
        if new is not None and _node_of(new.obj) == node:
            version = PodVersion(new.obj)
            self.pods[version.uid] = version
        elif old is not None and _node_of(old.obj) == node:
            why = DELETED if new is None else NODE_CHANGED
            version = PodVersion(removed(old.obj, why, revision, self.clock.seconds()))
            self.pods.pop(version.uid, None)
        else:
            return
        for queue in list(self.watchers):
            if not queue.offer(version):
                del self.watchers[queue]
