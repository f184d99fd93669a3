"""
The generic store: create, read, update and delete for any kind, on top of the storage
interface and the watch cache.

This is the layer upstream calls the generic registry store.  It knows objects (dicts),
resource versions, the status split, finalizers and namespace lifecycle; it does not
know HTTP.  Every kind goes through the same code; what differs per kind comes from its
``ResourceType``.  Reads come from the watch cache; writes are compare-and-swap on the
storage interface, so two writers can never both win.
"""

from __future__ import annotations

import random
import uuid
from typing import Optional

import orjson
from twisted.internet.defer import fail, inlineCallbacks, returnValue, succeed

from platformd import errors
from platformd.cache.watchcache import CorruptObjectError
from platformd.model.meta import set_resource_version, validate_object_meta_update
from platformd.model.times import rfc3339
from platformd.patch import managedfields
from platformd.patch.managedfields import Manager
from platformd.registry import deletion
from platformd.storage.interface import (
    KeyExistsError, KeyNotFoundError, RevisionMismatchError,
)

#: How often an unconditional update retries when another writer got in first.
_UPDATE_RETRIES = 16
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SERVER_FIELDS = ("resourceVersion", "selfLink")


def _encode_for_storage(obj: dict) -> bytes:
    """
    Storage holds objects without resourceVersion: the revision *is* the version.  The
    object is left as it is: its field order (``Struct.order``) is kept.
    """
    meta = obj["metadata"]
    if "resourceVersion" not in meta:
        return orjson.dumps(obj)
    return orjson.dumps({**obj, "metadata": {
        k: v for k, v in meta.items() if k != "resourceVersion"}})


def _with_type(kind, obj: dict) -> dict:
    """The object with kind and apiVersion first, as upstream serialises it."""
    out = {"kind": kind.kind, "apiVersion": kind.api_version}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind"):
            out[key] = value
    return out


class NamespaceLifecycle:
    """
    Namespaced objects need a namespace that exists and is not terminating (upstream's
    NamespaceLifecycle admission plugin, built in here).
    """

    def __init__(self, namespaces_cache, namespace_kind):
        self.cache = namespaces_cache
        self.kind = namespace_kind

    def check(self, namespace: str) -> None:
        entry = self.cache.get(self.kind.storage_key(None, namespace))
        if entry is None:
            raise errors.not_found("namespaces", "", namespace)
        if entry.obj["metadata"].get("deletionTimestamp"):
            raise errors.StatusError(
                403, "Forbidden",
                f"unable to create new content in namespace {namespace} because it is "
                "being terminated",
                name=namespace, kind="namespaces",
                causes=(errors.Cause("NamespaceTerminating",
                                     f"namespace {namespace} is being terminated",
                                     "metadata.namespace"),))


