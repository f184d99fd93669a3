"""
The service-account controller (upstream's ``pkg/controller/serviceaccount``
``ServiceAccountsController``): the ``default`` ServiceAccount exists in every active
namespace.

It follows the watch cache: a namespace added or changed, or a service account deleted,
schedules its namespace (on the reactor, as the namespace controller does); syncing one
creates each missing account of ``ensure`` unless the namespace is gone or not
``Active`` (a terminating namespace refuses new content, and that refusal is ignored as
upstream).  Starting syncs every namespace already loaded.  A failed create is retried a
second later.
"""

from __future__ import annotations

from twisted.internet.defer import inlineCallbacks
from twisted.logger import Logger

from platformd import errors
from platformd.cache.watchcache import DELETED
from platformd.context import internal
from platformd.ratelog import RateLimitedLog

log = Logger()

#: Upstream's ``DefaultServiceAccountsControllerOptions``.
DEFAULT_SERVICE_ACCOUNTS = ("default",)


class ServiceAccountsController:
    def __init__(self, reactor, cache, stores, namespace_kind, service_account_kind,
                 ensure=DEFAULT_SERVICE_ACCOUNTS):
        self.reactor = reactor
        self.cache = cache
        self.namespace_kind = namespace_kind
        self.service_account_kind = service_account_kind
        self.store = stores[service_account_kind.gvr]
        self.ensure = tuple(ensure)
        self._scheduled: set = set()
        self._calls: set = set()
        self._following = False
        #: A namespace whose accounts keep failing is retried every second; its
        #: traceback is logged once a minute.
        self._failures = RateLimitedLog(log, clock=reactor)

    def start(self):
        self._following = True
        self.cache.for_kind(self.namespace_kind).listeners.append(self._namespace_changed)
        self.cache.for_kind(self.service_account_kind).listeners.append(self._account_changed)
        for entry in list(self.cache.for_kind(self.namespace_kind).objects.values()):
            self._schedule(entry.name)

    def stop(self):
        if not self._following:
            return
        self._following = False
        for call in list(self._calls):
            if call.active():
                call.cancel()
        self._calls.clear()
        self._scheduled.clear()
        self.cache.for_kind(self.namespace_kind).listeners.remove(self._namespace_changed)
        self.cache.for_kind(self.service_account_kind).listeners.remove(self._account_changed)

    def _namespace_changed(self, type_, new, old, revision):
        if type_ != DELETED and new is not None:
            self._schedule(new.name)

    def _account_changed(self, type_, new, old, revision):
        if type_ == DELETED and old is not None and old.namespace:
            self._schedule(old.namespace)

    def _schedule(self, namespace: str):
        if namespace in self._scheduled or not self._following:
            return
        self._scheduled.add(namespace)
        self._later(0, self._run, namespace)

    def _later(self, delay: float, f, *args) -> None:
        def run():
            self._calls.discard(call)
            f(*args)
        call = self.reactor.callLater(delay, run)
        self._calls.add(call)

    @inlineCallbacks
    def _run(self, namespace: str):
        self._scheduled.discard(namespace)
        if not self._following:
            return
        try:
            yield self._sync(namespace)
        except Exception:
            if not self._following:
                return
            self._failures.failure(
                f"creating service accounts in {namespace} failed; retrying")
            self._later(1, self._schedule, namespace)

    @inlineCallbacks
    def _sync(self, namespace: str):
        entry = self.cache.for_kind(self.namespace_kind).get(
            self.namespace_kind.storage_key(None, namespace))
        if entry is None:
            return
        meta, status = entry.obj["metadata"], entry.obj.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase", "Active") != "Active":
            return
        accounts = self.cache.for_kind(self.service_account_kind)
        for name in self.ensure:
            if not self._following:
                return
            if accounts.get(self.service_account_kind.storage_key(namespace, name)) is not None:
                continue
            try:
                yield self.store.create(internal(), {"metadata": {"name": name}}, namespace)
            except errors.StatusError as e:
                if e.reason == "AlreadyExists" or _namespace_terminating(e):
                    continue
                raise


def _namespace_terminating(error: errors.StatusError) -> bool:
    return any(c.reason == "NamespaceTerminating" for c in (error.causes or ()))
