"""
``DirectResource``: plain paths reach the route's function without Klein's matching and
are answered as Klein answers them; any other path still goes through Klein.
"""

from klein import Klein
from twisted.internet.defer import CancelledError, Deferred
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from twisted.web import server
from twisted.web.test.test_web import DummyChannel

from platformd.api.site import DirectResource, make_site


class _App:
    app = Klein()

    def __init__(self):
        self.seen: list = []
        self.answer = b"ok"

    @app.route("/", branch=True, strict_slashes=False)
    def handle(self, request):
        self.seen.append(request.path)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class DirectResourceTests(SynchronousTestCase):
    def setUp(self):
        self.api = _App()
        self.klein = self.api.app.resource()
        self.resource = DirectResource(self.klein, self.api.handle)
        self.klein_calls: list = []
        render = self.klein.render
        self.klein.render = lambda request: (self.klein_calls.append(request.path),
                                             render(request))[1]

    def render(self, path: bytes):
        channel = DummyChannel()
        request = server.Request(channel)
        request.site = make_site(self.resource)
        request.kept_channel = channel
        request.method, request.path, request.uri = b"GET", path, path
        request.prepath, request.postpath = [], path[1:].split(b"/")
        self.assertIs(self.resource.render(request), server.NOT_DONE_YET)
        return request

    def written(self, request) -> bytes:
        return request.kept_channel.transport.written.getvalue()

    def test_plain_paths_skip_klein(self):
        request = self.render(b"/apis/rbac.authorization.platform.io/v1/rolebindings")
        self.assertEqual((self.klein_calls, self.api.seen),
                         ([], [b"/apis/rbac.authorization.platform.io/v1/rolebindings"]))
        self.assertTrue(request.finished)
        self.assertTrue(self.written(request).endswith(b"\r\n\r\nok"))

    def test_other_paths_go_through_klein(self):
        paths = [b"/", b"/api/", b"/api//v1", b"/.well-known/openid-configuration",
                 b"/a/./b", b"/a/%2e%2e", "/\u00e9".encode()]
        for path in paths:
            self.render(path)
        self.assertEqual(self.klein_calls, paths)

    def test_a_failure_is_twisted_webs_500(self):
        self.api.answer = ValueError("boom")
        request = self.render(b"/api/v1")
        self.assertEqual(request.code, 500)
        self.assertTrue(request.finished)
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 1)

    def test_a_deferred_answer_is_written_when_it_comes(self):
        self.api.answer = Deferred()
        request = self.render(b"/api/v1")
        self.assertFalse(request.finished)
        self.api.answer.callback(b"later")
        self.assertTrue(request.finished)
        self.assertTrue(self.written(request).endswith(b"later"))

    def test_a_deferred_answer_is_cancelled_when_the_client_goes(self):
        cancelled: list = []
        self.api.answer = Deferred(cancelled.append)
        request = self.render(b"/api/v1")
        request.connectionLost(Failure(CancelledError()))
        self.assertEqual(len(cancelled), 1)
        self.assertFalse(request.finished)
