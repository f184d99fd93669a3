"""
The request's span: upstream's ``filters.WithTracing`` (otelhttp's server handler).

Where: right after authentication, as upstream places it since it trusts the incoming
trace context only from privileged users (kubernetes PR 127053): a request from
``system:masters`` or ``system:monitoring`` continues the trace its ``traceparent``
names; anyone else's request starts a new trace that only *links* to it
(otelhttp's ``WithPublicEndpointFn``), so an untrusted client can neither choose trace
IDs nor force sampling.

The span: kind server, named ``<METHOD> /<prefix>/<group>/<version>[/namespaces/
{:namespace}]/<resource>[/{:name}][/<subresource>]`` for a resource request and
``<METHOD>`` otherwise (``getSpanNameFromRequestInfo``); otelhttp's attributes
(semantic conventions 1.20: ``http.method``, ``http.scheme``, ``net.host.name``,
``net.host.port``, ``net.sock.peer.addr``, ``net.sock.peer.port``,
``user_agent.original``, ``http.flavor``, ``http.status_code``) and upstream's own:
``http.target`` (path and query) and ``audit-id``.  It ends when the response has been
written (for a watch: when the stream ends), with status Error on a 5xx, as otelhttp
sets it.  The handlers below reach it as ``ctx.span``.
"""

from __future__ import annotations

from typing import Optional

import attrs
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from platformd.tracing.provider import PROPAGATOR, Tracing
from platformd.tracing.spans import Trace

#: Groups whose incoming trace context is trusted (upstream's ``SystemPrivilegedGroup``
#: and ``MonitoringGroup``).
TRUSTED_GROUPS = frozenset({"system:masters", "system:monitoring"})


class _HeaderGetter(Getter):
    """The propagator's view of twisted's request headers."""

    @staticmethod
    def get(headers, key: str):
        values = headers.getRawHeaders(key.encode("latin-1"))
        return [v.decode("latin-1") for v in values] if values else None

    @staticmethod
    def keys(headers):
        return [name.decode("latin-1") for name, _ in headers.getAllRawHeaders()]


_GETTER = _HeaderGetter()


def span_name(method: str, info) -> str:
    if info is None or not info.is_resource:
        return method
    name = "/" + info.api_prefix
    if info.group:
        name += "/" + info.group
    name += "/" + info.version
    if info.namespace:
        name += "/namespaces/{:namespace}"
    name += "/" + info.resource
    if info.name:
        name += "/{:name}"
    if info.subresource:
        name += "/" + info.subresource
    return f"{method} {name}"


@attrs.define
class RequestTracing:
    """The filter (``filter(ctx, proceed)``); see the module docstring."""

    tracing: Tracing

    def __call__(self, ctx, proceed):
        request = ctx.request
        method = request.method.decode("ascii", "replace")
        incoming = PROPAGATOR.extract(request.requestHeaders, getter=_GETTER)
        parent: Optional[Context] = incoming
        links: tuple = ()
        user = ctx.user
        if user is None or not TRUSTED_GROUPS.intersection(user.groups):
            given = trace.get_current_span(incoming).get_span_context()
            links = (Link(given),) if given.is_valid else ()
            parent = None
        span = self.tracing.tracer.start_span(span_name(method, ctx.info), parent,
                                              SpanKind.SERVER, links=links)
        ctx.span = Trace(self.tracing.tracer, span)
        if span.is_recording():
            # A span not sampled is never exported: it only carries the trace context
            # down (a webhook still receives its traceparent), so nothing more is spent.
            span.set_attributes(_attributes(request, ctx))
            request.notifyFinish().addBoth(_finished, request, span)
        return proceed(ctx)


def _attributes(request, ctx) -> dict:
    host = request.getHost()
    peer = request.getClientAddress()
    attributes = {
        "http.method": request.method.decode("ascii", "replace"),
        "http.scheme": "https" if request.isSecure() else "http",
        "net.host.name": (request.getRequestHostname() or b"").decode("latin-1"),
        "net.host.port": getattr(host, "port", 0),
        "http.flavor": request.clientproto.decode("ascii", "replace").removeprefix("HTTP/"),
        "http.target": request.uri.decode("latin-1"),
        "audit-id": ctx.audit_id,
    }
    if hasattr(peer, "host"):
        attributes["net.sock.peer.addr"] = peer.host
        attributes["net.sock.peer.port"] = peer.port
    agent = request.getHeader(b"user-agent")
    if agent:
        attributes["user_agent.original"] = agent.decode("latin-1")
    return attributes


def _finished(result, request, span) -> None:
    """The response is written (or the client went away): the span ends."""
    code = request.code
    span.set_attribute("http.status_code", code)
    if code >= 500:
        span.set_status(Status(StatusCode.ERROR))
    span.end()
