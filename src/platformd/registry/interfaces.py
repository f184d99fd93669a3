"""
The generic store's seam for a kind's own check of a write: ``IWriteCheck``.

Upstream gives a kind whose writes need more than its strategy a REST storage of its
own that wraps the generic one (the RBAC kinds' ``policybased`` storages: escalation
prevention).  Here every kind has the one ``GenericStore``; what such a wrapper checks
is an ``IWriteCheck`` given to that kind's store (``compose``: the RBAC kinds get
``registry.escalation.EscalationCheck``).  It needs what the static ``ResourceType``
cannot hold (the RBAC index), so it is an object built once the server's parts exist.
"""

from __future__ import annotations

from zope.interface import Interface


class IWriteCheck(Interface):
    def check(attributes):
        """
        Refuse a create or an update (every patch kind, apply, a PUT that creates) by
        raising (or failing with) a ``StatusError``; None, or a Deferred firing with
        None.  ``attributes`` are the write's ``AdmissionAttributes`` (CREATE or
        UPDATE, ``context`` the ``RequestContext``), asked after mutating admission and
        the kind's own validation, before validating admission; in a dry run too.
        """
