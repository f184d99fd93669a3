"""
The CustomResourceDefinition controller, on every server: upstream's naming,
establishing and finalizer controllers and the ``crdHandler``'s serving info in one
work queue over the definitions' informer (keyed by definition name).

``sync(name)``, for a definition as the informer holds it:

1. names: which of its names are accepted (``apiextensions/naming.py``: not in use by
   another definition of its group, nor by a built-in resource of it), and the
   ``NamesAccepted`` and ``Established`` conditions, written to ``status`` when they
   change (every other definition of the group is queued again: a name let go may now
   be free for it);
2. serving: once its names are accepted (or it is established), a ``ResourceType`` per
   served version (``registry/customresources.py``) is loaded into the watch cache
   (``WatchCache.add_kind``), given a ``GenericStore`` in the stores the API reads, and
   added to the catalog (routes, discovery, OpenAPI); a changed definition replaces its
   kinds (the cache of a kind kept at the same GVR stays); then ``Established`` is set
   (upstream's establishing controller);
3. deletion: a definition marked for deletion (``deletionTimestamp``, the cleanup
   finalizer) refuses new objects (405), its objects are deleted through its store
   (finalizers honoured; every object's deletion queues it again), its ``Terminating``
   condition says how far that went, and once none is left the finalizer goes;
4. a definition gone (the informer's delete, or absent at sync) is no longer served:
   ``Catalog.remove``, its store dropped, ``WatchCache.remove_kind`` (open watches end,
   informers stop).

The status is written by every server (as upstream, where every kube-apiserver runs
these controllers); a write that changes nothing is no write (the store skips it).
"""

from __future__ import annotations

from typing import Optional

import orjson
from twisted.internet.defer import DeferredList, inlineCallbacks
from twisted.logger import Logger
from zope.interface import implementer

from platformd import errors
from platformd.admission.interfaces import CREATE
from platformd.apiextensions import names as crdnames
from platformd.apiextensions.naming import ESTABLISHED_TRUE, names_and_conditions, used_names
from platformd.cache.informers import EventHandlers
from platformd.context import internal
from platformd.controllers.queue import WorkQueue, default_rate_limiter
from platformd.controllers.worker import Controller, work
from platformd.model.times import rfc3339
from platformd.registry.customresources import api_version_converter, kinds_for, storage_kind
from platformd.registry.conversionwebhook import WebhookConverter
from platformd.registry.interfaces import IWriteCheck
from platformd.registry.store import GenericStore
from platformd.util.ratelog import RateLimitedLog

log = Logger()


@implementer(IWriteCheck)
class Terminating:
    """A custom resource's write check: no create while its definition is terminating
    (upstream's ``crdHandler``: 405 ``create not allowed while custom resource definition
    is terminating``)."""

    def __init__(self, group: str, plural: str):
        self.group = group
        self.plural = plural
        self.terminating = False

    def check(self, attributes):
        if self.terminating and attributes.operation == CREATE:
            raise errors.StatusError(
                405, "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating",
                group=self.group, kind=self.plural)
        return None


class _Served:
    """What one definition serves: its kinds, their write check, and what they were built
    from (to tell whether a change needs them rebuilt)."""

    def __init__(self, uid: str, source: bytes, kinds: list, check: Terminating):
        self.uid = uid
        self.source = source
        self.kinds = kinds
        self.check = check


def _source(crd: dict) -> bytes:
    """What the served kinds depend on."""
    return orjson.dumps([crd.get("spec"), (crd.get("status") or {}).get("acceptedNames")],
                        option=orjson.OPT_SORT_KEYS)


