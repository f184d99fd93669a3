"""
Spans below the request's: what ``RequestContext.span`` holds and how a layer makes a
child of it.

Upstream carries the span in Go's ``context.Context``; here it is explicit.  A
``Trace`` is a span with the tracer that makes its children; every helper takes the
parent ``Trace`` or None, and None (tracing not configured) answers None at once, so a
server without ``--tracing-config-file`` pays one ``is None`` test per instrumented
call and nothing else.  For the same reason nothing here imports OpenTelemetry at module
level (~25 ms of the daemon's startup, with the SDK the propagator's module loads): a
``Trace`` exists only once ``tracing.provider`` has loaded it, so its methods import it.

``around(parent, name, attributes, call)`` runs ``call()`` in a child span ended when
its result (a value or a Deferred) is there, with the error recorded.  ``outgoing``
starts the client span of an HTTP call (upstream wraps webhook clients in otelhttp's
transport: span ``HTTP POST``, kind client) and writes its ``traceparent`` into the
request's headers, so the webhook can continue the trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import urlsplit

import attrs
from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from opentelemetry.trace import SpanKind


@attrs.define(slots=True, eq=False)
class Trace:
    tracer: Any
    span: Any

    def child(self, name: str, attributes: Optional[dict] = None,
              kind: Optional["SpanKind"] = None) -> "Trace":
        """A child span, of ``kind`` (default ``INTERNAL``)."""
        from opentelemetry import trace
        if kind is None:
            kind = trace.SpanKind.INTERNAL
        return Trace(self.tracer, self.tracer.start_span(
            name, trace.set_span_in_context(self.span), kind, attributes))

    def headers(self) -> dict:
        """The propagation headers naming this span (``traceparent``, ...)."""
        from opentelemetry import trace
        from platformd.tracing.provider import PROPAGATOR
        carrier: dict = {}
        PROPAGATOR.inject(carrier, trace.set_span_in_context(self.span))
        return carrier

    def fail(self, error: BaseException) -> None:
        self.span.record_exception(error)
        self.failed(str(error))

    def failed(self, description: Optional[str] = None) -> None:
        """Set the span's status to ERROR."""
        from opentelemetry.trace import Status, StatusCode
        self.span.set_status(Status(StatusCode.ERROR, description))

    def end(self) -> None:
        self.span.end()


def child(parent: Optional[Trace], name: str, attributes: Optional[dict] = None,
          kind: Optional["SpanKind"] = None) -> Optional[Trace]:
    return None if parent is None else parent.child(name, attributes, kind)


def around(parent: Optional[Trace], name: str, attributes: Optional[dict], call):
    """``call()``'s result, inside a child span of ``parent`` (just ``call()`` without)."""
    if parent is None:
        return call()
    span = parent.child(name, attributes)
    try:
        result = call()
    except BaseException as error:
        span.fail(error)
        span.end()
        raise
    if isinstance(result, Deferred):
        return result.addBoth(ended, span)
    span.end()
    return result


def ended(result, span: Trace):
    """End ``span`` with ``result`` (a value, or a failure recorded as its error);
    passes ``result`` on (an addBoth callback)."""
    if hasattr(result, "value") and isinstance(getattr(result, "value"), BaseException):
        span.fail(result.value)
    span.end()
    return result


def outgoing(parent: Optional[Trace], method: str, url: str, headers) -> Optional[Trace]:
    """
    The client span of ``method url`` (None without a parent); its propagation headers
    are set on ``headers`` (a twisted ``Headers``).  End it with ``answered``.
    """
    if parent is None:
        return None
    from opentelemetry.trace import SpanKind
    parts = urlsplit(url)
    span = parent.child(f"HTTP {method}", {
        "http.method": method, "http.url": url, "net.peer.name": parts.hostname or "",
        "net.peer.port": parts.port or (443 if parts.scheme == "https" else 80),
    }, SpanKind.CLIENT)
    for name, value in span.headers().items():
        headers.setRawHeaders(name.encode("latin-1"), [value.encode("latin-1")])
    return span


def answered(result, span: Optional[Trace]):
    """End an ``outgoing`` span with the response's code, or the failure; passes
    ``result`` on (an addBoth callback)."""
    if span is None:
        return result
    code = getattr(result, "code", None)
    if isinstance(code, int):
        span.span.set_attribute("http.status_code", code)
        if code >= 400:
            span.failed()
    elif isinstance(getattr(result, "value", None), BaseException):
        span.fail(result.value)
    span.end()
    return result
