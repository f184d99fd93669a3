"""
The twisted.web Site the API is served by, tuned for an API server.

* Request bodies are never parsed as HTML form submissions
  (``parsePOSTFormSubmission=False``): an API body is JSON, YAML or another declared
  encoding, and twisted.web's form parsing (which also costs an email-header parse of
  Content-Type on every POST) would otherwise consume an
  ``application/x-www-form-urlencoded`` body into query arguments.
* Bodies are buffered in memory up to 100 kB and in a temporary file above, through
  the ``getContentFile`` hook (cheaper than twisted.web's fallback, which first raises
  AttributeError on every request).
* No per-request access log line on the hot path, and no tracebacks in responses.
"""

import tempfile
from io import BytesIO

from twisted.web import server

_IN_MEMORY = 100_000


def content_file(length):
    if length is not None and length < _IN_MEMORY:
        return BytesIO()
    return tempfile.TemporaryFile()


def make_site(resource) -> server.Site:
    site = server.Site(resource, parsePOSTFormSubmission=False)
    site.displayTracebacks = False
    site.log = lambda request: None
    site.getContentFile = content_file
    return site
