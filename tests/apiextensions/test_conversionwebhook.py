"""
Conversion webhooks called, end to end on the in-memory server: a real HTTPS webhook on
loopback (its own CA, given as the definition's caBundle) converts ``example.com/v1``
``spec.size: "3"`` to ``example.com/v2`` ``spec.replicas: 3`` and back; objects
created in one version are read, listed and watched in the other; a failing webhook is
each read's and write's error, in upstream's words, and the reads work again once it
answers.
"""

from __future__ import annotations

import base64
import copy
import json

from twisted.internet import defer, reactor
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase
from twisted.web import resource, server

from platformd.edge.tlscontext import server_tls_options
from platformd.files.pki import ensure_pki
from tests.apiextensions.test_crd import CRDS, definition
from tests.stub import StubServer

V1 = "/apis/example.com/v1/namespaces/default/widgets"
V2 = "/apis/example.com/v2/namespaces/default/widgets"


def to_version(obj: dict, desired: str) -> dict:
    """The test webhook's conversion: v1 ``size`` (a string) <-> v2 ``replicas``."""
    out = copy.deepcopy(obj)
    spec = out.get("spec") or {}
    if desired == "example.com/v2" and "size" in spec:
        spec["replicas"] = int(spec.pop("size"))
    elif desired == "example.com/v1" and "replicas" in spec:
        spec["size"] = str(spec.pop("replicas"))
    out["apiVersion"] = desired
    return out


def converting(review: dict) -> dict:
    request = review["request"]
    return {"apiVersion": review["apiVersion"], "kind": "ConversionReview",
            "response": {"uid": request["uid"], "result": {"status": "Success"},
                         "convertedObjects": [to_version(o, request["desiredAPIVersion"])
                                              for o in request["objects"]]}}


def altered(metadata=None, **response):
    """An answer converting, with ``response`` fields replaced and each converted
    object's ``metadata`` updated."""
    def answer(review: dict) -> dict:
        out = converting(review)
        out["response"].update(response)
        for obj in out["response"].get("convertedObjects") or ():
            obj["metadata"].update(metadata or {})
        return out
    return answer


class ConversionServer(resource.Resource):
    """Answers each review with ``answer(review)`` (a dict, or bytes with ``code``)."""

    isLeaf = True

    def __init__(self):
        super().__init__()
        self.answer = converting
        self.code = 200
        self.content_type = b"application/json"
        self.reviews: list = []

    def render_POST(self, request):
        review = json.loads(request.content.read())
        self.reviews.append((request.uri.decode(), review))
        request.setResponseCode(self.code)
        request.setHeader(b"content-type", self.content_type)
        answer = self.answer(review)
        return answer if isinstance(answer, bytes) else json.dumps(answer).encode()


def https_webhook(testcase, webhook) -> tuple:
    """``(caBundle, url)`` of ``webhook`` (a resource) served over HTTPS on loopback
    with a CA of its own, stopped at the test's cleanup."""
    paths = ensure_pki(testcase.mktemp(), [], [], "https://127.0.0.1:1")
    with open(paths.ca_cert, "rb") as f:
        ca_bundle = base64.b64encode(f.read()).decode()
    port = reactor.listenSSL(0, server.Site(webhook),
                             server_tls_options(paths.serving_cert, paths.serving_key),
                             interface="127.0.0.1")
    testcase.addCleanup(port.stopListening)
    return ca_bundle, f"https://127.0.0.1:{port.getHost().port}/convert"


def webhook_definition(ca_bundle: str, url: str) -> dict:
    """Widgets stored in ``v1``, served in ``v1`` and ``v2``, converted by the webhook
    at ``url`` (trusted with ``ca_bundle``)."""
    crd = definition()
    v2 = copy.deepcopy(crd["spec"]["versions"][0])
    v2["name"], v2["storage"] = "v2", False
    crd["spec"]["versions"].append(v2)
    crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "conversionReviewVersions": ["v1", "v1beta1"]}}
    return crd


