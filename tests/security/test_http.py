"""
The request path under attack (``docs/security.md``, "The request path"): each test
replays the attack over real sockets on loopback against a real platformd.

* HEAD on a watch (item 3): upstream routes no HEAD to a resource, so it is go-restful's
  405, with a ``Content-Length`` and no body; the connection carries the next request.
* Bodies before authentication (item 4): a request is refused on its headers — no
  ``100 Continue``, no body read, no content file made — and the connection is closed
  (HTTP/1.1) or the stream reset (HTTP/2, and the connection ended after a 401).
* Body deadlines and descriptors (item 5): a body trickled past the request's deadline is
  cut with upstream's 504; tricklers without credentials hold no connection; out of
  descriptors, the listener backs off and logs once.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import ssl
import threading
import time

import h2.errors
import h2.events
from hyperframe.frame import DataFrame
from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.protocol import Protocol, ServerFactory
from twisted.internet.task import Clock, deferLater
from twisted.internet.threads import deferToThread
from twisted.logger import Logger
from twisted.trial.unittest import SkipTest, TestCase

from platformd.edge import accepting
from tests.e2e.daemon import Server, free_port, write_tokens
from tests.e2e.harness import start_server
from tests.e2e.test_http2 import H2Client, Stream

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
#: Upstream's 401: the authentication filter's ``Unauthorized`` handler writes
#: ``NewUnauthorized("Unauthorized")``.
UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
#: go-restful's 405 through upstream's ``serviceErrorHandler``:
#: ``NewGenericServerResponse(405, "", GroupResource{}, "", ...)``, whose details are an
#: empty, non-nil ``StatusDetails``.
METHOD_NOT_ALLOWED = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the '
    b'server does not allow this method on the requested resource","reason":'
    b'"MethodNotAllowed","details":{},"code":405}')
#: Upstream's timeout handler (``WithTimeoutForNonLongRunningRequests``):
#: ``json.NewEncoder`` of the bare ``NewTimeoutError`` Status, Go's sniffed content type.
TIMEOUT = (b'{"metadata":{},"status":"Failure","message":"Timeout: request did not complete '
           b'within the allotted timeout","reason":"Timeout","details":{},"code":504}\n')
#: A token of a user with no permission at all (authenticated, then forbidden).
NOBODY = "nobody-token"


class Raw:
    """One TLS connection driven byte by byte, as an attacker drives it (in a thread)."""

    def __init__(self, server, identity: str | None = None, timeout: float = 10):
        context = ssl.create_default_context(cafile=os.path.join(server.pki_dir, "ca.crt"))
        if identity:
            context.load_cert_chain(os.path.join(server.pki_dir, f"{identity}.crt"),
                                    os.path.join(server.pki_dir, f"{identity}.key"))
        raw = socket.create_connection(("127.0.0.1", server.port_number), timeout=timeout)
        self.sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self, head_only: bool = False) -> tuple:
        """The next response: (code, headers by lower-case name, body)."""
        while b"\r\n\r\n" not in self.buffer:
            self._read()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = 0 if head_only else int(headers.get("content-length", 0))
        while len(self.buffer) < length:
            self._read()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(status.split()[1]), headers, body

    def closed(self) -> bool:
        """Whether the server closes the connection (with nothing more sent)."""
        try:
            return self.sock.recv(1) == b"" and not self.buffer
        except (ConnectionResetError, ssl.SSLError):
            return not self.buffer

    def _read(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError(f"closed by the server after {self.buffer!r}")
        self.buffer += data

    def close(self) -> None:
        self.sock.close()


def post(path: str, length: int, *headers: str) -> bytes:
    """A POST's request line and headers declaring a JSON body of ``length`` bytes."""
    extra = "".join(f"{h}\r\n" for h in headers)
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


class ServedTestCase(TestCase):
    """A platformd with a token for a user without permissions; content files counted."""

    timeout = 60
    server_args: tuple = ()

    @inlineCallbacks
    def setUp(self):
        directory = self.mktemp()
        os.makedirs(directory)
        tokens = os.path.join(directory, "tokens.csv")
        with open(tokens, "w") as f:
            f.write(f"{NOBODY},nobody,2\n")
        self.server = yield start_server(self, "--token-auth-file", tokens, *self.server_args)
        #: The declared lengths of the bodies a content file was made for.
        self.content_files: list = []
        site = self.server.site
        made = site.getContentFile
        site.getContentFile = lambda length: self.content_files.append(length) or made(length)

    def raw(self, identity: str | None = None) -> Raw:
        connection = Raw(self.server, identity)
        self.addCleanup(connection.close)
        return connection


