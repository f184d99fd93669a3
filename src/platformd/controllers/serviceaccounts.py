"""
The service-account controller (upstream's ``pkg/controller/serviceaccount``
``ServiceAccountsController``): the ``default`` ServiceAccount exists in every active
namespace.

It follows informers: a namespace added or changed, or a service account deleted, puts
its namespace on the work queue (``controllers/queue.py``); syncing one creates each
missing account of ``ensure`` unless the namespace is gone or not ``Active`` (a
terminating namespace refuses new content, and that refusal is ignored as upstream).
Starting syncs every namespace already loaded (the informer's initial adds).  A failed
namespace is tried again a second later, its traceback logged once a minute.
"""

from __future__ import annotations


from twisted.internet.defer import inlineCallbacks
from twisted.logger import Logger

from platformd import errors
from platformd.cache.informers import EventHandlers
from platformd.context import internal
from platformd.controllers.queue import FixedRateLimiter, WorkQueue
from platformd.controllers.worker import Controller, work
from platformd.util.ratelog import RateLimitedLog

log = Logger()

#: Upstream's ``DefaultServiceAccountsControllerOptions``.
DEFAULT_SERVICE_ACCOUNTS = ("default",)
#: Seconds before a namespace whose accounts failed is tried again.
RETRY = 1.0


class ServiceAccountsController(Controller):
    """``ServiceAccountsController(clock, informers, stores, namespace_kind,
    service_account_kind, ensure=DEFAULT_SERVICE_ACCOUNTS)``."""

    def __init__(self, clock, informers, stores, namespace_kind, service_account_kind,
                 ensure=DEFAULT_SERVICE_ACCOUNTS):
        super().__init__(clock)
        self.namespaces = informers.for_kind(namespace_kind)
        self.accounts = informers.for_kind(service_account_kind)
        self.store = stores[service_account_kind.gvr]
        self.ensure = tuple(ensure)
        self._failures = RateLimitedLog(log, clock=clock)

    def start(self):
        if self.queue is not None:
            return
        self.queue = queue = WorkQueue(self.clock, FixedRateLimiter(RETRY))

        def account_deleted(old):
            if old.namespace:
                queue.add(old.namespace)

        self.follow(self.namespaces, EventHandlers(
            on_add=lambda new: queue.add(new.name),
            on_update=lambda old, new: queue.add(new.name)))
        self.follow(self.accounts, EventHandlers(on_delete=account_deleted))
        work(queue, self._sync,
             lambda namespace: f"creating service accounts in {namespace} failed; retrying",
             self._failures)

    @inlineCallbacks
    def _sync(self, namespace: str):
        queue = self.queue
        entry = self.namespaces.lister.get(None, namespace)
        if entry is None:
            return
        meta, status = entry.obj["metadata"], entry.obj.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase", "Active") != "Active":
            return
        for name in self.ensure:
            if queue is None or queue.shutting_down:
                return
            if self.accounts.lister.get(namespace, name) is not None:
                continue
            try:
                yield self.store.create(internal(), {"metadata": {"name": name}}, namespace)
            except errors.StatusError as e:
                if e.reason == "AlreadyExists" or _namespace_terminating(e):
                    continue
                raise


def _namespace_terminating(error: errors.StatusError) -> bool:
    return any(c.reason == "NamespaceTerminating" for c in (error.causes or ()))
