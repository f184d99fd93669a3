"""
The generic store's seams for what a kind does around its writes: ``IWriteCheck`` (a
kind's own check of a write) and ``IWriteHooks`` (what a write takes and gives back
besides its object: services' addresses and ports).

Upstream gives a kind whose writes need more than its strategy a REST storage of its
own that wraps the generic one (the RBAC kinds' ``policybased`` storages: escalation
prevention).  Here every kind has the one ``GenericStore``; what such a wrapper checks
is an ``IWriteCheck`` given to that kind's store (``compose``: the RBAC kinds get
``registry.escalation.EscalationCheck``).  It needs what the static ``ResourceType``
cannot hold (the RBAC index), so it is an object built once the server's parts exist.
"""

from __future__ import annotations

from zope.interface import Interface


class DecideAgain(Exception):
    """
    A hook transaction's ``create`` found that what it decided (an address) was decided
    on data another server has changed meanwhile: the store decides the write again
    from the caller's object, at most ``store.RETRIES`` times.
    """


class IWriteCheck(Interface):
    def check(attributes):
        """
        Refuse a create or an update (every patch kind, apply, a PUT that creates) by
        raising (or failing with) a ``StatusError``; None, or a Deferred firing with
        None.  ``attributes`` are the write's ``AdmissionAttributes`` (CREATE or
        UPDATE, ``context`` the ``RequestContext``), asked after mutating admission and
        the kind's own validation, before validating admission; in a dry run too.
        """


class IWriteHooks(Interface):
    """
    Upstream's ``BeginCreate``/``BeginUpdate``/``AfterDelete`` store hooks (the services'
    REST storage allocates there), and ``begin_delete`` (what a removal gives back,
    written with it): given to a kind's ``GenericStore`` as ``hooks``
    (``compose``: the services' ``serviceallocation.ServiceHooks``).
    """

    def begin_create(context, obj):
        """
        Fill what ``obj`` (defaulted, before validation) is given by the server, taking
        it from a shared pool: a transaction (or a Deferred of one) whose
        ``finish(success)`` (a Deferred) the store calls once the write is done (True)
        or has failed (False: what was taken is given back); or fail with a
        ``StatusError``.  ``context`` is the request's (``dry_run``: take nothing).
        The store writes the object through the transaction's ``write(storage, op)``
        (``op`` the object's ``mvcc.Create``; a Deferred of the ``KeyValue``, failing as
        that write alone would or with ``DecideAgain``), which writes what was taken
        with it.
        """

    def begin_update(context, new, old):
        """As ``begin_create`` for an update of the main resource (not ``status``): the
        store writes it through ``write(storage, op)``, ``op`` its ``mvcc.Update``."""

    def begin_delete(context, obj):
        """
        What a removal of ``obj`` (not in a dry run) gives back, written with it: a
        transaction (at once, not a Deferred) whose ``write(storage, op)`` the store
        removes the object through (``op`` its ``mvcc.Delete``; a Deferred of the
        ``KeyValue``, failing as that removal alone would) and whose ``finish(success)``
        it calls once the removal is done or has failed; or None.  Upstream's
        ``AfterDelete`` gives back after the removal: a server that dies between leaks
        what the object held until the repair finds it; written together, nothing
        leaks.
        """

    def after_delete(context, obj):
        """``obj`` was removed (not in a dry run): what is left to do (a Service's
        Endpoints deleted); None or a Deferred (its failure is logged)."""