class HeadTests(ServedTestCase):
    """Item 3: HEAD answers with headers only, framed, and the connection goes on."""

    def test_head_on_a_watch_then_another_request(self):
        def run():
            client = self.raw("admin")
            answers = []
            for path in (CONFIGMAPS + "?watch=1", CONFIGMAPS, CONFIGMAPS + "/missing"):
                client.send(f"HEAD {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                answers.append(client.response(head_only=True))
            client.send(f"GET {CONFIGMAPS} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            return answers, client.response()

        def check(result):
            heads, (code, headers, body) = result
            for head_code, head_headers, head_body in heads:
                self.assertEqual((head_code, head_body), (405, b""))
                self.assertEqual(head_headers["content-type"], "application/json")
                self.assertEqual(head_headers["content-length"], str(len(METHOD_NOT_ALLOWED)))
                self.assertNotIn("transfer-encoding", head_headers)
            self.assertEqual(code, 200, body)
            self.assertEqual(json.loads(body)["kind"], "ConfigMapList")
        return deferToThread(run).addCallback(check)

    def test_405_body_as_upstream(self):
        """The body a HEAD's Content-Length counts: what another unrouted method gets."""
        def run():
            client = self.raw("admin")
            client.send(f"OPTIONS {CONFIGMAPS} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            return client.response()
        return deferToThread(run).addCallback(
            lambda answer: self.assertEqual(answer[::2], (405, METHOD_NOT_ALLOWED)))

    def test_head_on_other_paths_is_headers_only(self):
        """Discovery and health answer HEAD as GET, without the body; framed."""
        def run():
            client = self.raw("admin")
            answers = []
            for path in ("/version", "/healthz", "/api"):
                client.send(f"HEAD {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                answers.append(client.response(head_only=True))
                client.send(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                answers.append(client.response())
            return answers

        def check(answers):
            for (head_code, head, empty), (code, _, body) in zip(answers[::2], answers[1::2]):
                self.assertEqual((head_code, empty), (code, b""))
                self.assertEqual(int(head["content-length"]), len(body))
        return deferToThread(run).addCallback(check)


class ServerHeaderTests(ServedTestCase):
    """Item 14: no Server header (Go's net/http sends none; twisted.web named itself)."""

    def test_no_server_header(self):
        def run():
            answers = []
            for identity in ("admin", None):
                client = self.raw(identity)
                for path in (CONFIGMAPS, "/version", "/no/such/path"):
                    client.send(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                    answers.append(client.response())
                    if identity is None:
                        break  # 401: the connection is closed
            return answers

        def check(answers):
            self.assertEqual([code for code, _, _ in answers], [200, 200, 404, 401])
            for _, headers, _ in answers:
                self.assertNotIn("server", headers)
        return deferToThread(run).addCallback(check)


class BodyBeforeAuthenticationTests(ServedTestCase):
    """Item 4: the filters run on the headers; a refused body is never read."""

    def test_expect_continue_refused_without_100(self):
        def run():
            client = self.raw()
            client.send(post(CONFIGMAPS, 3_000_000, "Expect: 100-continue"))
            return client.response(), client.closed()

        def check(result):
            (code, headers, body), closed = result
            self.assertEqual((code, json.loads(body)), (401, UNAUTHORIZED))
            self.assertEqual(headers["connection"], "close")
            self.assertTrue(closed)
            self.assertEqual(self.content_files, [])
        return deferToThread(run).addCallback(check)

    def test_declared_length_over_the_limit_after_authentication(self):
        """
        A Content-Length over 3 MiB is refused where upstream's handler refuses it, past
        the filters: 401 without credentials, 403 without permission, 413 for an admin;
        none of the body read.
        """
        def run():
            answers = []
            for identity, extra in ((None, ()), (None, (f"Authorization: Bearer {NOBODY}",)),
                                    ("admin", ())):
                client = self.raw(identity)
                client.send(post(CONFIGMAPS, 4 * 1024 * 1024, *extra))
                code, _, body = client.response()
                answers.append((code, json.loads(body)["reason"], client.closed()))
            return answers

        def check(answers):
            self.assertEqual(answers, [(401, "Unauthorized", True), (403, "Forbidden", True),
                                       (413, "RequestEntityTooLarge", True)])
            self.assertEqual(self.content_files, [])
        return deferToThread(run).addCallback(check)

    def test_forbidden_without_100(self):
        """Authorization runs before the body too: 403 at once, no 100 Continue."""
        def run():
            client = self.raw()
            client.send(post(CONFIGMAPS, 50, "Expect: 100-continue",
                             f"Authorization: Bearer {NOBODY}"))
            return client.response(), client.closed()

        def check(result):
            (code, _, body), closed = result
            self.assertEqual((code, json.loads(body)["reason"]), (403, "Forbidden"))
            self.assertTrue(closed)
            self.assertEqual(self.content_files, [])
        return deferToThread(run).addCallback(check)

    def test_expect_continue_allowed(self):
        """An allowed request gets its 100 Continue when the handler reads the body."""
        body = json.dumps({"metadata": {"name": "continued"}}).encode()

        def run():
            client = self.raw("admin")
            client.send(post(CONFIGMAPS, len(body), "Expect: 100-continue"))
            continued = client.response(head_only=True)[0]
            client.send(body)
            return continued, client.response()[0]
        return deferToThread(run).addCallback(self.assertEqual, (100, 201))

    def test_declared_body_never_sent(self):
        """A body declared and never sent: 401 at once (it waited forever before)."""
        def run():
            client = self.raw()
            started = time.monotonic()
            client.send(post(CONFIGMAPS, 1000))
            return client.response()[0], time.monotonic() - started, client.closed()

        def check(result):
            code, took, closed = result
            self.assertEqual(code, 401)
            self.assertLess(took, 5)
            self.assertTrue(closed)
        return deferToThread(run).addCallback(check)

    @inlineCallbacks
    def test_body_sent_at_once_is_not_read(self):
        """A 3,000,000-byte body sent without waiting: 401, no content file, and the
        connection closed rather than read to the end (TCP within the 0.5 s linger)."""
        def run():
            client = self.raw()
            sending = threading.Thread(target=self._send_quietly,
                                       args=(client, post(CONFIGMAPS, 3_000_000) +
                                             b"x" * 2_999_999))
            sending.start()
            answer = client.response()
            closed = client.closed()
            sending.join(10)
            return answer[0], closed

        self.assertEqual((yield deferToThread(run)), (401, True))
        yield deferLater(reactor, 0.6, lambda: None)
        self.assertEqual(self.content_files, [])
        self.assertEqual(self.server.listener.connections(), [])

    @staticmethod
    def _send_quietly(client: Raw, data: bytes) -> None:
        try:
            client.send(data)
        except OSError:
            pass  # the server closed the connection: it does not read the rest


class BodyBeforeAuthenticationOverHTTP2Tests(ServedTestCase):
    """Item 4 over HTTP/2: a stream is not read beyond its first window."""

    server_args = ("--enable-http2-serving",)

    def client(self, identity: str | None) -> tuple:
        """An HTTP/2 client, and the list its connection-level events are added to."""
        client = H2Client(self.server.port_number, self.server.pki_dir, identity)
        self.addCleanup(client.close)
        events: list = []
        receive = client.conn.receive_data
        client.conn.receive_data = lambda data: _recorded(events, receive(data))
        return client, events

    @staticmethod
    def post_unread(client: H2Client, path: str) -> Stream:
        """POST 60,000 bytes (within the connection's first window of 65,535) to ``path``,
        and read until the stream is reset."""
        stream_id = client.conn.get_next_available_stream_id()
        client.conn.send_headers(stream_id, [
            (":method", "POST"), (":path", path), (":scheme", "https"),
            (":authority", "127.0.0.1"), ("content-type", "application/json"),
            ("content-length", "60000")])
        client.streams[stream_id] = stream = Stream()
        client.pump(lambda: client.conn.local_flow_control_window(stream_id) >= 60_000)
        size = client.conn.max_outbound_frame_size
        for start in range(0, 60_000, size):
            client.conn.send_data(stream_id, b"x" * min(size, 60_000 - start))
        client.flush()
        client.pump(lambda: stream.reset)
        return stream

    def test_unauthenticated_stream_refused_then_goaway(self):
        """401 with nothing read: the stream is reset with NO_ERROR after the answer, and
        the connection ends with GOAWAY (upstream's UnauthenticatedHTTP2DOSMitigation)."""
        def run():
            client, events = self.client(identity=None)
            stream = self.post_unread(client, CONFIGMAPS)
            try:
                client.pump(lambda: False)
            except ConnectionError:
                pass  # closed after the GOAWAY
            return (int(stream.headers[":status"]), "connection" in stream.headers,
                    json.loads(bytes(stream.data)),
                    [(type(e).__name__, e.error_code) for e in events
                     if isinstance(e, (h2.events.StreamReset, h2.events.ConnectionTerminated))])

        def check(result):
            self.assertEqual(result, (401, False, UNAUTHORIZED, [
                ("StreamReset", h2.errors.ErrorCodes.NO_ERROR),
                ("ConnectionTerminated", h2.errors.ErrorCodes.NO_ERROR)]))
            self.assertEqual(self.content_files, [])
        return deferToThread(run).addCallback(check)

    def test_body_after_the_reset_is_given_back_at_once(self):
        """
        A body that arrives after its stream was answered and reset is returned to the
        connection's window in full at once, as Go's server returns a closed stream's
        DATA (h2 returned it only past half a window, and a client could be left without
        window for its next request).  The body is sent as raw frames after the reset.
        """
        def run():
            client, events = self.client(identity="admin")
            stream_id = client.conn.get_next_available_stream_id()
            client.conn.send_headers(stream_id, [
                (":method", "POST"), (":path", "/api/v1/namespaces/default/nothings"),
                (":scheme", "https"), (":authority", "127.0.0.1"),
                ("content-type", "application/json"), ("content-length", "60000")])
            client.streams[stream_id] = stream = Stream()
            client.flush()
            client.pump(lambda: stream.reset)
            for start in range(0, 60_000, 16_384):
                frame = DataFrame(stream_id, data=b"x" * min(16_384, 60_000 - start))
                client.sock.sendall(frame.serialize())

            def returned():
                return sum(e.delta for e in events
                           if isinstance(e, h2.events.WindowUpdated) and e.stream_id == 0)
            client.pump(lambda: returned() >= 60_000)
            return int(stream.headers[":status"]), returned()
        return deferToThread(run).addCallback(self.assertEqual, (404, 60_000))

    def test_answered_before_its_body_gives_the_window_back(self):
        """An answer before the body (a 404: no route takes the path) resets the stream
        and gives what it held back to the connection: two such POSTs of 60,000 bytes,
        then a GET, on one connection whose window is 65,535."""
        def run():
            client, events = self.client(identity="admin")
            codes = [int(self.post_unread(client, "/api/v1/namespaces/default/nothings")
                         .headers[":status"]) for _ in range(2)]
            return codes, client.call("GET", CONFIGMAPS)[0], [
                e.error_code for e in events if isinstance(e, h2.events.StreamReset)]
        return deferToThread(run).addCallback(self.assertEqual, (
            [404, 404], 200, [h2.errors.ErrorCodes.NO_ERROR] * 2))

    def test_head_on_a_watch(self):
        def run():
            client = H2Client(self.server.port_number, self.server.pki_dir)
            self.addCleanup(client.close)
            stream_id = client.open("HEAD", CONFIGMAPS + "?watch=1")
            stream = client.streams[stream_id]
            client.pump(lambda: stream.ended or stream.reset)
            status, length = stream.headers[":status"], stream.headers["content-length"]
            return int(status), int(length), bytes(stream.data), client.call("GET", CONFIGMAPS)[0]
        return deferToThread(run).addCallback(
            self.assertEqual, (405, len(METHOD_NOT_ALLOWED), b"", 200))


class BodyDeadlineTests(ServedTestCase):
    """Item 5: a body is read within the request's deadline; tricklers hold nothing."""

    def test_trickled_body_cut_at_its_deadline(self):
        """?timeout=1s and a body trickled a byte every 0.2 s: upstream's 504 at the
        deadline, then the connection is closed."""
        def run():
            client = self.raw("admin")
            client.send(post(CONFIGMAPS + "?timeout=1s", 100))
            started = time.monotonic()
            client.sock.settimeout(0.2)
            while True:
                try:
                    answer = client.response()
                    break
                except socket.timeout:
                    client.send(b" ")
            client.sock.settimeout(10)
            return answer, time.monotonic() - started, client.closed()

        def check(result):
            (code, headers, body), took, closed = result
            self.assertEqual((code, body), (504, TIMEOUT))
            self.assertEqual(headers["connection"], "close")
            self.assertTrue(0.9 < took < 5, took)
            self.assertTrue(closed)
        return deferToThread(run).addCallback(check)

    @inlineCallbacks
    def test_tricklers_without_credentials_hold_no_connection(self):
        """50 connections trickling a body byte every 0.2 s for 2 s: each is answered
        401 at once and closed within the 0.5 s linger, however it keeps sending."""
        count = 50
        clients = yield deferToThread(lambda: [self.raw() for _ in range(count)])

        def trickle():
            for client in clients:
                client.send(post(CONFIGMAPS, 1000))
            for _ in range(10):
                for client in clients:
                    try:
                        client.send(b"x")
                    except OSError:
                        pass  # closed by the server
                time.sleep(0.2)
        yield deferToThread(trickle)
        self.assertEqual(self.server.listener.connections(), [])


def _recorded(events: list, received: list) -> list:
    events.extend(received)
    return received


@inlineCallbacks
def until(condition, within: float = 10):
    """Wait (on the real reactor) until ``condition()`` is true."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("still waiting")
        yield deferLater(reactor, 0.01, lambda: None)


class _Exhausted:
    """A listening socket whose ``accept()`` fails with EMFILE ``failures`` times."""

    def __init__(self, listening, failures: int):
        self.listening = listening
        self.failures = failures

    def accept(self):
        if self.failures:
            self.failures -= 1
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return self.listening.accept()

    def __getattr__(self, name):
        return getattr(self.listening, name)


class AcceptBackoffTests(TestCase):
    """Item 5: out of descriptors, the listener backs off as Go's does, logging once."""

    timeout = 30

    @inlineCallbacks
    def test_backs_off_then_accepts(self):
        clock, events, accepted = Clock(), [], []
        self.patch(accepting, "log", Logger(observer=events.append))
        factory = ServerFactory.forProtocol(Protocol)
        factory.buildProtocol = lambda address: accepted.append(address) or Protocol()
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        port.socket = _Exhausted(port.socket, failures=3)
        accepting.accept_with_backoff(port, clock)
        client = socket.create_connection(("127.0.0.1", port.getHost().port))
        self.addCleanup(client.close)
        delays = []
        for _ in range(3):
            yield until(clock.getDelayedCalls)  # the reactor tried to accept, backed off
            self.assertNotIn(port, reactor.getReaders())
            [call] = clock.getDelayedCalls()
            delays.append(call.getTime() - clock.seconds())
            clock.advance(delays[-1])
        yield until(lambda: accepted)
        self.assertEqual(([round(d, 6) for d in delays], len(accepted)), ([0.005, 0.01, 0.02], 1))
        self.assertEqual(clock.getDelayedCalls(), [])
        self.assertEqual([e["log_format"].format(**e) for e in events], [
            "not accepting connections (Too many open files): retrying after a backoff of "
            "5 ms doubled up to 1 s"])

    def test_a_process_out_of_descriptors(self):
        """
        platformd under a 40-descriptor limit, filled with idle connections: the one that
        comes next waits in the listen queue (Twisted's own handling closed it) and is
        served once others close; one line is logged, no traceback.
        """
        if shutil.which("prlimit") is None:
            raise SkipTest("prlimit (util-linux) is not installed")
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        server = Server(os.path.join(directory, "data"), free_port(),
                        write_tokens(directory, "token"), token="token",
                        wrapper=["prlimit", "--nofile=40", "--"],
                        twistd_args=["--logger=platformd.process.journald.observer"])
        server.start()
        self.addCleanup(server.stop)
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(40)]
        answer = []
        waiting = threading.Thread(
            target=lambda: answer.append(server.connection().request("GET", "/readyz")[0]))
        waiting.start()
        time.sleep(0.5)
        for connection in idle:
            connection.close()
        waiting.join(10)
        server.signal(signal.SIGTERM)
        server.wait()
        lines = server.output.splitlines()
        self.assertEqual(answer, [200])
        self.assertEqual(len([line for line in lines if "not accepting" in line]), 1, lines)
        self.assertFalse([line for line in lines if "Traceback" in line or "EMFILE" in line])
