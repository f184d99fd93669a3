"""
A failed webhook call worded as client-go's REST client words it, and judged as
upstream's ``webhook.DefaultShouldRetry`` judges it (``k8s.io/apiserver/pkg/util/webhook``).

An answer other than 2xx is a ``Status`` when its body is one (``kind: Status``,
``status: Failure``: its message, reason, code and ``details.retryAfterSeconds``), else
apimachinery's ``NewGenericServerResponse``: a reason and message per status code, the
body's text (2 KiB at most, trimmed) standing for the server's message when the answer
is text (no ``Content-Type``, or ``text/*``), ``Retry-After`` (whole seconds) kept.

Retried (``DefaultShouldRetry``): a connection reset (Twisted's ``ConnectionLost``; Go's
``ECONNRESET`` and lost HTTP/2 connections), and an answer whose reason is
``InternalError`` (500, and other 5xx without a reason of their own), ``Timeout`` (504)
or ``TooManyRequests`` (429) — or is none upstream knows, with code 500, 504 or 429 —
or that asks for a delay (``retryAfterSeconds`` above 0, or reason ``ServerTimeout``
with details).  Not retried: a refused connection, TLS, the call's own timeout, 503
without ``Retry-After``, 4xx, a malformed review.  client-go's own retries of a
``Retry-After`` answer inside one call (up to 10, at the header's pace) are not
reproduced: such an answer is retried at the backoff's pace instead.
"""

from __future__ import annotations

import json
import re
from typing import Optional

from twisted.internet.defer import CancelledError
from twisted.internet.error import ConnectionAborted, ConnectionLost

from platformd.goformat import gotext
from platformd.util import httpclient
#: apimachinery's ``knownReasons``.
KNOWN_REASONS = frozenset((
    "Unauthorized", "Forbidden", "NotFound", "AlreadyExists", "Conflict", "Gone", "Invalid",
    "ServerTimeout", "StoreReadError", "Timeout", "TooManyRequests", "BadRequest",
    "MethodNotAllowed", "NotAcceptable", "RequestEntityTooLarge", "UnsupportedMediaType",
    "InternalError", "Expired", "ServiceUnavailable"))
#: ``NewGenericServerResponse``'s reason and message per code (None: the server's).
_GENERIC = {
    409: ("AlreadyExists", "the server reported a conflict"),  # the verb is POST
    404: ("NotFound", "the server could not find the requested resource"),
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "the server has asked for the client to provide credentials"),
    403: ("Forbidden", None),
    415: ("UnsupportedMediaType", None),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested "
                              "resource"),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted, "
                     "but may still be processing the request"),
    429: ("TooManyRequests", "the server has received too many requests and has asked us "
                             "to try again later"),
}
#: client-go's ``maxUnstructuredResponseTextBytes``.
MAX_TEXT = 2048
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")


class WebhookError(Exception):
    """The call failed or its answer is not a SubjectAccessReview; ``retriable`` when
    upstream's ``DefaultShouldRetry`` would call again."""

    def __init__(self, message: str, retriable: bool = False):
        super().__init__(message)
        self.retriable = retriable


def call_failed(failure, url: str) -> WebhookError:
    """The call's failure (no answer) as Go's client words it; a reset is retriable (not
    a connection we aborted: the call's own timeout)."""
    reasons = getattr(failure.value, "reasons", None) or [failure]
    reset = any(r.check(ConnectionLost) and not r.check(ConnectionAborted, CancelledError)
                for r in reasons) and not any(r.check(CancelledError) for r in reasons)
    return WebhookError(httpclient.failure_text(failure, url), reset)


def answer_failed(code: int, headers, body: bytes) -> WebhookError:
    """An answer other than 2xx, as client-go makes it an error (module docstring)."""
    status = _status(body)
    if status is not None:
        details = status.get("details")
        given = details.get("retryAfterSeconds") if isinstance(details, dict) else None
        status_code = status.get("code")
        return _judged(str(status.get("message") or ""), str(status.get("reason") or ""),
                       status_code if isinstance(status_code, int) else 0,
                       isinstance(details, dict),
                       given if isinstance(given, int) else 0)
    header = (headers.getRawHeaders(b"retry-after") or [b""])[0].decode("latin-1")
    retry_after = int(header) if _INTEGER.match(header) else 0
    reason, message = _generic(code, _server_message(headers, body))
    return _judged(message, reason, code, True, retry_after)


def _generic(code: int, server: str) -> tuple:
    """``NewGenericServerResponse``'s reason and message (no resource named)."""
    if code == 406:
        return "NotAcceptable", server if server not in ("", "unknown") else (
            "the server was unable to respond with a content type that the client supports")
    if code in _GENERIC:
        reason, message = _GENERIC[code]
        return reason, server if message is None else message
    if code >= 500:
        return "InternalError", (f"an error on the server ({gotext.go_quote(server)}) has "
                                 "prevented the request from succeeding")
    return "Unknown", (f"the server responded with the status code {code} but did not "
                       "return more information")


def _status(body: bytes) -> Optional[dict]:
    """The answer's ``Status`` if it is one that reports a failure."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    if (isinstance(document, dict) and document.get("kind") == "Status"
            and document.get("apiVersion", "v1") in ("v1", "meta.platform.io/v1")
            and document.get("status") == "Failure"):
        return document
    return None


def _server_message(headers, body: bytes) -> str:
    """client-go's server message: the body's text, when the answer is text."""
    content_type = (headers.getRawHeaders(b"content-type") or [b""])[0].decode("latin-1")
    if content_type and not content_type.split(";")[0].strip().lower().startswith("text/"):
        return "unknown"
    return body[:MAX_TEXT].decode("utf-8", "replace").strip()


def _judged(message: str, reason: str, code: int, details: bool,
            retry_after: int) -> WebhookError:
    """``DefaultShouldRetry`` on a status error."""
    unknown = reason not in KNOWN_REASONS
    retriable = (reason in ("InternalError", "Timeout", "TooManyRequests") or code == 429
                 or (unknown and code in (500, 504))
                 or (details and (reason == "ServerTimeout" or retry_after > 0)))
    return WebhookError(message, retriable)
