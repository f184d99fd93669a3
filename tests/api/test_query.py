"""Query parameters read as upstream reads them."""

from twisted.trial.unittest import SynchronousTestCase
from twisted.web.http import parse_qs
from twisted.web.test.requesthelper import DummyRequest

from platformd.api import query


def request(query_string: bytes, agent: bytes = None):
    r = DummyRequest([b""])
    r.uri = b"/api/v1/pods?" + query_string
    r.args = parse_qs(query_string, 1)
    if agent is not None:
        r.requestHeaders.setRawHeaders(b"user-agent", [agent])
    return r


class FlagTests(SynchronousTestCase):
    def test_upstream_boolean_rule(self):
        """Absent, 0 and false (any case) are false; anything else, bare or empty, true."""
        cases = {b"": False, b"watch=0": False, b"watch=false": False, b"watch=FALSE": False,
                 b"watch": True, b"watch=": True, b"watch=1": True, b"watch=true": True,
                 b"watch=yes": True, b"a=1&watch&b=2": True, b"watcher=1": False}
        for qs, expected in cases.items():
            self.assertEqual(query.flag(query.values(request(qs), b"watch")), expected, qs)

    def test_bare_key_is_one_empty_value(self):
        self.assertEqual(query.values(request(b"dryRun&x=1"), b"dryRun"), [b""])
        self.assertIsNone(query.values(request(b"dryRunX"), b"dryRun"))


class PrettyTests(SynchronousTestCase):
    def test_parameter_then_agent(self):
        """A non-empty pretty decides by ParseBool; else curl, Wget and browsers."""
        cases = [(b"pretty=true", None, True), (b"pretty=t", None, True),
                 (b"pretty=yes", None, False), (b"pretty=0", b"curl/8", False),
                 (b"pretty=", b"curl/8", True), (b"", b"Wget/1.21", True),
                 (b"", b"Mozilla/5.0 (X11)", True), (b"", b"kubectl/v1.31", False),
                 (b"", None, False)]
        for qs, agent, expected in cases:
            self.assertEqual(query.pretty_requested(request(qs, agent)), expected, (qs, agent))
