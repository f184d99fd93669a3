"""
Sends fuzzed requests to a server and judges each answer (issue 11.6): no 5xx, and
every error a ``Status`` decodable in the encoding it says it is in, whose ``code`` is
the HTTP code.  Shared by the suite's bounded run and ``bench/fuzz.py``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from io import BytesIO
from urllib.parse import quote

import cbor2
import yaml
from twisted.internet import reactor
from twisted.internet.defer import Deferred, TimeoutError, inlineCallbacks, returnValue
from twisted.internet.protocol import Protocol
from twisted.web.client import FileBodyProducer, ResponseNeverReceived
from twisted.web.http_headers import Headers

from platformd.codecs.protobufcodec import ProtobufCodec
from tests.e2e.harness import Response

_protobuf = ProtobufCodec()
_SAFE = "/?=&%:;,!()*$'+~@"


def _decode(media: str, body: bytes):
    if media == "application/json":
        return json.loads(body)
    if media == "application/yaml":
        return yaml.safe_load(body)
    if media == "application/cbor":
        value = cbor2.loads(body)
        return value.value if isinstance(value, cbor2.CBORTag) else value
    if media == "application/vnd.platform.protobuf":
        return _protobuf.decode(body)
    raise ValueError(f"an error answered as {media!r}")


#: The messages of the 500s upstream itself answers an object too large for etcd with
#: (``docs/storage.md``, "Sizes"): clientv3's refusal of a transaction over 2 MiB, and
#: etcd's of a raft request over 1.5 MiB, which ``ErrorToAPIStatus`` passes on as 500s.
_TOO_LARGE_FOR_ETCD = ("rpc error: code = ResourceExhausted desc = trying to send message "
                       "larger than max (", "etcdserver: request is too large")


def _upstreams_500(response) -> bool:
    """
    The 500s upstream itself answers to a client's input (read from the Status, in
    whichever encoding it came): an apply of a field the schema does not declare
    (structured-merge-diff's ``failed to create typed patch object (...): .path: field
    not declared in schema``, a plain error that ``ErrorToAPIStatus`` makes a 500;
    kubernetes/kubernetes#122480 and #139253, open), and an object within the 3 MiB
    request limit too large for etcd (a custom object with a 2 MiB string).
    """
    if response.code != 500:
        return False
    media = (response.header("Content-Type") or "").split(";")[0].strip()
    try:
        message = str(_decode(media, response.body).get("message", ""))
    except Exception:  # noqa: BLE001 - not a Status: not upstream's either
        return False
    return "failed to create typed patch object (" in message and \
        "field not declared in schema" in message or \
        message.startswith(_TOO_LARGE_FOR_ETCD)


def problem(request, response) -> str | None:
    """What is wrong with ``response`` to ``request``, or None."""
    if response.code >= 500 and not _upstreams_500(response):
        return f"{response.code}: {response.body[:300]!r}"
    if response.code < 400 or request.method == "HEAD":
        return None
    media = (response.header("Content-Type") or "").split(";")[0].strip()
    try:
        status = _decode(media, response.body)
    except Exception as e:  # noqa: BLE001 - any undecodable answer is the finding
        return f"{response.code} not a Status in {media!r}: {e}: {response.body[:200]!r}"
    if not isinstance(status, Mapping) or status.get("kind") != "Status" \
            or status.get("code") != response.code:
        return f"{response.code} answered with {str(status)[:300]}"
    return None


#: Seconds to read a body before taking it for a watch stream (which stays open).
STREAM_WAIT = 0.5
#: Seconds for the head of an answer: a request without one is a finding.
ANSWER_WAIT = 10.0


class _Body(Protocol):
    """Collects a body; ``cut()`` ends the wait for an open stream with what came."""

    def __init__(self):
        self.data = b""
        self.done = Deferred()

    def dataReceived(self, data):
        self.data += data

    def connectionLost(self, reason):
        if not self.done.called:
            self.done.callback(self.data)

    def cut(self):
        if not self.done.called:
            self.done.callback(self.data)
            self.transport.stopProducing()


@inlineCallbacks
def send(client, fuzzed, stream_wait: float = STREAM_WAIT):
    """The Response to one fuzzed request (None when none came); a stream still open
    after ``stream_wait`` is cut (its head is what is judged)."""
    headers = Headers()
    for name, value in fuzzed.headers.items():
        headers.addRawHeader(name, value.encode("latin-1", "replace"))
    path = quote(fuzzed.path, safe=_SAFE, encoding="utf-8", errors="surrogatepass")
    producer = FileBodyProducer(BytesIO(fuzzed.body)) if fuzzed.body is not None else None
    asked = client.agent.request(fuzzed.method.encode(), (client.base + path).encode(),
                                 headers, producer)
    asked.addTimeout(ANSWER_WAIT, reactor)
    try:
        response = yield asked
    except (TimeoutError, ResponseNeverReceived):
        returnValue(None)
    body = _Body()
    response.deliverBody(body)
    timer = reactor.callLater(stream_wait, body.cut)
    data = yield body.done
    if timer.active():
        timer.cancel()
    returnValue(Response(response.code, response.headers, data))


@inlineCallbacks
def run(client, requests):
    """
    (Counter of codes, [(request, problem)]) for ``requests`` sent one by one, each on
    a connection of its own (a cut stream must not be reused by the next request).
    """
    client.pool.persistent = False
    codes, problems = Counter(), []
    for fuzzed in requests:
        response = yield send(client, fuzzed)
        if response is None:
            codes["none"] += 1
            problems.append((fuzzed, f"no answer within {ANSWER_WAIT} s"))
            continue
        codes[response.code] += 1
        found = problem(fuzzed, response)
        if found:
            problems.append((fuzzed, found))
    returnValue((codes, problems))
