"""
The seam between the watch cache's informers (``cache/informers.py``: the
implementations and the fake) and whoever follows a kind in-process: ``IInformer``,
``ILister`` and ``EventHandlers`` (upstream's ``SharedIndexInformer``, ``Lister`` and
``ResourceEventHandlerFuncs``), and ``IInformers``, the informers of every served kind
(upstream's ``SharedInformerFactory`` with the RESTMapper's kind lookup).  Its own
module, below every layer that follows a kind, so the RBAC index (``auth/``, beside the
cache) can name it without importing the cache, and the admission plugins (above the
cache) depend on this seam rather than on the cache's implementation.
Handlers and listers deal in the cache's ``CachedObject`` (``key``, ``name``,
``namespace``, ``revision``, ``raw``, ``obj``).

Kinds come and go at run time (custom resources: ``WatchCache.add_kind``/``remove_kind``).
An informer of a kind that stops being served is shut down, as upstream stops the
informers of a removed CRD: each of its handlers hears ``on_stop`` once, nothing after;
``is_stopped()`` says so, its lister reads nothing, and ``add_handler`` on it raises
``InformerStoppedError``.  Asking for the informer of a kind not served (never added, or
removed) raises ``UnknownKindError``; a kind added again gets a new informer.
"""

from __future__ import annotations

from typing import Callable, Optional

import attrs
from zope.interface import Attribute, Interface

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
#: The types of an object's changes: what a cache listener hears unless it names fewer
#: (``KindCache.add_listener``).
CHANGES = frozenset((ADDED, MODIFIED, DELETED))


class UnknownKindError(KeyError):
    """
    No kind is served as this GVR: never added, or removed (``WatchCache.add_kind``,
    ``remove_kind``).  A ``KeyError``, as a lookup of an unknown GVR always was.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def unknown_kind(gvr: tuple) -> UnknownKindError:
    group, version, plural = gvr
    return UnknownKindError(
        f"no kind is served as {plural!r} in {group + '/' if group else ''}{version}")


class InformerStoppedError(RuntimeError):
    """A handler added to an informer whose kind is no longer served (upstream's
    "handler was not added to shared informer because it has stopped already")."""


class ILister(Interface):
    """Reads of one kind's current objects."""

    def get(namespace: Optional[str], name: str):
        """The object (None when there is none); ``namespace`` None for a cluster kind."""

    def list(namespace: Optional[str] = None, selector=None) -> list:
        """
        The objects in ``namespace`` (None: every namespace) whose labels match
        ``selector`` (``labelselectors.compile_selector``'s; None: every one), in key
        order.  An object whose bytes do not decode matches no selector.
        """


class IInformer(Interface):
    """One kind's objects and their changes."""

    lister = Attribute("The ILister over the same objects.")

    def add_handler(handlers: "EventHandlers") -> object:
        """
        Deliver the current objects as adds, then each change; a registration.  Raises
        ``InformerStoppedError`` once the informer is stopped.
        """

    def remove_handler(registration: object) -> None:
        """Stop delivering to a registration (again: nothing)."""

    def has_synced() -> bool:
        """
        Whether every object has been loaded (stays as it was once the informer is
        stopped, as upstream's ``HasSynced``).
        """

    def is_stopped() -> bool:
        """
        Whether the informer was shut down (its kind no longer served): its handlers
        were told (``on_stop``) and hear nothing more; its lister reads nothing.
        """


class IInformers(Interface):
    """The informers of the served kinds, made on demand (one per GVR)."""

    def informer(gvr: tuple) -> IInformer:
        """
        The informer of the kind served as ``(group, version, plural)``;
        ``UnknownKindError`` when no kind is served, or being loaded, at that GVR.
        """

    def served_kind(group: str, kind: str, version: Optional[str] = None):
        """
        The served ``ResourceType`` named ``group``/``kind`` (of ``version`` when
        given), or None: what a configuration naming a kind (a webhook's namespaces, a
        policy's ``paramKind``) resolves to before asking for its informer.
        """


@attrs.frozen
class EventHandlers:
    """
    Upstream's ``ResourceEventHandlerFuncs``: each takes ``CachedObject``s;
    ``on_delete``'s is the last state stamped with the deletion's revision (``revision``
    and ``metadata.resourceVersion``), as a watch's DELETED event carries it.
    ``on_stop()`` is called once if the informer is shut down (its kind removed at run
    time): no delete is sent for the objects it held, and nothing follows.
    """

    on_add: Optional[Callable] = None
    on_update: Optional[Callable] = None
    on_delete: Optional[Callable] = None
    on_stop: Optional[Callable] = None

    @property
    def types(self) -> frozenset:
        """The change types these handlers act on: their informer listens for those
        alone (a change nobody handles is not converted to another version for them)."""
        return frozenset(t for t, f in ((ADDED, self.on_add), (MODIFIED, self.on_update),
                                        (DELETED, self.on_delete)) if f is not None)

    def stopped(self) -> None:
        """The informer was shut down: ``on_stop()``."""
        if self.on_stop is not None:
            self.on_stop()

    def dispatch(self, type_: str, new, old) -> None:
        if type_ == ADDED:
            if self.on_add is not None:
                self.on_add(new)
        elif type_ == DELETED:
            if self.on_delete is not None:
                self.on_delete(old)
        elif self.on_update is not None:
            self.on_update(old, new)
