"""
The HTTPS listener's TLS settings, and who a client certificate says the client is.

``server_tls_options`` builds one OpenSSL context at start, so that a bad file stops the
server with a ``PKIError`` line instead of failing every handshake later.  It promises:

- TLS 1.2 or newer (TLS 1.2 limited to ECDHE with AES-GCM or ChaCha20);
- the whole chain of the certificate file sent, so intermediates reach the client;
- client certificates requested and verified against the client CA, but not required: a
  bearer-token client sends none and still connects, while a client presenting a certificate
  that does not verify is refused during the handshake;
- ALPN choosing ``http/1.1``, or with ``http2=True`` (``--enable-http2-serving``) ``h2``
  then ``http/1.1`` in the server's order of preference as Go's ``NextProtos: ["h2",
  "http/1.1"]``; a client offering neither gets no protocol and speaks HTTP/1.1; NPN,
  obsolete and no longer in pyOpenSSL, is not offered;
- session resumption (OpenSSL's defaults: tickets, and the session ID cache for clients without
  ticket support), so reconnecting clients (kubectl runs, watch reconnects) skip the full
  handshake.  Ticket keys live in the process: a restart ends all sessions.

Verification is OpenSSL's, done during the handshake: with ``VERIFY_PEER`` a certificate that
does not chain to the client CA aborts the handshake, so on an established connection a peer
certificate, if there is one, is a verified one.  ``peer_identity`` relies on that.  A resumed
session carries the certificate verified when it was first established.
"""

from __future__ import annotations

import attrs
from cryptography.x509.oid import NameOID
from OpenSSL import SSL
from zope.interface import implementer
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator

from platformd.files.pki import PKIError, read_certificates, read_private_key

HTTP_1_1 = b"http/1.1"
HTTP_2 = b"h2"
_TLS12_CIPHERS = b"ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL"
_SESSION_ID_CONTEXT = b"platformd"


@implementer(IOpenSSLServerConnectionCreator)
@attrs.frozen
class ServerTLS:
    """Makes each accepted connection's ``SSL.Connection`` from one finished context."""

    context: SSL.Context

    def serverConnectionForTLS(self, tlsProtocol) -> SSL.Connection:
        return SSL.Connection(self.context, None)


def server_tls_options(cert_file, key_file, client_ca_file=None,
                       http2: bool = False) -> ServerTLS:
    """
    The TLS settings for the HTTPS listener, for ``SSL4ServerEndpoint`` or ``listenSSL``.

    ``cert_file`` holds the serving certificate followed by any intermediates; ``key_file`` its
    key; ``client_ca_file`` the CA certificates that client certificates must chain to (no
    client certificates are asked for without it); ``http2`` whether ``h2`` is offered.
    """
    chain = read_certificates(cert_file, "serving certificate")
    key = read_private_key(key_file, "serving key")
    if chain[0].public_key() != key.public_key():
        raise PKIError(f"serving key {key_file} does not match serving certificate {cert_file}")

    context = SSL.Context(SSL.TLS_SERVER_METHOD)
    context.set_min_proto_version(SSL.TLS1_2_VERSION)
    context.set_options(SSL.OP_CIPHER_SERVER_PREFERENCE | SSL.OP_NO_RENEGOTIATION)
    context.use_certificate(chain[0])
    for intermediate in chain[1:]:
        context.add_extra_chain_cert(intermediate)
    context.use_privatekey(key)

    if client_ca_file is not None:
        # Each CA is named in the certificate request so a client holding several
        # certificates can pick the right one.
        for ca in read_certificates(client_ca_file, "client CA"):
            context.add_client_ca(ca)
        context.load_verify_locations(client_ca_file)
        context.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_CLIENT_ONCE)

    # OpenSSL's server session cache and tickets are on by default, but it refuses to
    # resume any session (and fails the handshake) without a session ID context once
    # client certificates are verified.
    context.set_session_id(_SESSION_ID_CONTEXT)
    context.set_alpn_select_callback(_alpn_choice((HTTP_2, HTTP_1_1) if http2 else (HTTP_1_1,)))
    context.set_cipher_list(_TLS12_CIPHERS)
    return ServerTLS(context)


def _alpn_choice(served: tuple):
    """The first of ``served`` the client offers (Go: the server's preference wins)."""
    def select(connection, offered):
        for protocol in served:
            if protocol in offered:
                return protocol
        return SSL.NO_OVERLAPPING_PROTOCOLS
    return select


def peer_identity(transport):
    """
    ``(user, groups)`` from the peer's certificate, or ``None`` without one.

    The user is the subject's CN and the groups its O values, as upstream.  ``transport`` is a
    Twisted TLS transport (``request.channel.transport``); any other transport, or a
    certificate without a CN, names nobody.
    """
    get_peer_certificate = getattr(transport, "getPeerCertificate", None)
    certificate = get_peer_certificate() if get_peer_certificate is not None else None
    if certificate is None:
        return None
    subject = certificate.to_cryptography().subject
    names = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names:
        return None
    groups = tuple(a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    return names[0].value, groups
