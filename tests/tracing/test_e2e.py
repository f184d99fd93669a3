"""
Tracing end to end: a real platformd started with ``--tracing-config-file`` exports
its spans over OTLP/gRPC to a collector in the test (a real grpcio TraceService on
loopback): the request's span (name, attributes, resource), a trusted caller's
``traceparent`` continued, an untrusted caller's only linked, the storage spans below a
write, and parent-based sampling when no rate is set.
"""

from __future__ import annotations

import os

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.e2e.harness import Client, start_token_server, token_client
from tests.egress.proxy import ConnectProxy
from tests.egress.test_tunnel import egress_document
from tests.tracing.collector import Collector

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
SERVER_KIND = 2  # opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_SERVER


def write_config(testcase, text: str) -> str:
    path = os.path.abspath(testcase.mktemp())
    with open(path, "w") as f:
        f.write(text)
    return path


class TracingTestCase(TestCase):
    timeout = 60
    rate = "samplingRatePerMillion: 1000000\n"

    @inlineCallbacks
    def setUp(self):
        self.collector = Collector(self)
        config = write_config(self, "apiVersion: apiserver.config.platform.io/v1\n"
                                    "kind: TracingConfiguration\n"
                                    f"endpoint: {self.collector.endpoint}\n" + self.rate)
        self.server = yield start_token_server(self, 'secret-1,alice,uid-1,"devs"\n',
                                               "--tracing-config-file", config,
                                               *self.server_args())
        self.admin = Client(self, self.server.pki_dir, self.server.port_number)
        self.alice = token_client(self, self.server, "secret-1")

    def server_args(self) -> tuple:
        return ()

    @inlineCallbacks
    def exported(self, test):
        """The spans passing ``test``, once the server has exported what it ended."""
        yield self.server.tracing.flush()
        spans = yield self.collector.wait_for(test)
        return spans


class RequestSpanTests(TracingTestCase):
    @inlineCallbacks
    def test_request_span(self):
        """A GET's server span: upstream's name and otelhttp's attributes, the audit
        ID, the status code; the resource names the apiserver."""
        r = yield self.admin.get("/api/v1/namespaces/default/configmaps/missing?x=1",
                                 headers={"User-Agent": "tracing-test/1"})
        self.assertEqual(r.code, 404)
        name = "GET /api/v1/namespaces/{:namespace}/configmaps/{:name}"
        [span] = yield self.exported(lambda s: s.name == name)
        self.assertEqual(span.kind, SERVER_KIND)
        attributes = span.attributes
        self.assertEqual(attributes["http.method"], "GET")
        self.assertEqual(attributes["http.scheme"], "https")
        self.assertEqual(attributes["http.target"],
                         "/api/v1/namespaces/default/configmaps/missing?x=1")
        self.assertEqual(attributes["http.status_code"], 404)
        self.assertEqual(attributes["user_agent.original"], "tracing-test/1")
        self.assertEqual(attributes["net.host.port"], self.server.port_number)
        self.assertEqual(attributes["net.sock.peer.addr"], "127.0.0.1")
        self.assertEqual(attributes["audit-id"], r.header("Audit-Id"))
        self.assertEqual(span.resource["service.name"], "apiserver")
        self.assertTrue(span.resource["service.instance.id"].startswith("apiserver-"))

    @inlineCallbacks
    def test_non_resource_span_is_named_by_method(self):
        yield self.admin.get("/version")
        spans = yield self.exported(lambda s: s.attributes.get("http.target") == "/version")
        self.assertEqual([s.name for s in spans], ["GET"])

    @inlineCallbacks
    def test_trusted_traceparent_is_the_parent(self):
        """system:masters' traceparent: the server span continues that trace."""
        yield self.admin.get("/api/v1/namespaces", headers={"traceparent": TRACEPARENT})
        [span] = yield self.exported(lambda s: s.name == "GET /api/v1/namespaces")
        self.assertEqual((span.trace_id, span.parent_span_id), (TRACE_ID, PARENT_ID))
        self.assertEqual(span.links, ())

    @inlineCallbacks
    def test_untrusted_traceparent_is_only_linked(self):
        """Anyone else's traceparent starts a new trace that links to it."""
        yield self.alice.get("/api/v1/namespaces", headers={"traceparent": TRACEPARENT})
        [span] = yield self.exported(lambda s: s.name == "GET /api/v1/namespaces")
        self.assertNotEqual(span.trace_id, TRACE_ID)
        self.assertEqual(span.parent_span_id, "")
        self.assertEqual(span.links, ((TRACE_ID, PARENT_ID),))

    @inlineCallbacks
    def test_storage_spans_are_children(self):
        """A create's write is upstream's ``Create etcd3`` span, an update's
        ``GuaranteedUpdate etcd3``, each a child of its request's span."""
        body = {"metadata": {"name": "c1"}, "data": {"a": "1"}}
        r = yield self.admin.post("/api/v1/namespaces/default/configmaps", body)
        self.assertEqual(r.code, 201, r.body)
        body["data"]["a"] = "2"
        r = yield self.admin.put("/api/v1/namespaces/default/configmaps/c1", body)
        self.assertEqual(r.code, 200, r.body)
        [create] = yield self.exported(lambda s: s.name == "Create etcd3")
        [update] = yield self.exported(lambda s: s.name == "GuaranteedUpdate etcd3")
        [post] = self.collector.named("POST /api/v1/namespaces/{:namespace}/configmaps")
        [put] = self.collector.named("PUT /api/v1/namespaces/{:namespace}/configmaps/{:name}")
        self.assertEqual((create.trace_id, create.parent_span_id), (post.trace_id, post.span_id))
        self.assertEqual((update.trace_id, update.parent_span_id), (put.trace_id, put.span_id))
        self.assertEqual(create.attributes, {
            "audit-id": post.attributes["audit-id"], "key": "/registry/configmaps/default/c1",
            "type": "*core.ConfigMap", "resource": "configmaps"})


class ParentBasedSamplingTests(TracingTestCase):
    """No ``samplingRatePerMillion``: only what a (trusted) sampled parent asks for."""

    rate = ""

    @inlineCallbacks
    def test_only_sampled_parents_are_traced(self):
        yield self.admin.get("/api/v1/namespaces/default")
        yield self.admin.get("/api/v1/namespaces/kube-system",
                             headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-00"})
        yield self.admin.get("/api/v1/namespaces/platform-system",
                             headers={"traceparent": TRACEPARENT})
        spans = yield self.exported(lambda s: s.name.startswith("GET /api/v1/namespaces"))
        self.assertEqual([s.attributes["http.target"] for s in spans],
                         ["/api/v1/namespaces/platform-system"])


class CollectorThroughEgressTests(TracingTestCase):
    """The exporter dials the collector through the controlplane egress selection, as
    upstream's (grpcio's own CONNECT support: an http:// proxy)."""

    def server_args(self) -> tuple:
        self.proxy = ConnectProxy()
        port = reactor.listenTCP(0, self.proxy, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        egress = write_config(self, egress_document("controlplane", "HTTPConnect", tcp={
            "url": f"http://127.0.0.1:{port.getHost().port}"}).decode())
        return ("--egress-selector-config-file", egress)

    @inlineCallbacks
    def test_spans_go_through_the_proxy(self):
        yield self.admin.get("/api/v1/namespaces")
        yield self.exported(lambda s: s.name == "GET /api/v1/namespaces")
        self.assertTrue(self.proxy.heads)
        self.assertTrue(self.proxy.heads[0].startswith(
            f"CONNECT {self.collector.endpoint} HTTP/1.1\r\n"), self.proxy.heads)
