"""
Tests for platformd.edge.tlscontext, end to end over loopback TLS with the real reactor.

The server is a twisted.web Site behind ``server_tls_options``, exactly as the HTTPS listener
stacks it; the clients are the stdlib ``ssl`` module (in a thread) and the real kubectl.
"""

import datetime
import http.client
import ipaddress
import json
import os
import socket
import ssl
import warnings

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from twisted.internet import reactor
from twisted.internet.defer import Deferred, succeed
from twisted.internet.testing import StringTransport
from twisted.internet.threads import deferToThread
from twisted.internet.utils import getProcessOutputAndValue
from twisted.protocols.policies import WrappingFactory
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.trial.unittest import SynchronousTestCase, TestCase
from twisted.web.resource import Resource
from twisted.web.server import Site

from platformd.files.pki import PKIError, ensure_pki
from platformd.edge.tlscontext import peer_identity, server_tls_options
from platformd.edge.tlstransport import connection_transport
from tests.test_pki import KUBECTL


class WhoAmI(Resource):
    """Answers every GET with the JSON of what ``peer_identity`` says about the connection."""

    isLeaf = True

    def __init__(self):
        super().__init__()
        self.requests = 0

    def render_GET(self, request):
        self.requests += 1
        request.setHeader(b"content-type", b"application/json")
        return json.dumps(peer_identity(connection_transport(request.channel))).encode()


class Connections(WrappingFactory):
    """Knows the server's open connections, so that a test ends only once all have closed."""

    def __init__(self, wrappedFactory):
        super().__init__(wrappedFactory)
        self._waiting = []

    def unregisterProtocol(self, protocol):
        super().unregisterProtocol(protocol)
        if not self.protocols:
            waiting, self._waiting = self._waiting, []
            for d in waiting:
                d.callback(None)

    def closeAll(self):
        if not self.protocols:
            return succeed(None)
        d = Deferred()
        self._waiting.append(d)
        for protocol in list(self.protocols):
            protocol.transport.loseConnection()
        return d


@attrs.frozen
class Reply:
    """What a client saw of one request."""

    status: int
    identity: object
    alpn: str
    resumed: bool
    session: ssl.SSLSession


