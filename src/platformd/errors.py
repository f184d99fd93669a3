"""
API errors as values.

Every failure the API reports is a ``StatusError``: an HTTP code, a machine-readable
reason, a human message and optional details (name, group, kind, causes).  Handlers raise
them where the fault is found; ``platformd.api.responses`` renders them once, as the
``Status`` object clients expect.  The constructors mirror upstream's
``k8s.io/apimachinery/pkg/api/errors`` so that codes, reasons and messages match what
kubectl and client libraries were written against.
"""

from __future__ import annotations

from typing import Optional

import attrs


@attrs.frozen
class Cause:
    """One field-level cause (``details.causes[]``)."""

    reason: str
    message: str
    field: str

    def to_dict(self) -> dict:
        """StatusCause's fields are omitempty upstream: an empty one is left out."""
        out = {}
        for name, value in (("reason", self.reason), ("message", self.message),
                            ("field", self.field)):
            if value:
                out[name] = value
        return out


@attrs.define(eq=False)
class StatusError(Exception):
    """An error with its Status form (``kind: Status``, ``status: Failure``)."""

    code: int
    reason: str
    message: str
    name: Optional[str] = None
    group: Optional[str] = None
    kind: Optional[str] = None
    causes: tuple = ()
    retry_after: Optional[int] = None
    #: Send ``details: {}`` even when empty, as upstream's NewGenericServerResponse does.
    empty_details: bool = False

    def __str__(self):
        return self.message

    def to_status(self) -> dict:
        status: dict = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # omitempty upstream: StatusReasonUnknown ("") is left out
            status["reason"] = self.reason
        # StatusDetails' fields are all omitempty upstream: an empty group (the core
        # group) or name is left out, not sent as "".
        details: dict = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [c.to_dict() for c in self.causes]
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        if details or self.empty_details:
            status["details"] = details
        status["code"] = self.code
        return status


def qualified(resource: str, group: str) -> str:
    """``rolebindings.rbac.authorization.platform.io``, or ``pods`` for the core group."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> StatusError:
    return StatusError(
        404, "NotFound", f'{qualified(resource, group)} "{name}" not found',
        name=name, group=group, kind=resource,
    )


def already_exists(resource: str, group: str, name: str) -> StatusError:
    return StatusError(
        409, "AlreadyExists", f'{qualified(resource, group)} "{name}" already exists',
        name=name, group=group, kind=resource,
    )


def conflict(resource: str, group: str, name: str, why: str) -> StatusError:
    return StatusError(
        409, "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        name=name, group=group, kind=resource,
    )


STALE_OBJECT = (
    "the object has been modified; please apply your changes to the latest version "
    "and try again"
)


def invalid(kind: str, group: str, name: str, causes) -> StatusError:
    """422 Invalid listing every field error, worded as upstream words it."""
    causes = tuple(causes)
    # field.ErrorList.ToAggregate: each distinct message once (the causes keep them all).
    rendered = list(dict.fromkeys(f"{c.field}: {c.message}" if c.field else c.message
                                  for c in causes))
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    qual = f"{kind}.{group}" if group else kind
    return StatusError(
        422, "Invalid", f'{qual} "{name}" is invalid: {summary}',
        name=name, group=group, kind=kind, causes=causes,
    )


def bad_request(message: str, causes=()) -> StatusError:
    return StatusError(400, "BadRequest", message, causes=tuple(causes))


def method_not_allowed() -> StatusError:
    """
    405 as go-restful answers a method a route does not register: upstream's
    ``serviceErrorHandler`` writes ``NewGenericServerResponse(405, ...)``, whose details
    are empty but present.
    """
    return StatusError(405, "MethodNotAllowed",
                       "the server does not allow this method on the requested resource",
                       empty_details=True)


def not_acceptable(types) -> StatusError:
    return StatusError(
        406, "NotAcceptable",
        f"only the following media types are accepted: {', '.join(types)}",
    )


def no_route_accepts(types) -> StatusError:
    """
    406 when no route produces what Accept asks for: go-restful's service error
    (``RouterJSR311.detectRoute``, listing what the route produces, ``types``), which
    upstream's serviceErrorHandler turns into ``NewGenericServerResponse(406, …)`` (so
    ``details: {}``).
    """
    return StatusError(406, "NotAcceptable", "406: Not Acceptable\n\nAvailable "
                       f"representations: {', '.join(types)}", empty_details=True)


def unsupported_media_type(types) -> StatusError:
    return StatusError(
        415, "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(types),
    )


def unauthorized() -> StatusError:
    return StatusError(401, "Unauthorized", "Unauthorized")


def forbidden(resource: str, group: str, name: str, why: str, causes: tuple = ()) -> StatusError:
    """Upstream's ``NewForbidden(GroupResource{group, resource}, name, why)``."""
    if not resource and not group:
        return StatusError(403, "Forbidden", f"forbidden: {why}", empty_details=True)
    target = qualified(resource, group)
    message = f'{target} "{name}" is forbidden: {why}' if name else f"{target} is forbidden: {why}"
    return StatusError(403, "Forbidden", message, name=name or None, group=group, kind=resource,
                       causes=causes)


def rejected() -> StatusError:
    """
    422 for a JSON patch that cannot be applied (a failed ``test``, a missing path):
    upstream answers ``NewGenericServerResponse(422, ...)``, which drops the library's
    text for a fixed message.
    """
    return StatusError(422, "Invalid",
                       "the server rejected our request due to an error in our request",
                       empty_details=True)


def too_large_entity(message: str) -> StatusError:
    return StatusError(413, "RequestEntityTooLarge", f"Request entity too large: {message}")


def gone(message: str) -> StatusError:
    return StatusError(410, "Expired", message)


def timeout(message: str, retry_after: Optional[int] = None) -> StatusError:
    return StatusError(504, "Timeout", message, retry_after=retry_after)


def internal(message: str) -> StatusError:
    return StatusError(500, "InternalError", f"Internal error occurred: {message}")


UNSAFE_DELETE_OPTION = "ignoreStoreReadErrorWithClusterBreakingPotential"


def store_read_error(resource: str, group: str, name: str, detail: str) -> StatusError:
    """500 for an object the store holds but cannot be read or decoded (spec 4.8.2)."""
    return StatusError(
        500, "StorageReadError",
        f'failed to read {qualified(resource, group)} "{name}" from storage: {detail}; it can '
        f"be deleted with {UNSAFE_DELETE_OPTION}=true (feature gate "
        "AllowUnsafeMalformedObjectDeletion)",
        name=name, group=group, kind=resource)


def not_found_path() -> StatusError:
    """404 for a path that names no resource (upstream's plain 404 page, as a Status)."""
    return StatusError(404, "NotFound", "the server could not find the requested resource")
