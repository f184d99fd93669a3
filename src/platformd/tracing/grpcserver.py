"""
Spans for the pods socket's gRPC calls, as otelgrpc's server interceptor makes them:
kind server, named by the full method (``platform.nodeagent.pods.v1alpha1.Pods/ListPods``),
attributes ``rpc.system=grpc``, ``rpc.service``, ``rpc.method`` and
``rpc.grpc.status_code`` (0 when the call succeeded), status Error when it did not.
The caller's ``traceparent`` metadata is the parent (the socket is node-local and
permission-checked: its callers are trusted, as otelgrpc trusts them).  A WatchPods
span lasts as long as its stream.

The handlers run on grpcio's threads; the SDK's tracer is thread-safe and ending a span
only queues it, so nothing here waits on the reactor or the collector.
"""

from __future__ import annotations

import grpc
from opentelemetry import trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import SpanKind, Status, StatusCode

from platformd.tracing.provider import PROPAGATOR, Tracing


class _MetadataGetter(Getter):
    @staticmethod
    def get(metadata, key: str):
        values = [value for name, value in metadata if name == key]
        return values or None

    @staticmethod
    def keys(metadata):
        return [name for name, _ in metadata]


_GETTER = _MetadataGetter()


class TracingInterceptor(grpc.ServerInterceptor):
    def __init__(self, tracing: Tracing):
        self.tracer = tracing.tracer

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method.lstrip("/")
        service, _, name = method.partition("/")
        parent = PROPAGATOR.extract(tuple(handler_call_details.invocation_metadata or ()),
                                    getter=_GETTER)
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}

        def start():
            return self.tracer.start_span(method, parent, SpanKind.SERVER, attributes)

        if handler.unary_unary is not None:
            behaviour = handler.unary_unary

            def unary(request, context):
                span = start()
                try:
                    with trace.use_span(span, end_on_exit=False):
                        return behaviour(request, context)
                finally:
                    _end(span, context)

            return grpc.unary_unary_rpc_method_handler(
                unary, handler.request_deserializer, handler.response_serializer)
        if handler.unary_stream is not None:
            stream = handler.unary_stream

            def streaming(request, context):
                span = start()
                try:
                    yield from stream(request, context)
                finally:
                    _end(span, context)

            return grpc.unary_stream_rpc_method_handler(
                streaming, handler.request_deserializer, handler.response_serializer)
        return handler


def _end(span, context) -> None:
    code = context.code()
    status = code.value[0] if isinstance(code, grpc.StatusCode) else 0
    span.set_attribute("rpc.grpc.status_code", status)
    if status:
        span.set_status(Status(StatusCode.ERROR, context.details() or ""))
    span.end()