class GenericStore:
    """CRUD for one kind (see module docstring)."""

    def __init__(self, kind, storage, cache, clock, lifecycle: Optional[NamespaceLifecycle]):
        self.kind = kind
        self.storage = storage
        self.cache = cache
        self.clock = clock
        self.lifecycle = lifecycle

    # -- reads -------------------------------------------------------------------------

    def get(self, namespace: Optional[str], name: str):
        """The CachedObject, or 404."""
        entry = self.cache.get(self.kind.storage_key(namespace, name))
        if entry is None:
            raise self._not_found(name)
        return entry

    def prefix(self, namespace: Optional[str]) -> str:
        """The key prefix of one namespace's objects, or of all of this kind."""
        return (self.kind.namespace_prefix(namespace) if namespace and self.kind.namespaced
                else self.kind.storage_prefix)

    def list(self, namespace: Optional[str], label_selector=None, field_selector=None):
        """Matching CachedObjects in key order (namespace, then name)."""
        prefix = self.prefix(namespace)
        name = field_selector.value_of("metadata.name") if field_selector else None
        if name is not None and namespace and self.kind.namespaced:
            entry = self.cache.get(prefix + name)
            candidates = [entry] if entry is not None else []
        else:
            candidates = (self.cache.objects[k] for k in self.cache.keys_from(prefix))
        out = []
        for entry in candidates:
            obj = entry.obj
            if label_selector is not None and not label_selector.matches(obj):
                continue
            if field_selector is not None and not field_selector.matches(obj):
                continue
            out.append(entry)
        return out

    # -- create ------------------------------------------------------------------------

    def prepare_create(self, obj: dict, namespace: Optional[str]) -> dict:
        """Fill server-set fields, default and validate; raises StatusError."""
        kind = self.kind
        obj = _with_type(kind, obj)
        meta = obj.setdefault("metadata", {})
        self._check_namespace(meta, namespace)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        for field in _SERVER_FIELDS + ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(
                random.choice(_NAME_ALPHABET) for _ in range(5))
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock.seconds())
        kind.prepare_for_create(obj)
        kind.default(obj)
        causes = kind.validate_all(obj)
        if causes:
            raise errors.invalid(kind.kind, kind.group, meta.get("name", ""), causes)
        if kind.namespaced and self.lifecycle is not None:
            self.lifecycle.check(meta["namespace"])
        return obj

    def create(self, obj: dict, namespace: Optional[str], dry_run: bool = False,
               manager: Optional[Manager] = None):
        """
        Deferred[dict]: the created object; ``manager`` (when given) is recorded as the
        owner of every field.  (Plain callbacks rather than inlineCallbacks: this is the
        hottest write path.)
        """
        try:
            obj = self.prepare_create(obj, namespace)
            if manager is not None:
                managedfields.record(self.kind, None, obj, manager, self.now())
        except errors.StatusError:
            return fail()
        self.kind.schema.order(obj)  # upstream's field order, for storage and answer alike
        meta = obj["metadata"]
        name = meta["name"]
        key = self.kind.storage_key(meta.get("namespace"), name)
        if dry_run:
            if self.cache.get(key) is not None:
                return fail(self._exists(name))
            return succeed(obj)

        def created(kv):
            set_resource_version(meta, str(kv.mod_revision))
            return obj

        def exists(failure):
            failure.trap(KeyExistsError)
            raise self._exists(name)

        d = self.storage.create(key, _encode_for_storage(obj))
        return d.addCallbacks(created, exists)

    # -- update ------------------------------------------------------------------------

    def now(self) -> str:
        return rfc3339(self.clock.seconds())

    @inlineCallbacks
    def update(self, namespace: Optional[str], name: str, obj: dict, subresource: str = "",
               dry_run: bool = False, authorize_create=None, manager: Optional[Manager] = None):
        """
        Deferred[(dict, created: bool)].  Replaces the object (PUT).  A resourceVersion in
        ``obj`` makes it conditional (409 when stale); without one it is unconditional.
        When the object is absent and the kind creates on update, ``authorize_create()``
        must allow it first.  ``manager`` (when given) is recorded in managedFields.
        """
        kind = self.kind
        obj = _with_type(kind, obj)
        meta = obj.setdefault("metadata", {})
        self._check_namespace(meta, namespace)
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        meta["name"] = name
        wanted_rv = meta.get("resourceVersion") or None
        key = kind.storage_key(meta.get("namespace"), name)
        for _attempt in range(_UPDATE_RETRIES):
            current = self.cache.get(key)
            if current is None:
                if subresource or not kind.allow_create_on_update:
                    raise self._not_found(name)
                # Created as upstream's Update creates: the version the body carried
                # is dropped (storage sets it), not checked.
                meta.pop("resourceVersion", None)
                if authorize_create is not None:
                    authorize_create()
                created = yield self.create(obj, namespace, dry_run, manager)
                returnValue((created, True))
            if wanted_rv and wanted_rv != str(current.revision):
                raise self._conflict(name)
            new = self._merge_for_update(obj, current, subresource)
            if manager is not None:
                managedfields.record(kind, current.obj, new, manager, self.now())
            result = yield self._write_update(key, new, current, dry_run)
            if result is not None:
                returnValue((result, False))
            if wanted_rv:
                raise self._conflict(name)
        raise errors.conflict(kind.qualified_resource.split(".")[0], kind.group, name,
                              "too many concurrent writers; try again")

    def _merge_for_update(self, obj: dict, current, subresource: str) -> dict:
        """Carry server-owned state over from ``current`` and validate the result."""
        kind = self.kind
        old = current.obj
        old_meta = old["metadata"]
        if subresource == "status":
            # Writes to status change nothing else.
            new = current.mutable()
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            new["metadata"]["resourceVersion"] = obj["metadata"].get("resourceVersion")
            meta = new["metadata"]
        else:
            new = obj
            meta = new["metadata"]
            if kind.has_status:
                if "status" in old:
                    new["status"] = orjson.loads(orjson.dumps(old["status"]))
                else:
                    new.pop("status", None)
            for field in ("uid", "creationTimestamp"):
                if not meta.get(field) and field in old_meta:
                    meta[field] = old_meta[field]
            for field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                if field in old_meta:
                    meta[field] = old_meta[field]
                else:
                    meta.pop(field, None)
            if kind.kind == "Namespace":
                new["spec"] = orjson.loads(orjson.dumps(old.get("spec") or {}))
            kind.default(new)
        causes = validate_object_meta_update(meta, old_meta)
        causes += kind.validate_all(new)
        causes += kind.validate_update(new, old)
        if causes:
            raise errors.invalid(kind.kind, kind.group, meta.get("name", ""), causes)
        return new

    @inlineCallbacks
    def _write_update(self, key, new: dict, current, dry_run: bool):
        """Deferred[dict | None]; None means another writer won (retry or 409)."""
        self.kind.schema.order(new)
        meta = new["metadata"]
        meta.pop("selfLink", None)
        if meta.get("deletionTimestamp") and not self._finalizers(new):
            # The last finalizer is gone from a terminating object: it goes now.
            result = yield self._delete_now(key, current, dry_run)
            returnValue(result if result is None else new)
        value = _encode_for_storage(new)
        if value == _encode_for_storage(current.obj):
            # Nothing changed: no write, no new version (as upstream).
            set_resource_version(meta, str(current.revision))
            returnValue(new)
        if dry_run:
            set_resource_version(meta, str(current.revision))
            returnValue(new)
        try:
            kv = yield self.storage.update(key, value, current.revision)
        except RevisionMismatchError:
            returnValue(None)
        except KeyNotFoundError:
            raise self._not_found(meta["name"]) from None
        set_resource_version(meta, str(kv.mod_revision))
        returnValue(new)

    # -- delete ------------------------------------------------------------------------

    @inlineCallbacks
    def delete(self, namespace: Optional[str], name: str, options: Optional[dict] = None,
               dry_run: bool = False, unsafe: bool = False):
        """
        Deferred[(dict, removed: bool)]: two-phase delete (spec 3) as upstream's store
        does it (``deletion.py``): an object left with finalizers (its own, or the
        garbage collector's that ``options`` ask for) is marked terminating and stays
        (removed=False); one without goes at once.  ``options`` is the request's
        DeleteOptions.  ``unsafe`` (spec 4.8.2): an object that cannot be decoded is
        removed regardless of finalizers and preconditions; a readable one is refused.
        """
        options = options or {}
        key = self.kind.storage_key(namespace, name)
        for _attempt in range(_UPDATE_RETRIES):
            current = self.cache.get(key)
            if current is None:
                raise self._not_found(name)
            try:
                current.obj
            except CorruptObjectError as e:
                if not unsafe:
                    raise errors.store_read_error(self.kind.plural, self.kind.group, name,
                                                  str(e)) from None
                try:
                    yield self.storage.delete(key)
                except KeyNotFoundError:
                    raise self._not_found(name) from None
                returnValue((current.stub(self.kind), True))
            if unsafe:
                raise errors.bad_request(
                    f"{errors.UNSAFE_DELETE_OPTION} is only allowed for objects that cannot "
                    f'be read from storage; {self.kind.qualified_resource} "{name}" can be '
                    "read: delete it without the option")
            if self.kind.kind == "Namespace":
                result = yield self._delete_namespace(key, current, options, dry_run)
            else:
                result = yield self._delete_object(key, current, options, dry_run)
            if result is not None:
                returnValue(result)
        raise self._conflict(name)

    def _delete_object(self, key, current, options: dict, dry_run: bool):
        """
        Deferred[(dict, removed) | None] (None: another writer got in first; read again).
        """
        obj = current.obj
        deletion.check_preconditions(self.kind, obj, options.get("preconditions"))
        finalizers = list(obj["metadata"].get("finalizers") or ())
        changed = deletion.gc_finalizers(options, finalizers)
        if finalizers if changed is None else changed:
            new = current.mutable()
            if changed is not None:
                new["metadata"]["finalizers"] = changed
            deletion.mark_deleting(new["metadata"], self.now())
            return self._write_update(key, new, current, dry_run).addCallback(
                lambda written: None if written is None else (written, False))
        return self._delete_now(key, current, dry_run).addCallback(
            lambda deleted: None if deleted is None else (current.obj, True))

    def _delete_namespace(self, key, current, options: dict, dry_run: bool):
        """
        The namespace registry's delete: the first marks it Terminating (the namespace
        controller then empties it), later ones answer with it until its
        ``spec.finalizers`` are done; then it goes as any object does.
        """
        obj = current.obj
        deletion.check_namespace_preconditions(obj, options.get("preconditions"))
        if obj["metadata"].get("deletionTimestamp"):
            if (obj.get("spec") or {}).get("finalizers"):
                return succeed((obj, False))
            return self._delete_object(key, current, options, dry_run)
        new = current.mutable()
        meta = new["metadata"]
        meta["deletionTimestamp"] = self.now()
        new.setdefault("status", {})["phase"] = "Terminating"
        finalizers = deletion.namespace_finalizers(options, list(meta.get("finalizers") or ()))
        if finalizers:
            meta["finalizers"] = finalizers
        return self._write_update(key, new, current, dry_run).addCallback(
            lambda written: None if written is None else (written, False))

    def _finalizers(self, obj: dict) -> list:
        """
        What holds the object back from removal: ``metadata.finalizers``, and for a
        namespace also ``spec.finalizers`` (its contents must go first).
        """
        finalizers = list(obj["metadata"].get("finalizers") or ())
        if self.kind.kind == "Namespace":
            finalizers += (obj.get("spec") or {}).get("finalizers") or ()
        return finalizers

    @inlineCallbacks
    def finalize(self, name: str):
        """
        Remove a terminating namespace whose contents are gone (namespace controller):
        its ``spec.finalizers`` are done; ``metadata.finalizers`` still hold it back.
        """
        key = self.kind.storage_key(None, name)
        current = self.cache.get(key)
        if current is None or current.obj["metadata"].get("finalizers"):
            return
        yield self._delete_now(key, current, False)

    @inlineCallbacks
    def _delete_now(self, key, current, dry_run):
        if dry_run:
            returnValue(current)
        try:
            yield self.storage.delete(key, current.revision)
        except RevisionMismatchError:
            returnValue(None)
        except KeyNotFoundError:
            raise self._not_found(current.name) from None
        returnValue(current)

    # -- helpers -----------------------------------------------------------------------

    def _check_namespace(self, meta: dict, namespace: Optional[str]) -> None:
        if not self.kind.namespaced:
            meta.pop("namespace", None)
            return
        given = meta.get("namespace")
        if given and given != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request")
        meta["namespace"] = namespace

    def _not_found(self, name):
        return errors.not_found(self.kind.plural, self.kind.group, name)

    def _exists(self, name):
        return errors.already_exists(self.kind.plural, self.kind.group, name)

    def _conflict(self, name, why=errors.STALE_OBJECT):
        return errors.conflict(self.kind.plural, self.kind.group, name, why)

