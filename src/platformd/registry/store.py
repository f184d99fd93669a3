"""
The generic store: create, read, update and delete for any kind, on top of the storage
interface and the watch cache.

This is the layer upstream calls the generic registry store.  It knows objects (dicts),
resource versions, the status split, finalizers and admission; it does not know HTTP.
Every kind goes through the same code; what differs per kind comes from its
``ResourceType`` (defaulting, validation, ``prepare_for_update``, ``extra_finalizers``,
``decide_delete``) and, for a kind whose writes upstream's own REST storage checks
further, its ``IWriteCheck`` (``registry/interfaces.py``: the RBAC kinds' escalation
check).  Reads come from the watch cache.

Every change of an existing object is one compare-and-swap loop,
``guaranteed_update`` (upstream's ``GuaranteedUpdate``): the caller gives a function
from the current object to an outcome (write this, remove it, keep it), the loop
writes it on the condition that the object is still the one read, and on a race reads
again and asks again, at most ``RETRIES`` times; a refusal decided on a cached version
another server has overtaken is decided again on the newer one.  Update, every patch
kind, apply, status writes, delete and finalizer removal are all such functions.  A
write is answered once the watch cache holds it (read-your-writes, whatever order the
backend reports in).
"""

from __future__ import annotations

import random
from typing import Iterable, List, Optional

import orjson
from twisted.internet.defer import (
    Deferred, fail, inlineCallbacks, maybeDeferred, returnValue, succeed,
)
from twisted.logger import Logger
from twisted.python.failure import Failure

from platformd import errors
from platformd.admission.interfaces import CREATE, DELETE, UPDATE, AdmissionAttributes
from platformd.cache.watchcache import CorruptObjectError
from platformd.util.deferreds import then
from platformd.util.ids import random_uuid
from platformd.model import fielderrors as fe
from platformd.model.meta import set_resource_version
from platformd.model.times import rfc3339
from platformd.patch import managedfields
from platformd.patch.managedfields import Manager
from platformd.registry.interfaces import DecideAgain
from platformd.registry.outcomes import Keep, Remove, Write
from platformd.storage.interface import (
    KeyExistsError, KeyNotFoundError, RevisionMismatchError,
)
from platformd.storage.mvcc import Create, Delete, Update
from platformd.tracing import spans

log = Logger()

#: How often the update loop reads again after losing a race to another writer.
RETRIES = 16
#: Seconds a write waits for the watch cache to show it before answering anyway (the
#: write is committed either way).
VISIBLE_WAIT = 10.0
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


