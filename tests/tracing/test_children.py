"""
Spans below the request's, with the real clients and servers: an admission webhook call
(``Call validating webhook`` and its ``HTTP POST``, whose ``traceparent`` the webhook
receives), an authorization webhook call, and the pods socket's gRPC calls (the caller's
``traceparent`` metadata continued).  Spans are read from the SDK's in-memory exporter.
"""

from __future__ import annotations

import os

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from twisted.internet import defer, reactor
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from platformd.auth.interfaces import ALLOW, Attributes
from platformd.podinfo.service import PodsService
from platformd.tracing.config import TracingConfiguration
from platformd.tracing.provider import Tracing
from platformd.tracing.spans import Trace
from tests.authz.helpers import pods
from tests.authz.test_webhook import WebhookTestCase
from tests.podinfo.support import PodFeed, pod, socket_dir
from tests.webhooks.helpers import WebhookCase

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class Spans:
    """Every span sampled, kept in memory."""

    def __init__(self, testcase):
        self.exporter = InMemorySpanExporter()
        self.tracing = Tracing(TracingConfiguration(None, 1_000_000), reactor, exporter=self.exporter)
        testcase.addCleanup(self.tracing.shutdown)

    def root(self) -> Trace:
        return Trace(self.tracing.tracer, self.tracing.tracer.start_span("request"))

    @defer.inlineCallbacks
    def finished(self) -> dict:
        yield self.tracing.flush()
        return {s.name: s for s in self.exporter.get_finished_spans()}


def traceparent_of(span) -> bytes:
    return (f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-"
            f"{span.context.trace_flags:02x}").encode()


def recording(testcase, service) -> list:
    """The ``traceparent`` header of each POST ``service`` answers."""
    seen: list = []
    render = service.render_POST

    def render_post(request):
        seen.append(request.getHeader(b"traceparent"))
        return render(request)

    service.render_POST = render_post
    return seen


class AdmissionWebhookSpanTests(WebhookCase):
    @defer.inlineCallbacks
    def test_call_span_and_propagated_traceparent(self):
        spans = Spans(self)
        traceparents = recording(self, self.service)
        self.configure("validating", self.hook())
        a = self.attributes()
        root = a.context.span = spans.root()
        yield self.admit(a)
        root.end()
        finished = yield spans.finished()
        call, post = finished["Call validating webhook"], finished["HTTP POST"]
        self.assertEqual(call.parent.span_id, root.span.get_span_context().span_id)
        self.assertEqual(post.parent.span_id, call.context.span_id)
        self.assertEqual(post.kind, SpanKind.CLIENT)
        self.assertEqual(traceparents, [traceparent_of(post)])
        [review] = self.reviews()
        self.assertEqual(dict(call.attributes), {
            "configuration": "config", "webhook": "hook.example.com",
            "resource": "/v1, Resource=configmaps", "subresource": "", "operation": "CREATE",
            "UID": review["request"]["uid"]})
        self.assertEqual(post.attributes["http.status_code"], 200)
        self.assertEqual(post.attributes["http.url"], self.base + "/check?timeout=10s")

    @defer.inlineCallbacks
    def test_untraced_request_sends_no_traceparent(self):
        traceparents = recording(self, self.service)
        self.configure("mutating", self.hook())
        yield self.admit(self.attributes())
        self.assertEqual(traceparents, [None])


class AuthorizationWebhookSpanTests(WebhookTestCase):
    @defer.inlineCallbacks
    def test_call_span_and_propagated_traceparent(self):
        spans = Spans(self)
        root = spans.root()
        attributes = pods()
        traced = Attributes(attributes.user, attributes.info, root)
        traceparents = recording(self, self.service)
        decision = yield self.decide(self.authorizer(), traced)
        self.assertEqual(decision.verdict, ALLOW)
        root.end()
        finished = yield spans.finished()
        post = finished["HTTP POST"]
        self.assertEqual(post.parent.span_id, root.span.get_span_context().span_id)
        self.assertEqual(traceparents, [traceparent_of(post)])
        self.assertEqual((post.attributes["http.method"], post.attributes["http.url"],
                          post.attributes["http.status_code"]), ("POST", self.url, 200))


class PodsSocketSpanTests(TestCase):
    @defer.inlineCallbacks
    def test_calls_are_spans_with_the_callers_parent(self):
        import grpc

        from platformd.protos.platform.nodeagent.pods.v1alpha1 import api_pb2, api_pb2_grpc
        spans = Spans(self)
        feed = PodFeed()
        feed.put(pod("a"))
        path = os.path.join(socket_dir(self), "pods.sock")
        service = PodsService(reactor, feed.informer, path, "node-a")
        service.tracing = spans.tracing
        service.privilegedStartService()
        service.startService()
        self.addCleanup(service.stopService)
        channel = grpc.insecure_channel(f"unix:{path}")
        self.addCleanup(channel.close)
        stub = api_pb2_grpc.PodsStub(channel)
        metadata = (("traceparent", f"00-{TRACE_ID}-{PARENT_ID}-01"),)
        yield deferToThread(stub.ListPods, api_pb2.PodListRequest(), metadata=metadata,
                            timeout=10)
        failure = yield deferToThread(stub.GetPod, api_pb2.PodGetRequest(podUID="nope"),
                                      timeout=10).addErrback(lambda f: f.value)
        self.assertEqual(failure.code(), grpc.StatusCode.NOT_FOUND)
        finished = yield spans.finished()
        listed = finished["platform.nodeagent.pods.v1alpha1.Pods/ListPods"]
        self.assertEqual(listed.kind, SpanKind.SERVER)
        self.assertEqual((f"{listed.context.trace_id:032x}", f"{listed.parent.span_id:016x}"),
                         (TRACE_ID, PARENT_ID))
        self.assertEqual(dict(listed.attributes), {
            "rpc.system": "grpc", "rpc.service": "platform.nodeagent.pods.v1alpha1.Pods",
            "rpc.method": "ListPods", "rpc.grpc.status_code": 0})
        got = finished["platform.nodeagent.pods.v1alpha1.Pods/GetPod"]
        self.assertIsNone(got.parent)
        self.assertEqual(got.attributes["rpc.grpc.status_code"], 5)
        self.assertFalse(got.status.is_ok)