class CustomResourceController(Controller):
    """``CustomResourceController(clock, informers, cache, catalog, stores, storage,
    admission, crd_kind, caller)``: ``caller`` (an ``admission.webhooks.client.Caller``)
    calls the definitions' conversion webhooks."""

    def __init__(self, clock, informers, cache, catalog, stores, storage, admission, crd_kind,
                 caller=None):
        super().__init__(clock)
        self.caller = caller
        self.informers = informers
        self.cache = cache
        self.catalog = catalog
        self.stores = stores
        self.storage = storage
        self.admission = admission
        self.crd_store = stores[crd_kind.gvr]
        self.crds = informers.for_kind(crd_kind)
        #: Definition name → ``_Served``.
        self.served: dict = {}
        #: Custom resource GVR → the informer handler registration watching its deletes.
        self._content: dict = {}
        #: Definition name → (uid, source, stored kind) for the kinds ``preload`` gave the
        #: watch cache before it started.
        self._preloaded: dict = {}
        self.crd_kind = crd_kind
        self._failures = RateLimitedLog(log, clock=clock)

    # -- the queue -----------------------------------------------------------------------

    def start(self):
        if self.queue is not None:
            return
        self.queue = queue = WorkQueue(self.clock, default_rate_limiter())
        self.follow(self.crds, EventHandlers(
            on_add=lambda new: queue.add(new.name),
            on_update=lambda old, new: queue.add(new.name),
            on_delete=self._deleted))
        loaded = self._initial()
        # The queue is worked from the next turn: readiness waits for the definitions
        # accepted before (served by ``_initial``), not for every definition's sync.
        self.clock.callLater(0, work, queue, self.sync,
                             lambda name: f"syncing CustomResourceDefinition {name} failed",
                             self._failures)
        return loaded

    def _initial(self):
        """Serve the definitions already accepted before the server is ready (upstream's
        readiness waits for them likewise), all at once."""
        loads = []
        for entry in self.crds.lister.list():
            crd = entry.obj
            if entry.name not in self.served and (
                    crdnames.condition_true(crd, crdnames.NAMES_ACCEPTED)
                    or crdnames.condition_true(crd, crdnames.ESTABLISHED)):
                d = self._serve(entry.name, crd)
                d.addErrback(self._serving_failed, entry.name)
                loads.append(d)
        return DeferredList(loads)

    @inlineCallbacks
    def preload(self):
        """
        Before the watch cache starts: the storage kind of every definition already
        accepted is added to the cache, so its objects are loaded in the cache's one
        read of everything rather than read again kind by kind once the definitions are
        known (a server with many definitions starts in about the time of one with
        their objects as built-ins).  ``start`` then serves them.
        """
        result = yield self.storage.range(self.crd_kind.storage_prefix)
        for kv in result.kvs:
            try:
                crd = orjson.loads(kv.value)
                if not (crdnames.condition_true(crd, crdnames.NAMES_ACCEPTED)
                        or crdnames.condition_true(crd, crdnames.ESTABLISHED)):
                    continue
                stored = storage_kind(crd)
                convert = self._converter(crd)
                self._add_stored(stored, convert)
            except Exception:  # a definition that does not decode is synced (and logged) later
                log.failure("preloading a CustomResourceDefinition failed")
                continue
            meta = crd.get("metadata") or {}
            self._preloaded[meta.get("name")] = (meta.get("uid", ""), _source(crd), stored,
                                                 convert)

    def _converter(self, crd: dict):
        """``convert(objects, api_version)`` through the definition's conversion webhook
        (strategy ``Webhook``), or None (``None``: apiVersion rewritten)."""
        spec = crd.get("spec") or {}
        if (spec.get("conversion") or {}).get("strategy") == "Webhook" and \
                self.caller is not None:
            return WebhookConverter(crd, self.caller).convert
        return None

    def _add_stored(self, stored, convert):
        """The storage version's kind into the watch cache (``add_kind``'s Deferred):
        objects stored under another version shown converted by the webhook
        (``convert``), else with their apiVersion rewritten."""
        if convert is None:
            return self.cache.add_kind(stored, api_version_converter(stored.api_version))
        return self.cache.add_kind(stored, converter=convert)

    def close(self):
        """The conversion webhooks' kept connections closed (at shutdown, once the
        watch cache has stopped: no conversion begins after it)."""
        return None if self.caller is None else self.caller.close()

    @staticmethod
    def _serving_failed(failure, name: str) -> None:
        log.failure("serving CustomResourceDefinition {name} failed", failure, name=name)

    def _deleted(self, old) -> None:
        if self.queue is None:
            return
        self.queue.add(old.name)
        self._requeue_group(old.obj)

    def _requeue_group(self, crd: dict) -> None:
        if self.queue is None:
            return
        group = (crd.get("spec") or {}).get("group")
        name = (crd.get("metadata") or {}).get("name")
        for entry in self.crds.lister.list():
            if entry.name != name and (entry.obj.get("spec") or {}).get("group") == group:
                self.queue.add(entry.name)

    def now(self) -> str:
        return rfc3339(self.clock.seconds())

    # -- one definition ------------------------------------------------------------------

    @inlineCallbacks
    def sync(self, name: str):
        entry = self.crds.lister.get(None, name)
        if entry is None:
            self._drop_preloaded(name)
            self._unserve(name)
            return
        crd = entry.obj
        crd = yield self._names(crd)
        if crd is None:
            return  # written: its update queues it again
        accepted = crdnames.condition_true(crd, crdnames.NAMES_ACCEPTED)
        established = crdnames.condition_true(crd, crdnames.ESTABLISHED)
        if accepted or established:
            yield self._serve(name, crd)
            if not established and not crd["metadata"].get("deletionTimestamp"):
                yield self._write_status(name, crd, [ESTABLISHED_TRUE])
                return
        if crd["metadata"].get("deletionTimestamp") and \
                crdnames.CLEANUP_FINALIZER in (crd["metadata"].get("finalizers") or ()):
            yield self._finalize(name, crd)

    def _builtin_names(self, group: str) -> list:
        return [(k.plural, k.singular, k.short_names, k.kind) for k in self.catalog.kinds
                if k.group == group and self.catalog.fixed(k)]

    def _names(self, crd: dict):
        """The definition, or None once a status write was made (its event requeues)."""
        group = (crd.get("spec") or {}).get("group") or ""
        others = [e.obj for e in self.crds.lister.list() if e.name != crd["metadata"]["name"]]
        resources, kinds = used_names(group, others, self._builtin_names(group))
        accepted, names_cond, established = names_and_conditions(crd, resources, kinds)
        status = crd.get("status") or {}
        current = [crdnames.condition(crd, t) for t in (crdnames.NAMES_ACCEPTED,
                                                          crdnames.ESTABLISHED)]
        wanted = [names_cond, established]
        same = status.get("acceptedNames") == accepted and all(
            c is not None and all(c.get(k) == w.get(k) for k in ("status", "reason", "message"))
            for c, w in zip(current, wanted))
        if same:
            return crd
        d = self._write_status(crd["metadata"]["name"], crd, wanted, accepted)
        return d.addCallback(lambda _: self._requeue_group(crd))

    def _write_status(self, name: str, crd: dict, conditions: list, accepted=None):
        now = self.now()

        def updated(current: Optional[dict]) -> dict:
            if current is None:
                raise errors.not_found("customresourcedefinitions", crdnames.GROUP, name)
            current.pop("metadata", None)
            current["metadata"] = {"name": name}
            status = current.setdefault("status", {})
            if accepted is not None:
                status["acceptedNames"] = accepted
            for cond in conditions:
                crdnames.set_condition(current, dict(cond), now)
            return current

        d = self.crd_store.update(internal(), None, name, updated, subresource="status")
        d.addErrback(self._gone)
        return d

    @staticmethod
    def _gone(failure):
        failure.trap(errors.StatusError)
        if failure.value.code not in (404, 409):
            return failure
        return None

    # -- serving -------------------------------------------------------------------------

    @inlineCallbacks
    def _serve(self, name: str, crd: dict):
        """
        Serve the definition's versions: its storage version's kind loaded into the
        watch cache (its objects shown in that version: those stored under an earlier
        one converted by the webhook, or with ``apiVersion`` rewritten under conversion
        ``None``), each other served version a version view of it
        (``WatchCache.add_converted_version``, or ``add_version`` rewriting
        ``apiVersion``) whose store writes in the storage version; each served version
        gets a store and is added to the catalog.  A changed definition is served
        afresh (as upstream's ``crdHandler`` drops a changed definition's storage: its
        open watches end and clients watch again).
        """
        source = _source(crd)
        served = self.served.get(name)
        uid = crd["metadata"].get("uid", "")
        terminating = bool(crd["metadata"].get("deletionTimestamp"))
        if served is not None and served.uid == uid and served.source == source:
            served.check.terminating = terminating
            return
        if served is not None:
            self._unserve(name)
        spec = crd.get("spec") or {}
        accepted = (crd.get("status") or {}).get("acceptedNames") or {}
        check = Terminating(spec.get("group") or "", accepted.get("plural") or "")
        check.terminating = terminating
        stored = storage_kind(crd)
        kinds = kinds_for(crd)
        if any(self.catalog.lookup(*k.gvr) is not None for k in [stored] + kinds):
            self._drop_preloaded(name)
            return  # served by another definition (or built in): not this one
        preloaded = self._preloaded.pop(name, None)
        if preloaded is not None and preloaded[:2] != (uid, source):
            self.cache.remove_kind(preloaded[2])  # changed since: served afresh
            preloaded = None
        if preloaded is None:
            convert = self._converter(crd)
            try:
                yield self._add_stored(stored, convert)
            except ValueError:
                return  # its storage prefix is served under another definition
        else:
            convert = preloaded[3]
        if self.served.get(name) is not None:
            return  # served meanwhile by another sync
        cached = [stored]
        for kind in kinds:
            if kind.gvr != stored.gvr:
                if convert is not None:
                    self.cache.add_converted_version(kind, convert)
                else:
                    self.cache.add_version(kind, api_version_converter(kind.api_version))
                cached.append(kind)
            other = kind.gvr != stored.gvr
            self.stores[kind.gvr] = GenericStore(
                kind, self.storage, self.cache, self.clock, self.admission, check,
                stored_as=stored.api_version if other else None,
                convert=convert if other else None)
        for kind in kinds:
            self.catalog.add(kind)
        self._follow_content(stored)
        self.served[name] = _Served(uid, source, cached, check)

    def _drop_preloaded(self, name: str) -> None:
        preloaded = self._preloaded.pop(name, None)
        if preloaded is not None:
            try:
                self.cache.remove_kind(preloaded[2])
            except KeyError:
                pass

    def _follow_content(self, kind) -> None:
        """Each deletion of one of the kind's objects queues its definition (cleanup)."""
        if kind.gvr in self._content or self.queue is None:
            return
        informer = self.informers.for_kind(kind)
        definition = f"{kind.plural}.{kind.group}"
        queue = self.queue

        def deleted(_old) -> None:
            entry = self.crds.lister.get(None, definition)
            if entry is not None and entry.obj["metadata"].get("deletionTimestamp"):
                queue.add(definition)
        self._content[kind.gvr] = (informer, informer.add_handler(
            EventHandlers(on_delete=deleted)))

    def _stop_serving(self, kind) -> None:
        if self.catalog.lookup(*kind.gvr) is not None:
            self.catalog.remove(kind)
        self.stores.pop(kind.gvr, None)
        content = self._content.pop(kind.gvr, None)
        if content is not None and not content[0].is_stopped():
            content[0].remove_handler(content[1])
        try:
            self.cache.remove_kind(kind)
        except KeyError:
            pass

    def _unserve(self, name: str) -> None:
        served = self.served.pop(name, None)
        if served is None:
            return
        for kind in reversed(served.kinds):  # the version views, then the stored kind
            self._stop_serving(kind)

    # -- deletion ------------------------------------------------------------------------

    @inlineCallbacks
    def _finalize(self, name: str, crd: dict):
        """Upstream's finalizer controller: delete every object, then the finalizer."""
        served = self.served.get(name)
        if served is not None:
            served.check.terminating = True
        progress = crdnames.condition(crd, crdnames.TERMINATING) or {}
        if progress.get("reason") not in ("InstanceDeletionInProgress",
                                          "InstanceDeletionCompleted"):
            yield self._write_status(name, crd, [{
                "type": crdnames.TERMINATING, "status": "True",
                "reason": "InstanceDeletionInProgress",
                "message": "CustomResource deletion is in progress"}])
            return  # its update queues it again
        remaining = 0
        for kind in (served.kinds[:1] if served is not None else []):
            store = self.stores.get(kind.gvr) or GenericStore(
                kind, self.storage, self.cache, self.clock, self.admission)
            if store is None:
                continue
            for entry in store.list(None):
                remaining += 1
                if entry.obj["metadata"].get("deletionTimestamp"):
                    continue  # waiting for its finalizers
                try:
                    yield store.delete(internal(), entry.namespace, entry.name)
                except errors.StatusError as e:
                    if e.code != 404:
                        raise
        if remaining:
            return  # each deletion queues the definition again
        yield self._write_status(name, crd, [{
            "type": crdnames.TERMINATING, "status": "False",
            "reason": "InstanceDeletionCompleted", "message": "removed all instances"}])

        def without_finalizer(current: Optional[dict]) -> dict:
            if current is None:
                raise errors.not_found("customresourcedefinitions", crdnames.GROUP, name)
            meta = current["metadata"]
            meta["finalizers"] = [f for f in meta.get("finalizers") or ()
                                  if f != crdnames.CLEANUP_FINALIZER]
            if not meta["finalizers"]:
                del meta["finalizers"]
            return current
        d = self.crd_store.update(internal(), None, name, without_finalizer)
        d.addErrback(self._gone)
        yield d