class GenericStore:
    """CRUD for one kind (see module docstring)."""

    def __init__(self, kind, storage, cache, clock, admission, write_check=None, hooks=None,
                 stored_as: Optional[str] = None, convert=None):
        self.kind = kind
        #: The apiVersion objects are stored in when it is not the kind's own (a custom
        #: resource's version other than its storage version); None: the kind's.
        self.stored_as = stored_as
        #: How objects reach ``stored_as`` and come back, when not by rewriting their
        #: apiVersion: ``convert(objects, api_version)``, a Deferred of them converted
        #: (a custom resource's conversion webhook); None: rewritten.  Upstream's
        #: storage codec converts a write's object to the storage version and decodes
        #: the stored bytes back for the answer: so does the store, both ways, dry runs
        #: too.
        self.convert = convert
        #: What the kind does around its writes besides storing them, or None (most
        #: kinds): upstream's ``BeginCreate``/``BeginUpdate``/``AfterDelete`` hooks,
        #: services' address and port allocation (``serviceallocation.ServiceHooks``).
        #: ``begin_create(ctx, obj)`` and ``begin_update(ctx, new, old)`` run after
        #: defaulting, before validation, and give (or a Deferred of) a transaction whose
        #: ``finish(success)`` is called once the write is done or has failed;
        #: ``begin_delete(ctx, obj)`` gives the transaction a removal is written through
        #: (what the object gives back, in the same commit) and ``after_delete(ctx,
        #: obj)`` runs once an object is removed.
        self.hooks = hooks
        self.storage = storage
        #: The whole watch cache (its revision says what a read would see) and this
        #: kind's part of it.
        self.watch_cache = cache
        self.cache = cache.for_kind(kind)
        self.clock = clock
        #: The ``AdmissionChain`` every write goes through.
        self.admission = admission
        #: The kind's ``IWriteCheck`` (None: none), asked of every create and update
        #: between the kind's validation and validating admission.
        self.write_check = write_check

    def _encode(self, obj: dict):
        """The stored bytes of ``obj``: in its storage kind's form, for a kind served from
        another kind's storage (``ResourceType.to_storage``), or in the storage version
        (``stored_as``: a custom resource's other versions; a Deferred of them when
        ``convert`` calls a webhook)."""
        if self.convert is not None:
            return self.convert([obj], self.stored_as).addCallback(
                lambda objs: _encode_for_storage(objs[0]))
        if self.stored_as is not None:
            return _encode_for_storage({**obj, "apiVersion": self.stored_as})
        to_storage = self.kind.to_storage
        return _encode_for_storage(obj if to_storage is None else to_storage(obj))

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
        candidates: Iterable
        if name is not None and namespace and self.kind.namespaced:
            entry = self.cache.get(prefix + name)
            candidates = [entry] if entry is not None else []
        else:
            candidates = self.cache.current(prefix)
        out = []
        for entry in candidates:
            obj = entry.obj
            if label_selector is not None and not label_selector.matches(obj):
                continue
            if field_selector is not None and not field_selector.matches(obj):
                continue
            out.append(entry)
        return out

    def now(self) -> str:
        return rfc3339(self.clock.seconds())

    # -- create ------------------------------------------------------------------------

    def create(self, ctx, obj: dict, namespace: Optional[str],
               manager: Optional[Manager] = None):
        """
        Deferred[dict]: the created object.  Mutating admission, then the kind's write
        check, then defaulting and validation, then validating admission, then one
        storage create (409 when the name is taken).  ``manager`` (when given) is recorded as owning every field.
        With ``ctx.dry_run`` everything but the write happens.  A kind with hooks
        (services) has its create decided again from ``obj`` as it was given when what
        the hooks took turns out taken meanwhile by another server (``DecideAgain``).
        """
        if self.hooks is None:
            return self._create(ctx, obj, namespace, manager, None)
        return self._create_deciding(ctx, obj, orjson.dumps(obj), namespace, manager,
                                     RETRIES)

    def _create(self, ctx, obj: dict, namespace: Optional[str], manager,
                pending: Optional[List]):
        """One attempt of ``create``; ``pending`` collects the hooks' transactions."""
        try:
            prepared = self._admit_create(ctx, obj, namespace, manager, pending)
        except errors.StatusError:
            return fail()
        if isinstance(prepared, Deferred):
            return prepared.addCallback(self._insert, ctx, pending)
        return self._insert(prepared, ctx, pending)

    def _create_deciding(self, ctx, obj: dict, given: bytes, namespace: Optional[str],
                         manager, attempts: int):
        """``create`` with hooks: an attempt, its transactions finished, and on
        ``DecideAgain`` another from ``given`` (the caller's object, encoded)."""
        pending: List = []
        d = maybeDeferred(self._create, ctx, obj, namespace, manager, pending)
        d.addBoth(self._finish, pending)

        def again(failure):
            failure.trap(DecideAgain)
            if attempts <= 1:
                raise self._conflict((obj.get("metadata") or {}).get("name", ""),
                                     "too many concurrent writers; try again")
            return self._create_deciding(ctx, orjson.loads(given), given, namespace,
                                         manager, attempts - 1)
        return d.addErrback(again)

    def _finish(self, result, pending: List):
        """Finish the hooks' transactions (committed when ``result`` is no failure),
        then pass ``result`` on."""
        success = not isinstance(result, Failure)
        transactions = pending[:]
        del pending[:]
        d: Deferred = succeed(None)
        for transaction in transactions:
            d.addCallback(_finish_one, transaction, success)
        d.addErrback(lambda f: log.warn("finishing a write's allocations failed: {why}",
                                        why=f.getErrorMessage()))
        return d.addCallback(lambda _: result)

    def _admit_create(self, ctx, obj: dict, namespace: Optional[str], manager,
                      pending: Optional[List] = None):
        """The object as it will be stored (or a Deferred of it), or a StatusError."""
        obj = _with_type(self.kind, obj)
        meta = obj.setdefault("metadata", {})
        self._check_namespace(meta, namespace)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        attributes = AdmissionAttributes(CREATE, self.kind, meta.get("namespace") or "",
                                         meta.get("name") or "", "", obj, None, ctx)
        return then(then(self.admission.admit(attributes), self._check, attributes),
                    self._prepare_create, attributes, manager, pending)

    def _check(self, _, attributes):
        """The kind's write check (None, or a Deferred): after mutating admission and before
        the kind's own validation, where upstream's wrapping storage (RBAC's
        ``policybased``) checks, so an escalating and invalid role is 403, not 422."""
        if self.write_check is None:
            return None
        return self.write_check.check(attributes)

    def _prepare_create(self, _, attributes, manager, pending):
        kind = self.kind
        obj = attributes.obj
        meta = obj["metadata"]
        for field in _SERVER_FIELDS + ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(
                random.choice(_NAME_ALPHABET) for _ in range(5))
        meta["uid"] = random_uuid()
        meta["creationTimestamp"] = self.now()
        kind.prepare_for_create(obj)
        kind.default(obj)
        if pending is not None:
            if manager is not None:
                # Fields the hooks fill (a service's addresses) are the server's, not
                # the manager's: upstream's field manager runs before its store.
                managedfields.record(kind, None, obj, manager, self.now())
                manager = None
            begun = self.hooks.begin_create(attributes.context, obj)
            return then(begun, self._begun_create, attributes, manager, pending)
        return self._validate_create(attributes, manager)

    def _begun_create(self, transaction, attributes, manager, pending: List):
        pending.append(transaction)
        return self._validate_create(attributes, manager)

    def _validate_create(self, attributes, manager):
        kind = self.kind
        obj = attributes.obj
        meta = obj["metadata"]
        causes = kind.validate_all(obj)
        if causes:
            raise errors.invalid(kind.kind, kind.group, meta.get("name", ""), causes)
        return then(self.admission.validate(attributes), self._created_form, obj, manager)

    def _created_form(self, _, obj: dict, manager) -> dict:
        if manager is not None:
            managedfields.record(self.kind, None, obj, manager, self.now())
        self.kind.schema.order(obj)  # upstream's field order, for storage and answer alike
        return obj

    def _insert(self, obj: dict, ctx, pending: Optional[List] = None):
        meta = obj["metadata"]
        name = meta["name"]
        key = self.kind.storage_key(meta.get("namespace"), name)
        if ctx.dry_run:
            # Upstream's dry run reads etcd for the key: up to date, then the cache.
            def vacant(_):
                if self.cache.get(key) is not None:
                    raise self._exists(name)
                # Upstream's dry run encodes and decodes the object (converting it).
                return then(self._encode(obj),
                            lambda value: then(self._converted_back(obj, value),
                                               lambda _: obj))
            return maybeDeferred(then, self.watch_cache.sync(), vacant)

        def exists(failure):
            failure.trap(KeyExistsError)
            raise self._exists(name)

        value = self._encode(obj)
        d = spans.around(ctx.span, "Create etcd3", self._span_attributes(ctx, key),
                         lambda: self._put(lambda v: self._write_op(Create(key, v), pending),
                                           obj, value))
        return d.addCallbacks(self._stored, exists, (obj,))

    def _write_op(self, op, transactions: Optional[List]):
        """
        Deferred[KeyValue]: ``op`` (the object's ``Create``, or ``Update`` at the
        version read) in storage, through the hooks' transaction when there is one (its
        ``write`` writes what it took and gives back with it).
        """
        if transactions:
            return transactions[-1].write(self.storage, op)
        if isinstance(op, Create):
            return self.storage.create(op.key, op.value)
        return self.storage.update(op.key, op.value, op.expected_revision)

    def _span_attributes(self, ctx, key: str) -> dict | None:
        """Upstream's etcd3 store span attributes (its internal type's name, the
        ``GroupResource`` as it prints); None when the request is not traced."""
        if ctx.span is None:
            return None
        group = self.kind.group
        return {"audit-id": ctx.audit_id, "key": key,
                "type": f"*{group.split('.')[0] if group else 'core'}.{self.kind.kind}",
                "resource": f"{self.kind.plural}.{group}" if group else self.kind.plural}

    def _converted_back(self, obj: dict, value: bytes):
        """
        With a ``convert``: ``obj`` becomes (in place) the stored ``value`` converted
        back to the kind's version, as upstream answers a write with the stored bytes
        decoded (a Deferred); without: None, ``obj`` is the answer as it is.
        """
        if self.convert is None:
            return None

        def replace(objs):
            back = _with_type(self.kind, objs[0])
            obj.clear()
            obj.update(back)
        return self.convert([orjson.loads(value)], self.kind.api_version).addCallback(replace)

    def _put(self, write, obj: dict, value):
        """``write(value)`` (a storage create or update, Deferred[kv]) once ``value`` is
        encoded, then ``obj`` converted back (``_converted_back``); Deferred[kv]."""
        def written(value: bytes):
            return write(value).addCallback(
                lambda kv: then(self._converted_back(obj, value), lambda _: kv))
        return maybeDeferred(then, value, written)

    def _stored(self, kv, obj: dict):
        """Answer with ``obj`` at ``kv``'s revision once the cache shows that revision."""
        set_resource_version(obj["metadata"], str(kv.mod_revision))
        return then(self._visible(kv.mod_revision), lambda _: obj)

    def _visible(self, revision: int):
        """None when the cache holds ``revision``, else a Deferred firing once it does."""
        if self.watch_cache.revision >= revision:
            return None
        return self.watch_cache.wait_for(revision, VISIBLE_WAIT).addCallback(
            self._waited, revision)

    def _waited(self, reached: bool, revision: int) -> None:
        if not reached:
            log.warn("the watch cache did not reach revision {revision} in {wait}s; "
                     "answering the committed write anyway", revision=revision,
                     wait=VISIBLE_WAIT)

    # -- the update loop ---------------------------------------------------------------

    def guaranteed_update(self, ctx, key: str, try_update):
        """
        Deferred[outcome]: upstream's ``GuaranteedUpdate``.  ``try_update(current)``
        (the ``CachedObject``, or None when there is none) returns a ``Write``,
        ``Remove`` or ``Keep`` (or a Deferred of one), or raises a ``StatusError``;
        the outcome is carried out on the condition that the object is still
        ``current``, else everything is read and decided again.  Traced as upstream's
        ``GuaranteedUpdate etcd3`` span.
        """
        return spans.around(ctx.span, "GuaranteedUpdate etcd3", self._span_attributes(ctx, key),
                            lambda: self._guaranteed_update(ctx, key, try_update))

    @inlineCallbacks
    def _guaranteed_update(self, ctx, key: str, try_update):
        """
        As upstream's etcd3 ``GuaranteedUpdate`` given the cacher's object: the cache's
        version is a first guess, which another server over the same storage may have
        overtaken.  So a refusal of ``try_update`` (404, 409, 422, ...) made on the
        guess stands only once the cache has been brought up to date (``sync``) and
        still holds that version, else the update is decided again on the newer one;
        after a lost race the next attempt reads an up-to-date cache too.
        """
        if ctx.dry_run:  # upstream's dry run reads etcd: nothing confirms it later
            current = yield self._current(key)
            fresh = True
        else:
            yield self.cache.ready_for(key, self.watch_cache.revision)  # a converted view's
            current = self.cache.get(key)
            fresh = False  # whether ``current`` is known to be the stored version
        for _attempt in range(RETRIES):
            try:
                outcome = try_update(current)
                if isinstance(outcome, Deferred):
                    outcome = yield outcome
            except errors.StatusError as refusal:
                if fresh:
                    raise
                guessed = _revision(current)
                current = yield self._current(key)
                fresh = True
                if _revision(current) == guessed:
                    raise refusal
                continue
            done = yield self._carry_out(ctx, key, current, outcome, fresh)
            if done:
                returnValue(outcome)
            current = yield self._current(key)
            fresh = True
        raise errors.conflict(self.kind.plural, self.kind.group, key.rsplit("/", 1)[-1],
                              "too many concurrent writers; try again")

    def _current(self, key: str):
        """The stored version of ``key`` (or None), or a Deferred of it: the cache, synced."""
        return then(self.watch_cache.sync(), lambda _: then(
            self.cache.ready_for(key, self.watch_cache.revision),
            lambda _: self.cache.get(key)))

    def _carry_out(self, ctx, key: str, current, outcome, fresh: bool):
        """
        Whether the outcome was carried out (a bool, or a Deferred of it): False when
        another writer got in first (or, ``current`` not ``fresh``, may have).
        """
        if isinstance(outcome, Keep):
            return succeed(True)
        if isinstance(outcome, Write):
            new = outcome.obj
            meta = new["metadata"]
            if current is not None and meta.get("deletionTimestamp") \
                    and not self.kind.finalizers(new):
                # The last finalizer is gone from a terminating object: it goes now.
                return self._remove(ctx, key, current)
            self.kind.schema.order(new)
            meta.pop("selfLink", None)
            if current is None:
                return self._write_new(ctx, key, outcome)
            return self._write(ctx, key, current, new, fresh, outcome.transactions)
        return self._remove(ctx, key, current)

    def _write_new(self, ctx, key: str, outcome: Write):
        outcome.created = True
        if ctx.dry_run:
            if self.convert is None:
                return succeed(True)
            obj = outcome.obj  # converted there and back, as upstream's dry run does
            return self._encode(obj).addCallback(
                lambda value: self._converted_back(obj, value)).addCallback(lambda _: True)
        d = self._put(lambda v: self._write_op(Create(key, v), outcome.transactions),
                      outcome.obj, self._encode(outcome.obj))
        d.addCallback(self._stored, outcome.obj)
        return d.addCallbacks(lambda _: True, _lost_race)

    def _write(self, ctx, key: str, current, new: dict, fresh: bool,
               transactions: Optional[List] = None):
        return then(self._encode(new), self._write_value, ctx, key, current, new, fresh,
                    transactions)

    def _unchanged(self, value: bytes, current, new: dict) -> bool:
        """Whether ``new`` stores as ``current`` is stored (with a ``convert``: the
        same object in the kind's version, rather than converting ``current`` too)."""
        if self.convert is None:
            return value == self._encode(current.obj) and \
                not self.cache.stored_elsewise(current.key)
        return _without_version(new) == _without_version(current.obj)

    def _write_value(self, value: bytes, ctx, key: str, current, new: dict, fresh: bool,
                     transactions: Optional[List]):
        if ctx.dry_run:
            # Upstream's dry run encodes the object and decodes it back (converting it).
            return then(self._converted_back(new, value),
                        lambda _: self._unwritten(key, current, new, fresh))
        if self._unchanged(value, current, new) and not self.storage.needs_rewrite(key):
            return self._unwritten(key, current, new, fresh)
        d = self._put(lambda v: self._write_op(Update(key, v, current.revision), transactions),
                      new, value)
        d.addCallback(self._stored, new)
        return d.addCallbacks(lambda _: True, _lost_race)

    def _unwritten(self, key: str, current, new: dict, fresh: bool):
        """
        Nothing to write (a dry run, or no change: no new version, as upstream; but a
        value stored with an old encryption key is written again).  No write confirms
        ``current`` then, so a cached version must be the stored one (upstream reads
        etcd before it skips a write), else decide again.
        """
        set_resource_version(new["metadata"], str(current.revision))
        if fresh:
            return succeed(True)
        return then(self._current(key), lambda latest: _revision(latest) == current.revision)

    def _remove(self, ctx, key: str, current):
        if ctx.dry_run:
            return succeed(True)
        transaction = self._delete_transaction(ctx, current)
        if transaction is None:
            d = self.storage.delete(key, current.revision)
        else:
            # What the object gives back is written with its removal (one commit).
            d = transaction.write(self.storage, Delete(key, current.revision))
            d.addBoth(self._finish, [transaction])
        d.addCallback(lambda kv: self._visible(kv.mod_revision))
        if self.hooks is not None:
            d.addCallback(self._after_delete, ctx, current)
        return d.addCallbacks(lambda _: True, _lost_race)

    def _delete_transaction(self, ctx, current):
        """The hooks' transaction of a removal of ``current`` (``begin_delete``), or None:
        no hooks, or an object that cannot be read (nothing known to give back)."""
        if self.hooks is None:
            return None
        try:
            obj = current.obj
        except CorruptObjectError:
            return None
        return self.hooks.begin_delete(ctx, obj)

    def _after_delete(self, _, ctx, current):
        """The hooks' ``after_delete`` of a removed object (its failures logged)."""
        try:
            obj = current.obj
        except CorruptObjectError:
            return None
        d = maybeDeferred(self.hooks.after_delete, ctx, obj)
        d.addErrback(lambda f: log.warn("cleaning up after a delete failed: {why}",
                                        why=f.getErrorMessage()))
        return d

    # -- update, patch, apply ----------------------------------------------------------

    def update(self, ctx, namespace: Optional[str], name: str, updated, subresource: str = "",
               manager: Optional[Manager] = None, force_allow_create: bool = False):
        """
        Deferred[(dict, created: bool)]: replace the object with ``updated(current)``
        (``current`` a dict, or None when there is no object; upstream's
        ``UpdatedObjectInfo``): the PUT body, the patched object, the applied one; the
        store changes a copy of it, so it may give the same object to every attempt.  A
        resourceVersion in the new object other than the current one is 409 (a stale
        write); none makes the write unconditional.  An absent object is created when
        the kind creates on update (or ``force_allow_create``: apply), authorized as
        ``create`` too.  ``manager`` (when given) is recorded in managedFields.
        """
        kind = self.kind
        key = kind.storage_key(namespace if kind.namespaced else None, name)
        pending: Optional[List] = None if self.hooks is None else []

        def try_update(current):
            if pending:
                # An earlier attempt lost its race: what it allocated goes back.
                for transaction in pending:
                    transaction.finish(False)
                del pending[:]
            if current is None:
                if subresource or not (kind.allow_create_on_update or force_allow_create):
                    raise self._not_found(name)
                obj = self._named(updated(None), namespace, name)
                # Created as upstream's Update creates: the version the body carried is
                # dropped (storage sets it), not checked.
                obj["metadata"].pop("resourceVersion", None)
                answer = then(ctx.authorize_as("create"),
                              lambda _: self._admit_create(ctx, obj, namespace, manager,
                                                           pending))
                return then(answer, lambda created: Write(created, transactions=pending))
            obj = self._named(updated(current.mutable()), namespace, name)
            wanted = obj["metadata"].get("resourceVersion")
            if wanted and wanted != str(current.revision):
                raise self._conflict(name)
            if not wanted and not kind.allow_unconditional_update:
                # registry/store.go Update: the Invalid's kind is the resource.
                raise errors.invalid(kind.plural, kind.group, name, [fe.invalid(
                    "metadata.resourceVersion", 0, "must be specified for an update")])
            new = self._merge_for_update(obj, current, subresource)
            attributes = AdmissionAttributes(UPDATE, kind, namespace or "", name, subresource,
                                             new, current.obj, ctx)
            return then(self.admission.admit(attributes), self._admitted_update,
                        attributes, current, manager, pending)

        d = self.guaranteed_update(ctx, key, try_update)
        if pending is not None:
            d.addBoth(self._finish, pending)
        return d.addCallback(lambda outcome: (outcome.obj, outcome.created))

    def _named(self, obj: dict, namespace: Optional[str], name: str) -> dict:
        """
        A copy of ``obj`` with its type, namespace and the URL's name (400 on a
        mismatch).  A copy because an attempt of the update loop changes the object it
        decides on (a create draws its uid, defaulting, admission) and the attempt
        decided again after it must start from the caller's object as it was: a PUT to a
        replica whose cache had not yet heard of the object tried a create, lost, and
        then updated with the uid the create had drawn (422 ``metadata.uid``, issue
        26).  Upstream's ``UpdatedObjectInfo`` copies a PUT's body for the same reason.
        """
        obj = _with_type(self.kind, orjson.loads(orjson.dumps(obj)))
        meta = obj.setdefault("metadata", {})
        self._check_namespace(meta, namespace)
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        meta["name"] = name
        return obj

    def _merge_for_update(self, obj: dict, current, subresource: str) -> dict:
        """Carry server-owned state over from ``current`` (upstream's PrepareForUpdate)."""
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
            kind.default(new)  # as upstream decodes a status write: its status defaulted
            return new
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
        kind.prepare_for_update(new, old)
        kind.default(new)
        return new

    def _admitted_update(self, _, attributes, current, manager, pending=None):
        """The hooks (a write to the main resource only), the kind's write check, its
        validation, then validating admission, of an admitted update."""
        if pending is not None and not attributes.subresource:
            if manager is not None:
                managedfields.record(self.kind, current.obj, attributes.obj, manager,
                                     self.now())
                manager = None
            begun = self.hooks.begin_update(attributes.context, attributes.obj, current.obj)
            return then(begun, self._begun_update, attributes, current, manager, pending)
        return self._checked_update(attributes, current, manager, None)

    def _begun_update(self, transaction, attributes, current, manager, pending: List):
        pending.append(transaction)
        return self._checked_update(attributes, current, manager, pending)

    def _checked_update(self, attributes, current, manager, pending: Optional[List]):
        return then(self._check(None, attributes), self._validated_update, attributes,
                    current, manager, pending)

    def _validated_update(self, _, attributes, current, manager, pending: Optional[List]):
        kind = self.kind
        new = attributes.obj
        meta = new["metadata"]
        causes = kind.validate_update_all(new, current.obj, attributes.subresource)
        if causes:
            raise errors.invalid(kind.kind, kind.group, meta.get("name", ""), causes)
        if manager is not None:
            managedfields.record(kind, current.obj, new, manager, self.now())
        return then(self.admission.validate(attributes),
                    lambda _: Write(new, transactions=pending))

    # -- delete ------------------------------------------------------------------------

    def delete(self, ctx, namespace: Optional[str], name: str, options: Optional[dict] = None,
               unsafe: bool = False):
        """
        Deferred[(dict, removed: bool)]: two-phase delete (spec 3) as upstream's store
        does it: the kind's ``decide_delete`` (``deletion.py``) marks an object left
        with finalizers terminating (removed=False) or removes it; admission sees the
        object first.  ``options`` is the request's DeleteOptions.  ``unsafe`` (spec
        4.8.2): an object that cannot be decoded is removed regardless of finalizers
        and preconditions; a readable one is refused.
        """
        kind = self.kind
        options = options or {}
        key = kind.storage_key(namespace, name)

        def try_delete(current):
            if current is None:
                raise self._not_found(name)
            try:
                obj = current.obj
            except CorruptObjectError as e:
                if not unsafe:
                    raise errors.store_read_error(kind.plural, kind.group, name, str(e)) from None
                return Remove(current.stub(kind))
            if unsafe:
                raise errors.bad_request(
                    f"{errors.UNSAFE_DELETE_OPTION} is only allowed for objects that cannot "
                    f'be read from storage; {kind.qualified_resource} "{name}" can be '
                    "read: delete it without the option")
            attributes = AdmissionAttributes(DELETE, kind, namespace or "", name, "", None, obj,
                                             ctx, options)
            admitted = then(self.admission.admit(attributes),
                            lambda _: self.admission.validate(attributes))
            return then(admitted, lambda _: kind.decide_delete(kind, current, options,
                                                               self.now()))

        d = self.guaranteed_update(ctx, key, try_delete)
        return d.addCallback(lambda outcome: (outcome.obj, isinstance(outcome, Remove)))

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


def _without_version(obj: dict) -> dict:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def _finish_one(_, transaction, success: bool):
    """One hook transaction's ``finish`` (see ``GenericStore._finish``)."""
    return transaction.finish(success)


def _revision(entry) -> int:
    """The version of a cache entry; 0 for none."""
    return 0 if entry is None else entry.revision


def _lost_race(failure):
    """Another writer changed or removed the object first: read again."""
    failure.trap(RevisionMismatchError, KeyNotFoundError, KeyExistsError, DecideAgain)
    return False
