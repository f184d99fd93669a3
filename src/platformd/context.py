"""
``RequestContext``: what one API request carries from the filter chain down to the
handlers, admission and the store.

Upstream threads a Go ``context.Context`` through every layer and reads the user, the
request info, the audit ID and the trace span out of it.  This is the same idea as one
explicit object: the filters (``api/filters.py``) fill it in order (audit ID, request
info, user, possibly an impersonated user), the write handlers add the write's options
(dry run, field manager), and the store and admission plugins read it instead of taking
callbacks.  It imports nothing of the HTTP layer, so the store below it stays
HTTP-free.
"""

from __future__ import annotations

from typing import Any, Optional

import attrs
from zope.interface import implementer

from platformd.admission.interfaces import IAdmissionContext
from platformd.auth import authorizers
from platformd.auth.interfaces import AUTHENTICATED_GROUP, Attributes, UserInfo

#: Who the server's own controllers write as (upstream's loopback client user).
SYSTEM_USER = UserInfo("system:apiserver", "", ("system:masters", AUTHENTICATED_GROUP))


@implementer(IAdmissionContext)
@attrs.define(slots=True, eq=False)
class RequestContext:
    #: The twisted.web request (filters and handlers read headers from it; the layers
    #: below the handlers never do).
    request: Any
    #: The request's audit ID: the client's ``Audit-ID`` header or a new UUID, echoed in
    #: the response's ``Audit-Id`` header as upstream's ``WithAuditInit``.
    audit_id: str = ""
    #: What is asked (``api/requestinfo.RequestInfo``), from the request-info filter.
    info: Any = None
    #: Who asks, after authentication and impersonation.
    user: Optional[UserInfo] = None
    #: The authorizer that admitted the request, for the checks a handler or the store
    #: makes later (a PUT that creates also needs ``create``).
    authorizer: Any = None
    #: Whether the request is a dry run (spec 4.8): admission sees it, storage is not
    #: written.
    dry_run: bool = False
    #: The write's field manager (``fieldManager`` or the User-Agent's first word).
    field_manager: str = ""
    #: The request's trace span once tracing is configured; None otherwise.
    span: Any = None
    #: Warnings from below the handlers (admission), sent as ``Warning`` headers with
    #: the answer, whatever it is.
    warnings: list = attrs.field(factory=list)
    #: Audit annotations for the audit log: admission's (``webhook-name/key``) and the
    #: authorization decision (``authorization.platform.io/decision``, ``/reason``).
    audit_annotations: dict = attrs.field(factory=dict)
    #: The request reached its handler (upstream's instrumented routes): it is counted
    #: in the request metrics, whatever its answer.
    routed: bool = False
    #: When the request was received (set by the audit stage when auditing is on).
    received_at: float = 0.0
    #: The request's ``audit.record.Record`` when the policy audits it; None otherwise.
    audit: Any = None

    def authorize_as(self, verb: str):
        """
        Authorize this request again as ``verb`` (None, or a Deferred when the
        authorizer answers later); raises or fails with 403 Forbidden.  A PUT or an
        apply that creates is a ``create`` too (spec 2.1.10).
        """
        assert self.user is not None, "authorized only after authentication"
        return authorizers.check(self.authorizer,
                                 Attributes(self.user, attrs.evolve(self.info, verb=verb)))

    def audit_request(self, value, has_object_meta: bool = True) -> None:
        """
        Hand what the handler's codec decoded to the audit record, when the request is
        audited (``audit.record.Record.log_request_object``): the only way a body
        reaches the audit log, so it is never parsed a second time, nor before the
        handler (after authorization) has read it.  ``has_object_meta``: ``value`` is
        an object whose metadata names it (not a patch, an apply configuration or
        DeleteOptions).
        """
        if self.audit is not None:
            self.audit.log_request_object(value, has_object_meta)


def internal() -> RequestContext:
    """The context of a write the server makes itself (controllers, built-in objects)."""
    return RequestContext(None, user=SYSTEM_USER, authorizer=authorizers.AlwaysAllow(),
                          field_manager="platformd")
