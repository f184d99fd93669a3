"""
Writing responses: objects, lists and Status errors, in the negotiated encoding.

All error rendering happens here, once: a ``StatusError`` raised anywhere below the
router becomes a ``Status`` body with the code, reason and headers upstream uses.
"""

from __future__ import annotations

import gzip
import time

from platformd import errors
from platformd.codecs import negotiation
from platformd.util import warningheaders
from platformd.api import query, views

#: Responses larger than this are compressed for clients that accept gzip
#: (upstream's ``defaultGzipThresholdBytes``, 128 KiB).
GZIP_THRESHOLD = 128 * 1024

_COMMON_HEADERS = (
    (b"Cache-Control", b"no-cache, private"),
)


def write(request, code: int, body: bytes, content_type: str) -> bytes:
    """
    Set code and headers; return the body for Klein to write.  The body is whole, so it
    goes with a ``Content-Length`` rather than as one HTTP chunk: no chunk framing, and
    no copy of a large body joined with that framing on its way to the TLS layer.
    """
    start(request, code, content_type)
    request.responseHeaders.setRawHeaders(b"Content-Length", [b"%d" % len(body)])
    return body


def start(request, code: int, content_type: str) -> None:
    """Set the code and the headers every response carries (a streamed one: only these)."""
    request.setResponseCode(code)
    headers = request.responseHeaders
    headers.setRawHeaders(b"Content-Type", [content_type.encode("ascii")])
    for name, value in _COMMON_HEADERS:
        headers.setRawHeaders(name, [value])


def write_value(call, code: int, value) -> bytes:
    """
    Encode a write's or delete's answer as negotiated (with admission's warnings).  As
    upstream's ``transformResponseObject``, an object asked for as a Table or as
    PartialObjectMetadata is answered in that view; a ``Status`` is always itself.
    """
    add_warnings(call.context)
    choice = call.pick(views.GET_VIEWS)
    codec = choice.codec
    media = choice.media_type
    if choice.view is not None and value.get("kind") != "Status":
        value = views.object_view(choice, call.kind, value, views.include_object(call, choice),
                                  time.time())
        media = content_type(choice)
    return write(call.request, code, codec.encode(value, call.indented(choice)), media)


def add_warnings(context) -> None:
    """
    The warnings recorded below the handlers (admission's) as ``Warning`` headers: with
    any answer, a refusal too, as upstream's recorder sends what it was given.
    """
    for text in context.warnings:
        warningheaders.add(context.request.responseHeaders, text)


def write_error(request, error: errors.StatusError, choice) -> bytes:
    """The error's ``Status`` as ``choice`` (a plain ``Choice``) says, indented if asked."""
    if error.retry_after is not None:
        request.responseHeaders.setRawHeaders(b"Retry-After", [str(error.retry_after).encode()])
    body = choice.codec.encode(error.to_status(),
                               choice.pretty or query.pretty_requested(request))
    return write(request, error.code, body, choice.media_type)


def success_status(kind, name: str, uid: str = "") -> dict:
    """The ``Status`` a delete answers with when the object is gone (as upstream)."""
    details = {"name": name, "group": kind.group, "kind": kind.plural}
    if uid:
        details["uid"] = uid
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details}


def accepts_gzip(call) -> bool:
    """
    Whether a get or list response may be compressed (spec 4.2.9).  As upstream's
    ``negotiateContentEncoding``: only a bare ``gzip`` among the comma-separated codings
    counts; ``gzip;q=…`` and ``*`` do not (so ``gzip;q=0`` is never compressed).
    """
    if not call.gates["APIResponseCompression"]:
        return False
    header = call.request.getHeader(b"accept-encoding") or b""
    return any(part.strip() == b"gzip" for part in header.split(b","))


def compressed(call, body: bytes) -> bytes:
    """``body``, gzipped when it is large and the client takes gzip (headers set)."""
    if len(body) <= GZIP_THRESHOLD or not accepts_gzip(call):
        return body
    headers = call.request.responseHeaders
    headers.setRawHeaders(b"Content-Encoding", [b"gzip"])
    headers.setRawHeaders(b"Vary", [b"Accept-Encoding"])
    return gzip.compress(body, compresslevel=1)


def content_type(choice) -> str:
    """
    The Content-Type of a response in ``choice``: the media type as the client named it
    (an alias is echoed); views carry as/g/v, as upstream; aggregated discovery g/v/as,
    as upstream's ``generateMediaTypeWithGVK`` writes them.
    """
    if choice.view is None:
        return choice.media_type
    if choice.view == negotiation.AGGREGATED:
        return f"{choice.media_type};g={choice.group};v={choice.version};as={choice.view}"
    return f"{choice.media_type};as={choice.view};g={choice.group};v={choice.version}"