class ConversionCase(TestCase):
    """The in-memory server and a real HTTPS conversion webhook on loopback, with a
    definition (``self.crd``, not yet created) storing ``v1`` and serving ``v2``
    through it."""

    timeout = 30

    def setUp(self):
        paths = ensure_pki(self.mktemp(), [], [], "https://127.0.0.1:1")
        with open(paths.ca_cert, "rb") as f:
            ca_bundle = base64.b64encode(f.read()).decode()
        self.webhook = ConversionServer()
        self.tls = server_tls_options(paths.serving_cert, paths.serving_key)
        self.port = self.listen(0)
        self.addCleanup(lambda: self.port.stopListening())
        self.url = f"https://127.0.0.1:{self.port.getHost().port}/convert"
        self.stub = StubServer(conversion_reactor=reactor)
        self.addCleanup(self._stop)
        self.admin = self.stub.client()
        self.crd = webhook_definition(ca_bundle, self.url)

    def listen(self, number: int):
        return reactor.listenSSL(number, server.Site(self.webhook), self.tls,
                                 interface="127.0.0.1")

    @defer.inlineCallbacks
    def _stop(self):
        yield self.stub.components.custom_resources.caller.close()
        self.stub.stop()
        yield deferLater(reactor, 0.05, lambda: None)

    @defer.inlineCallbacks
    def settle(self, until=lambda: True, seconds: float = 10.0):
        """Turn the real reactor (the webhook's calls) and flush the stub until
        ``until()`` holds."""
        deadline = reactor.seconds() + seconds
        self.stub.flush()
        while not until():
            self.assertLess(reactor.seconds(), deadline, "never settled")
            yield deferLater(reactor, 0.005, lambda: None)
            self.stub.flush()

    @defer.inlineCallbacks
    def call(self, method: str, path: str, body=None, **kw):
        pending = self.admin.start(method, path, body, **kw)
        yield self.settle(lambda: bool(pending.answered))
        return pending.result()

    @defer.inlineCallbacks
    def until_ok(self, path: str, seconds: float = 10.0):
        """GET ``path`` until it answers 200 (a view converting, or not yet served)."""
        deadline = reactor.seconds() + seconds
        while True:
            r = yield self.call("GET", path)
            if r.code == 200:
                return r
            self.assertLess(reactor.seconds(), deadline, r.body)
            yield deferLater(reactor, 0.01, lambda: None)

    @defer.inlineCallbacks
    def serve(self):
        r = yield self.call("POST", CRDS, self.crd)
        self.assertEqual(r.code, 201, r.body)
        yield self.until_ok(V2)

    def assertStatus(self, r, message: str):
        """Upstream's plain conversion error: 500, no reason."""
        self.assertEqual(r.code, 500, r.body)
        self.assertEqual(r.json(), {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Failure", "message": message, "code": 500})


class ConversionWebhookTests(ConversionCase):
    @defer.inlineCallbacks
    def test_create_v1_read_v2(self):
        """An object created in the storage version is read, listed and watched in v2
        as the webhook converts it; one review per list, none for v1 reads."""
        yield self.serve()
        watch = self.stub.client().watch(V2 + "?watch=1")
        r = yield self.call("POST", V1, {"apiVersion": "example.com/v1", "kind": "Widget",
                                         "metadata": {"name": "a", "labels": {"x": "y"}},
                                         "spec": {"size": "3"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["spec"], {"size": "3"})
        r = yield self.call("GET", V2 + "/a")
        self.assertEqual(r.code, 200, r.body)
        got = r.json()
        self.assertEqual((got["apiVersion"], got["kind"], got["spec"]),
                         ("example.com/v2", "Widget", {"replicas": 3}))
        self.assertEqual(got["metadata"]["labels"], {"x": "y"})
        self.assertTrue(got["metadata"]["resourceVersion"])
        r = yield self.call("GET", V2)
        self.assertEqual([i["spec"] for i in r.json()["items"]], [{"replicas": 3}])
        self.assertEqual(r.json()["apiVersion"], "example.com/v2")
        yield self.settle(lambda: len(watch.events) == 1)
        self.assertEqual(watch.events[0]["type"], "ADDED")
        self.assertEqual(watch.events[0]["object"]["spec"], {"replicas": 3})
        r = yield self.call("GET", V1 + "/a")
        self.assertEqual(r.json()["spec"], {"size": "3"})
        # The review: v1 (the first known review version), the desired version, the
        # object in the storage version; ?timeout=30s as upstream's client adds it.
        uri, review = self.webhook.reviews[-1]
        self.assertEqual(uri, "/convert?timeout=30s")
        self.assertEqual(review["apiVersion"], "apiextensions.platform.io/v1")
        self.assertEqual(review["kind"], "ConversionReview")
        self.assertEqual(review["request"]["desiredAPIVersion"], "example.com/v2")
        self.assertEqual([o["spec"] for o in review["request"]["objects"]], [{"size": "3"}])

    @defer.inlineCallbacks
    def test_create_v2_stored_v1(self):
        """A create in v2 is stored in v1 (converted by the webhook) and answered with the
        stored object converted back; an update in v2 likewise; a dry run converts and
        stores nothing."""
        yield self.serve()
        body = {"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "b"},
                "spec": {"replicas": 5}}
        sent = len(self.webhook.reviews)
        r = yield self.call("POST", V2 + "?dryRun=All", body)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["spec"], {"replicas": 5})
        self.assertEqual(len(self.webhook.reviews), sent + 2)  # there and back
        r = yield self.call("POST", V2, body)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((r.json()["apiVersion"], r.json()["spec"]),
                         ("example.com/v2", {"replicas": 5}))
        raw = self.successResultOf(self.stub.storage.get("/registry/widgets.example.com/default/b"))
        stored = json.loads(raw.value)
        self.assertEqual((stored["apiVersion"], stored["spec"]), ("example.com/v1", {"size": "5"}))
        r = yield self.call("PATCH", V2 + "/b", {"spec": {"replicas": 7}},
                            content_type="application/merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["spec"], {"replicas": 7})
        r = yield self.call("GET", V1 + "/b")
        self.assertEqual(r.json()["spec"], {"size": "7"})
        r = yield self.call("GET", V2 + "/b")
        self.assertEqual(r.json()["spec"], {"replicas": 7})

    @defer.inlineCallbacks
    def failing(self, answer, code=200, content_type=b"application/json"):
        """Serve, store one object in v1, then make the webhook fail; the GET in v2's
        answer."""
        yield self.serve()
        r = yield self.call("POST", V1, {"apiVersion": "example.com/v1", "kind": "Widget",
                                         "metadata": {"name": "a"}, "spec": {"size": "1"}})
        self.assertEqual(r.code, 201, r.body)
        yield self.until_ok(V2 + "/a")
        self.webhook.answer, self.webhook.code = answer, code
        self.webhook.content_type = content_type
        r = yield self.call("POST", V1, {"apiVersion": "example.com/v1", "kind": "Widget",
                                         "metadata": {"name": "c"}, "spec": {"size": "2"}})
        self.assertEqual(r.code, 201, r.body)
        r = yield self.call("GET", V2 + "/a")
        return r

    @defer.inlineCallbacks
    def test_webhook_answers_500(self):
        """A webhook answering 500 with text is upstream's REST client's error."""
        r = yield self.failing(lambda review: b"boom\n", 500, b"text/plain")
        self.assertStatus(r, 'conversion webhook for example.com/v1, Kind=Widget failed: an '
                             'error on the server ("boom") has prevented the request from '
                             'succeeding')

    @defer.inlineCallbacks
    def test_webhook_failure_message(self):
        """A review answered with result Failure is its message."""
        r = yield self.failing(altered(result={
            "status": "Failure", "message": "custom webhook conversion error"}))
        self.assertStatus(r, "conversion webhook for example.com/v1, Kind=Widget failed: "
                             "custom webhook conversion error")

    @defer.inlineCallbacks
    def test_uid_mismatch(self):
        r = yield self.failing(altered(uid="nope"))
        uid = self.webhook.reviews[-1][1]["request"]["uid"]
        self.assertStatus(r, "conversion webhook for example.com/v1, Kind=Widget failed: "
                             f'expected response.uid="{uid}", got "nope"')

    @defer.inlineCallbacks
    def test_wrong_count(self):
        r = yield self.failing(altered(convertedObjects=[]))
        self.assertStatus(r, "conversion webhook for example.com/v1, Kind=Widget returned 0 "
                             "objects, expected 1")

    @defer.inlineCallbacks
    def test_metadata_changed(self):
        """Only labels and annotations may change: a changed name is refused."""
        r = yield self.failing(altered(metadata={"name": "other"}))
        self.assertStatus(r, "conversion webhook for example.com/v1, Kind=Widget returned "
                             "invalid object: must have the same name: c != other")

    @defer.inlineCallbacks
    def test_labels_may_change(self):
        """A label the webhook adds is kept; other metadata it changes is restored."""
        yield self.serve()
        self.webhook.answer = altered(metadata={"labels": {"converted": "yes"},
                                                "generation": 99})
        r = yield self.call("POST", V1, {"apiVersion": "example.com/v1", "kind": "Widget",
                                         "metadata": {"name": "a"}, "spec": {"size": "1"}})
        self.assertEqual(r.code, 201, r.body)
        r = yield self.until_ok(V2 + "/a")
        meta = r.json()["metadata"]
        self.assertEqual((meta["labels"], meta["generation"]), ({"converted": "yes"}, 1))

    @defer.inlineCallbacks
    def test_webhook_down_then_back(self):
        """Unreachable: the GET in v2 says so (the transport's words after ``Post
        "<url>?timeout=30s":``), the open v2 watch ends, a create in v2 fails alike; once
        the webhook answers again the next read converts afresh."""
        yield self.serve()
        r = yield self.call("POST", V1, {"apiVersion": "example.com/v1", "kind": "Widget",
                                         "metadata": {"name": "a"}, "spec": {"size": "1"}})
        yield self.until_ok(V2 + "/a")
        watch = self.stub.client().watch(V2 + "?watch=1&resourceVersion=" +
                                         r.json()["metadata"]["resourceVersion"])
        number = self.port.getHost().port
        yield self.port.stopListening()
        yield self.stub.components.custom_resources.caller.close()
        r = yield self.call("POST", V1, {"apiVersion": "example.com/v1", "kind": "Widget",
                                         "metadata": {"name": "c"}, "spec": {"size": "2"}})
        self.assertEqual(r.code, 201, r.body)
        yield self.settle(lambda: watch.ended)
        r = yield self.call("GET", V2 + "/a")
        self.assertEqual(r.code, 500, r.body)
        # Both objects were being converted again when the call failed: one review,
        # named as upstream names the first object's own call.
        self.assertEqual(r.json()["message"],
                         "conversion webhook for example.com/v1, Kind=Widget failed: "
                         f'Post "{self.url}?timeout=30s": Connection was refused by other '
                         "side: 111: Connection refused.", r.body)
        r = yield self.call("POST", V2, {"apiVersion": "example.com/v2", "kind": "Widget",
                                         "metadata": {"name": "d"}, "spec": {"replicas": 1}})
        self.assertEqual(r.code, 500, r.body)
        self.assertTrue(r.json()["message"].startswith(
            "conversion webhook for example.com/v2, Kind=Widget failed: "), r.body)
        self.port = self.listen(number)
        r = yield self.call("GET", V2)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual([i["spec"] for i in r.json()["items"]],
                         [{"replicas": 1}, {"replicas": 2}])
