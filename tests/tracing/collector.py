"""
An OTLP trace collector for tests: a real grpcio server implementing
``opentelemetry.proto.collector.trace.v1.TraceService`` on a loopback port.  Each
exported span is kept as a ``Received`` (its resource attributes with it); ``wait_for``
fires on the reactor once spans matching a test arrive.
"""

from __future__ import annotations

import threading
from concurrent import futures

import attrs
import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread


def _value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes_of(key_values) -> dict:
    return {kv.key: _value(kv.value) for kv in key_values}


@attrs.frozen
class Received:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict
    resource: dict
    links: tuple
    status_code: int


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, collector: "Collector"):
        self.collector = collector

    def Export(self, request, context):
        received = []
        for resource_spans in request.resource_spans:
            resource = attributes_of(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(Received(
                        span.name, span.trace_id.hex(), span.span_id.hex(),
                        span.parent_span_id.hex(), span.kind, attributes_of(span.attributes),
                        resource, tuple((link.trace_id.hex(), link.span_id.hex())
                                        for link in span.links), span.status.code))
        reactor.callFromThread(self.collector.arrived, received)
        return trace_service_pb2.ExportTraceServiceResponse()


class Collector:
    def __init__(self, testcase):
        self.spans: list = []
        self._waiters: list = []
        self.server = grpc.server(futures.ThreadPoolExecutor(2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Service(self), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        testcase.addCleanup(self.stop)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self):
        stopped: threading.Event = self.server.stop(0)
        return deferToThread(stopped.wait, 5)

    def arrived(self, received: list) -> None:
        self.spans.extend(received)
        for waiter in list(self._waiters):
            test, d = waiter
            found = [s for s in self.spans if test(s)]
            if found:
                self._waiters.remove(waiter)
                d.callback(found)

    def named(self, name: str) -> list:
        return [s for s in self.spans if s.name == name]

    def wait_for(self, test, timeout: float = 10.0) -> Deferred:
        """Deferred[list of the spans passing ``test``] once there is one."""
        found = [s for s in self.spans if test(s)]
        d: Deferred = Deferred()
        if found:
            d.callback(found)
            return d
        self._waiters.append((test, d))
        return d.addTimeout(timeout, reactor)
