"""Response compression rules (spec 4.2.9) on a bare request."""

import gzip

from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest

from platformd.api import responses
from platformd.api.call import Call
from platformd.context import RequestContext


def call(accept_encoding=None, compression=True):
    request = DummyRequest([b""])
    if accept_encoding is not None:
        request.requestHeaders.setRawHeaders(b"accept-encoding", [accept_encoding])
    return Call(RequestContext(request), None, {"APIResponseCompression": compression})


class CompressedTests(SynchronousTestCase):
    def test_threshold_is_exclusive(self):
        """Upstream compresses bodies strictly larger than 128 KiB."""
        at = b"x" * responses.GZIP_THRESHOLD
        c = call(b"gzip")
        self.assertIs(responses.compressed(c, at), at)
        self.assertIsNone(c.request.responseHeaders.getRawHeaders(b"content-encoding"))
        above = at + b"x"
        c = call(b"gzip")
        self.assertEqual(gzip.decompress(responses.compressed(c, above)), above)
        self.assertEqual(c.request.responseHeaders.getRawHeaders(b"content-encoding"), [b"gzip"])
        self.assertEqual(c.request.responseHeaders.getRawHeaders(b"vary"), [b"Accept-Encoding"])

    def test_gate_and_header(self):
        """Nothing is compressed with the gate off, without the header, or for q-valued gzip."""
        body = b"x" * (responses.GZIP_THRESHOLD + 1)
        for c in (call(b"gzip", compression=False), call(), call(b"gzip;q=0.5")):
            self.assertIs(responses.compressed(c, body), body)