def get(port, context, session=None):
    """One ``GET /whoami`` over a new TLS connection (blocking: run it in a thread)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1", session=session) as tls:
            tls.sendall(b"GET /whoami HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            response = http.client.HTTPResponse(tls)
            response.begin()
            body = response.read()
            return Reply(
                response.status, json.loads(body), tls.selected_alpn_protocol(),
                tls.session_reused, tls.session,
            )


def sign(subject_cn, public_key, issuer, ca=False, sans=()):
    """A certificate for ``public_key`` signed by ``issuer`` (a (name, key) pair), for a day."""
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]))
        .issuer_name(issuer[0])
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=ca, crl_sign=ca,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer[1].public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(issuer[1], hashes.SHA256())


def pem(*objects):
    return b"".join(
        o.public_bytes(serialization.Encoding.PEM) if isinstance(o, x509.Certificate)
        else o.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
        for o in objects
    )


class LoopbackTLSTests(TestCase):
    timeout = 30

    def setUp(self):
        self.data = self.mktemp()
        self.paths = ensure_pki(self.data, [], [], "https://127.0.0.1:6443")
        self.admin_cert = os.path.join(self.data, "pki", "admin.crt")
        self.admin_key = os.path.join(self.data, "pki", "admin.key")

    def serve(self, options=None):
        """Listen on a loopback port with ``options`` (the generated PKI's by default)."""
        if options is None:
            options = server_tls_options(
                self.paths.serving_cert, self.paths.serving_key, self.paths.client_ca
            )
        self.resource = WhoAmI()
        connections = Connections(TLSMemoryBIOFactory(options, False, Site(self.resource)))
        port = reactor.listenTCP(0, connections, interface="127.0.0.1")
        self.addCleanup(connections.closeAll)
        self.addCleanup(port.stopListening)
        return port.getHost().port

    def client(self, cert=None, key=None, ca=None, alpn=("http/1.1",)):
        """A strict stdlib client context trusting ``ca`` (the generated CA by default)."""
        context = ssl.create_default_context(cafile=ca or self.paths.ca_cert)
        context.verify_flags |= ssl.VERIFY_X509_STRICT
        if cert is not None:
            context.load_cert_chain(cert, key)
        context.set_alpn_protocols(list(alpn))
        return context

    async def test_admin_certificate(self):
        """A client presenting the admin certificate is seen as admin in system:masters."""
        port = self.serve()
        reply = await deferToThread(get, port, self.client(self.admin_cert, self.admin_key))
        self.assertEqual((reply.status, reply.identity), (200, ["admin", ["system:masters"]]))

    async def test_no_certificate(self):
        """A client without a certificate connects, and the server sees no identity."""
        port = self.serve()
        reply = await deferToThread(get, port, self.client())
        self.assertEqual((reply.status, reply.identity), (200, None))

    async def test_foreign_certificate_refused(self):
        """A client certificate from another CA is refused before any request is served."""
        other = os.path.join(self.mktemp(), "other")
        ensure_pki(other, [], [], "https://127.0.0.1:6443")
        port = self.serve()
        context = self.client(
            os.path.join(other, "pki", "admin.crt"), os.path.join(other, "pki", "admin.key")
        )
        error = await self.assertFailure(deferToThread(get, port, context), ssl.SSLError)
        self.assertEqual(error.reason, "TLSV1_ALERT_UNKNOWN_CA")
        self.assertEqual(self.resource.requests, 0)

    async def alpn(self, port, offered):
        """The protocol ALPN picks when ``offered`` (a handshake only)."""
        def handshake():
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                with self.client(alpn=offered).wrap_socket(
                        raw, server_hostname="127.0.0.1") as tls:
                    return tls.selected_alpn_protocol()
        return await deferToThread(handshake)

    async def test_alpn_prefers_h2(self):
        """With HTTP/2, as Go's NextProtos ["h2", "http/1.1"]: the server's order wins; a
        client offering neither gets no protocol (and speaks HTTP/1.1)."""
        port = self.serve(server_tls_options(self.paths.serving_cert, self.paths.serving_key,
                                             self.paths.client_ca, http2=True))
        self.assertEqual(await self.alpn(port, ["http/1.1", "h2"]), "h2")
        self.assertEqual(await self.alpn(port, ["http/1.1"]), "http/1.1")
        self.assertEqual(await self.alpn(port, ["spdy/3"]), None)
        reply = await deferToThread(get, port, self.client(alpn=["http/1.1"]))
        self.assertEqual((reply.status, reply.alpn), (200, "http/1.1"))

    async def test_alpn_without_http2(self):
        """By default (HTTP/2 not enabled) h2 is never chosen."""
        port = self.serve()
        self.assertEqual(await self.alpn(port, ["h2", "http/1.1"]), "http/1.1")
        self.assertEqual(await self.alpn(port, ["h2"]), None)

    async def test_tls_1_1_refused(self):
        """A client that can speak at most TLS 1.1 is refused with a protocol version alert."""
        port = self.serve()
        context = self.client()
        context.set_ciphers("DEFAULT:@SECLEVEL=0")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the versions we set
            context.minimum_version = ssl.TLSVersion.TLSv1
            context.maximum_version = ssl.TLSVersion.TLSv1_1
        error = await self.assertFailure(deferToThread(get, port, context), ssl.SSLError)
        self.assertEqual(error.reason, "TLSV1_ALERT_PROTOCOL_VERSION")

    async def test_tls_1_2(self):
        """A TLS 1.2 client presenting the admin certificate is served."""
        port = self.serve()
        context = self.client(self.admin_cert, self.admin_key)
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        reply = await deferToThread(get, port, context)
        self.assertEqual(reply.identity, ["admin", ["system:masters"]])

    async def test_session_resumption(self):
        """A reconnecting client resumes its session, and its certificate still identifies it."""
        port = self.serve()
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            context = self.client(self.admin_cert, self.admin_key)
            context.maximum_version = version
            first = await deferToThread(get, port, context)
            second = await deferToThread(get, port, context, first.session)
            self.assertEqual((version, first.resumed, second.resumed), (version, False, True))
            self.assertEqual(second.identity, ["admin", ["system:masters"]])

    async def test_intermediate_chain(self):
        """The file's intermediates are sent: a client trusting only the root connects."""
        root_key, middle_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in "123")
        root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "root")])
        root = sign("root", root_key.public_key(), (root_name, root_key), ca=True)
        middle = sign("middle", middle_key.public_key(), (root_name, root_key), ca=True)
        leaf = sign("leaf", leaf_key.public_key(), (middle.subject, middle_key),
                    sans=[x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        files = {"root.crt": pem(root), "chain.crt": pem(leaf, middle), "leaf.key": pem(leaf_key)}
        directory = self.mktemp()
        os.makedirs(directory)
        for name, data in files.items():
            with open(os.path.join(directory, name), "wb") as f:
                f.write(data)
        port = self.serve(server_tls_options(
            os.path.join(directory, "chain.crt"), os.path.join(directory, "leaf.key")
        ))
        reply = await deferToThread(get, port, self.client(ca=os.path.join(directory, "root.crt")))
        self.assertEqual(reply.status, 200)

    async def test_kubectl(self):
        """kubectl, with the generated kubeconfig, reaches the server (over HTTP/2, which Go
        offers first) and is seen as admin: the certificate is read off the connection."""
        if KUBECTL is None:
            raise self.skipTest("kubectl is not installed")
        port = self.serve(server_tls_options(self.paths.serving_cert, self.paths.serving_key,
                                             self.paths.client_ca, http2=True))
        paths = ensure_pki(self.data, [], [], f"https://127.0.0.1:{port}")
        out, err, code = await getProcessOutputAndValue(
            KUBECTL,
            ["--kubeconfig", paths.admin_kubeconfig, "get", "--raw", "/whoami"],
            env={"HOME": self.data},
        )
        self.assertEqual((code, err), (0, b""))
        self.assertEqual(json.loads(out), ["admin", ["system:masters"]])


class OptionErrorTests(SynchronousTestCase):
    def setUp(self):
        self.paths = ensure_pki(self.mktemp(), [], [], "https://127.0.0.1:6443")

    def assertPKIError(self, fragment, *files):
        error = self.assertRaises(PKIError, server_tls_options, *files)
        self.assertIn(fragment, str(error))
        self.assertNotIn("\n", str(error))

    def test_missing_certificate(self):
        """A certificate file that cannot be read is a PKIError naming it."""
        missing = self.paths.serving_cert + ".missing"
        self.assertPKIError(f"cannot read serving certificate {missing}",
                            missing, self.paths.serving_key)

    def test_mismatched_key(self):
        """A key that does not belong to the certificate is a PKIError saying so."""
        other_key = os.path.join(os.path.dirname(self.paths.ca_cert), "admin.key")
        self.assertPKIError("does not match", self.paths.serving_cert, other_key)

    def test_bad_client_ca(self):
        """A client CA file without a certificate is a PKIError naming it."""
        self.assertPKIError(f"client CA {self.paths.serving_key} holds no valid PEM",
                            self.paths.serving_cert, self.paths.serving_key,
                            self.paths.serving_key)


class PeerIdentityTests(SynchronousTestCase):
    def test_plain_transport(self):
        """A transport without TLS names nobody."""
        self.assertIsNone(peer_identity(StringTransport()))
