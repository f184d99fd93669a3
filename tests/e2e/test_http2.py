"""
HTTP/2 end to end (api/http2.py, tlscontext.py's ALPN): a real platformd on loopback and
real clients — the ``h2`` package driving a TLS socket by hand (so flow control can be
withheld on purpose), curl, and kubectl (Go's HTTP/2 client).  The client certificate
identifies the user over HTTP/2 as over HTTP/1.1; lists and watches stream; a stream
whose reader stops does not stall the others on the same connection.  (HTTP/2 is
offered with ``--enable-http2-serving``; by default, and with upstream's
``--disable-http2-serving``, only HTTP/1.1.)
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess

import h2.config
import h2.connection
import h2.events
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SkipTest, TestCase

from platformd.api import http2
from tests.e2e.harness import start_server

NAMESPACE = "/api/v1/namespaces/default/configmaps"


class Stream:
    def __init__(self):
        self.headers: dict = {}
        self.data = bytearray()
        self.ended = False
        self.reset = False


class H2Client:
    """
    A blocking HTTP/2 client on one TLS connection (run it in a thread).  Streams in
    ``stalled`` get no WINDOW_UPDATE: their window runs out as a slow reader's would,
    while the connection's window is still reopened for the others.
    """

    def __init__(self, port: int, pki_dir: str, identity: str | None = "admin"):
        context = ssl.create_default_context(cafile=os.path.join(pki_dir, "ca.crt"))
        if identity:
            context.load_cert_chain(os.path.join(pki_dir, f"{identity}.crt"),
                                    os.path.join(pki_dir, f"{identity}.key"))
        context.set_alpn_protocols(["h2", "http/1.1"])
        raw = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
        self.alpn = self.sock.selected_alpn_protocol()
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.flush()
        self.streams: dict = {}
        self.stalled: set = set()

    def flush(self) -> None:
        self.sock.sendall(self.conn.data_to_send())

    def open(self, method: str, path: str, body: bytes | None = None) -> int:
        stream_id = self.conn.get_next_available_stream_id()
        headers = [(":method", method), (":path", path), (":scheme", "https"),
                   (":authority", "127.0.0.1")]
        if body is not None:
            headers += [("content-type", "application/json"),
                        ("content-length", str(len(body)))]
        self.conn.send_headers(stream_id, headers, end_stream=body is None)
        self.streams[stream_id] = Stream()
        if body is not None:
            size = self.conn.max_outbound_frame_size
            for start in range(0, len(body), size):
                chunk = body[start:start + size]
                self.pump(lambda: self.conn.local_flow_control_window(stream_id) >= len(chunk))
                self.conn.send_data(stream_id, chunk, end_stream=start + size >= len(body))
        self.flush()
        return stream_id

    def pump(self, done) -> None:
        """Read frames until ``done()``."""
        while not done():
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            for event in self.conn.receive_data(data):
                stream = self.streams.get(getattr(event, "stream_id", None))
                if isinstance(event, h2.events.ResponseReceived):
                    stream.headers = dict(event.headers)
                elif isinstance(event, h2.events.DataReceived):
                    stream.data += event.data
                    size = event.flow_controlled_length
                    if event.stream_id in self.stalled:
                        self.conn.increment_flow_control_window(size)
                    else:
                        self.conn.acknowledge_received_data(size, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    stream.ended = True
                elif isinstance(event, h2.events.StreamReset):
                    stream.reset = True
            self.flush()

    def call(self, method: str, path: str, body=None) -> tuple:
        """One request, read to its end: (status, decoded JSON body)."""
        stream_id = self.open(method, path, json.dumps(body).encode()
                              if body is not None else None)
        stream = self.streams[stream_id]
        self.pump(lambda: stream.ended or stream.reset)
        return int(stream.headers[":status"]), json.loads(bytes(stream.data))

    def close(self) -> None:
        self.sock.close()


class HTTP2Tests(TestCase):
    timeout = 120

    @inlineCallbacks
    def setUp(self):
        self.server = yield start_server(self, "--enable-http2-serving")

    def client(self, identity="admin") -> H2Client:
        client = H2Client(self.server.port_number, self.server.pki_dir, identity)
        self.addCleanup(client.close)
        return client

    def test_alpn_prefers_h2_and_the_certificate_identifies(self):
        """h2 is chosen; the connection's client certificate authenticates every stream
        (a namespace list is forbidden to no one but the anonymous)."""
        def run():
            admin = self.client()
            anonymous = self.client(identity=None)
            return (admin.alpn, admin.call("GET", "/api/v1/namespaces")[0],
                    admin.call("GET", "/api/v1/namespaces/default")[0],
                    anonymous.call("GET", "/api/v1/namespaces")[0])
        return deferToThread(run).addCallback(self.assertEqual, ("h2", 200, 200, 401))

    @inlineCallbacks
    def test_slow_stream_does_not_stall_the_others(self):
        """
        Stream 1 watches ConfigMaps and stops reading: its window runs out and the watch
        is paused (then cut as too slow, that stream alone).  Meanwhile stream 3 watches and
        reads, and 40 creates of 8 KiB objects and a list go through on the same connection.
        """
        def run():
            client = self.client()
            slow = client.open("GET", NAMESPACE + "?watch=1")
            client.stalled.add(slow)
            reader = client.open("GET", NAMESPACE + "?watch=1")
            created = []
            for i in range(40):
                status, _ = client.call("POST", NAMESPACE, {
                    "metadata": {"name": f"cm-{i}"}, "data": {"blob": "x" * 8192}})
                created.append(status)
            watched = client.streams[reader]
            client.pump(lambda: watched.data.count(b"\n") >= 40)
            status, listed = client.call("GET", NAMESPACE)
            return (created, status, len(listed["items"]), watched.data.count(b'"ADDED"'),
                    len(client.streams[slow].data))
        created, status, items, events, stalled_bytes = yield deferToThread(run)
        self.assertEqual(created, [201] * 40)
        self.assertEqual((status, items, events), (200, 40, 40))
        # The stalled stream got at most its initial window (65,535 bytes).
        self.assertLessEqual(stalled_bytes, 65535)
        self.assertGreater(stalled_bytes, 0)

    @inlineCallbacks
    def test_large_list_streams(self):
        """A list larger than the flow-control windows arrives whole."""
        def run():
            client = self.client()
            for i in range(60):
                client.call("POST", NAMESPACE, {"metadata": {"name": f"big-{i}"},
                                                "data": {"blob": "y" * 10_000}})
            return client.call("GET", NAMESPACE)
        status, listed = yield deferToThread(run)
        self.assertEqual((status, len(listed["items"])), (200, 60))
        self.assertEqual(len(listed["items"][59]["data"]["blob"]), 10_000)

    @inlineCallbacks
    def test_curl_over_http2(self):
        """curl (libcurl with nghttp2) negotiates HTTP/2 and is served."""
        pki = self.server.pki_dir
        result = yield deferToThread(subprocess.run, [
            "curl", "-sS", "--http2", "--cacert", os.path.join(pki, "ca.crt"),
            "--cert", os.path.join(pki, "admin.crt"), "--key", os.path.join(pki, "admin.key"),
            "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
            f"https://127.0.0.1:{self.server.port_number}/api/v1/namespaces"],
            capture_output=True, text=True, timeout=30)
        self.assertEqual(result.stdout, "2 200", result.stderr)

    @inlineCallbacks
    def test_kubectl_over_http2(self):
        """kubectl (Go's client, which offers h2 first) is served, and its requests come
        over HTTP/2 (the server counts the streams it served)."""
        if shutil.which("kubectl") is None:
            raise SkipTest("kubectl is not installed")
        protocols = []
        original = http2.APIH2Connection._requestReceived

        def counting(connection, event):
            protocols.append(event.stream_id)
            return original(connection, event)

        self.patch(http2.APIH2Connection, "_requestReceived", counting)
        kubeconfig = os.path.join(self.server.data_dir, "admin.kubeconfig")
        result = yield deferToThread(subprocess.run, [
            "kubectl", "--kubeconfig", kubeconfig, "get", "namespace", "default",
            "-o", "jsonpath={.metadata.name}"], capture_output=True, text=True, timeout=60)
        self.assertEqual(result.stdout, "default", result.stderr)
        self.assertTrue(protocols)


class HTTP2OffTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def test_default_and_upstream_flag_serve_http_1_1(self):
        """By default, and with --disable-http2-serving over --enable-http2-serving, an
        h2-first client gets HTTP/1.1."""
        for args in ((), ("--enable-http2-serving", "--disable-http2-serving")):
            server = yield start_server(self, *args)
            pki = server.pki_dir
            result = yield deferToThread(subprocess.run, [
                "curl", "-sS", "--http2", "--cacert", os.path.join(pki, "ca.crt"),
                "--cert", os.path.join(pki, "admin.crt"),
                "--key", os.path.join(pki, "admin.key"), "-o", "/dev/null",
                "-w", "%{http_version} %{http_code}",
                f"https://127.0.0.1:{server.port_number}/api/v1/namespaces"],
                capture_output=True, text=True, timeout=30)
            self.assertEqual(result.stdout, "1.1 200", (args, result.stderr))
