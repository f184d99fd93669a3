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
"""

from __future__ import annotations

from typing import Callable, Optional

import attrs
from zope.interface import Attribute, Interface

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


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
        """Deliver the current objects as adds, then each change; a registration."""

    def remove_handler(registration: object) -> None:
        """Stop delivering to a registration (again: nothing)."""

    def has_synced() -> bool:
        """Whether every object has been loaded."""


class IInformers(Interface):
    """The informers of the served kinds, made on demand (one per GVR)."""

    def informer(gvr: tuple) -> IInformer:
        """The informer of the kind served as ``(group, version, plural)``."""

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
    """

    on_add: Optional[Callable] = None
    on_update: Optional[Callable] = None
    on_delete: Optional[Callable] = None

    def dispatch(self, type_: str, new, old) -> None:
        if type_ == ADDED:
            if self.on_add is not None:
                self.on_add(new)
        elif type_ == DELETED:
            if self.on_delete is not None:
                self.on_delete(old)
        elif self.on_update is not None:
            self.on_update(old, new)
