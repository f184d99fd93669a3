"""
The twisted.web Site the API is served by, tuned for an API server.

* Request bodies are never parsed as HTML form submissions: an API body is JSON, YAML
  or another declared encoding, and twisted.web's form parsing (which also costs an
  email-header parse of Content-Type on every POST) would otherwise consume a
  ``application/x-www-form-urlencoded`` body into query arguments.
* No per-request access log line on the hot path, and no tracebacks in responses.
"""

from twisted.web import server


class APIRequest(server.Request):
    _parsePOSTFormSubmission = False


def make_site(resource) -> server.Site:
    site = server.Site(resource, requestFactory=APIRequest)
    site.displayTracebacks = False
    site.log = lambda request: None
    return site
