"""
A client certificate and its key checked as Go's ``tls.X509KeyPair`` checks them, in its
words, so that a client-go reader of a kubeconfig (the admission webhooks' credentials)
fails as upstream does: no ``CERTIFICATE`` block (``tls: failed to find any PEM data in
certificate input``, or the hint that the inputs were switched), no ``PRIVATE KEY``
block, a key that does not parse or does not match the certificate.
"""

from __future__ import annotations

import re

from cryptography import x509
from cryptography.hazmat.primitives.serialization import (
    Encoding, PublicFormat, load_pem_private_key)
_BLOCK = re.compile(rb"-----BEGIN ([^\r\n-]*)-----\r?\n.*?-----END \1-----", re.S)


class KeyPairError(ValueError):
    """``str`` is Go's error."""


def x509_key_pair(cert_pem: bytes, key_pem: bytes) -> bytes:
    """The leaf certificate's block and the key's, one PEM ready for Twisted's
    ``PrivateCertificate.loadPEM``; ``KeyPairError`` as Go refuses the pair."""
    cert_blocks = list(_blocks(cert_pem))
    certificates = [block for kind, block in cert_blocks if kind == b"CERTIFICATE"]
    if not certificates:
        skipped = [kind.decode("ascii", "replace") for kind, _ in cert_blocks]
        if not skipped:
            raise KeyPairError("tls: failed to find any PEM data in certificate input")
        if len(skipped) == 1 and skipped[0].endswith("PRIVATE KEY"):
            raise KeyPairError("tls: failed to find certificate PEM data in certificate "
                               "input, but did find a private key; PEM inputs may have "
                               "been switched")
        raise KeyPairError('tls: failed to find "CERTIFICATE" PEM block in certificate '
                           "input after skipping PEM blocks of the following types: "
                           f"[{' '.join(skipped)}]")
    key_block, skipped = None, []
    for kind, block in _blocks(key_pem):
        if kind == b"PRIVATE KEY" or kind.endswith(b" PRIVATE KEY"):
            key_block = block
            break
        skipped.append(kind.decode("ascii", "replace"))
    if key_block is None:
        if not skipped:
            raise KeyPairError("tls: failed to find any PEM data in key input")
        if skipped == ["CERTIFICATE"]:
            raise KeyPairError("tls: found a certificate rather than a key in the PEM for "
                               "the private key")
        raise KeyPairError('tls: failed to find PEM block with type ending in "PRIVATE KEY" '
                           "in key input after skipping PEM blocks of the following types: "
                           f"[{' '.join(skipped)}]")
    try:
        leaf = x509.load_pem_x509_certificate(certificates[0])
    except ValueError:
        raise KeyPairError("x509: malformed certificate") from None
    try:
        key = load_pem_private_key(key_block, password=None)
    except (ValueError, TypeError):
        raise KeyPairError("tls: failed to parse private key") from None
    public = (Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    if key.public_key().public_bytes(*public) != leaf.public_key().public_bytes(*public):
        raise KeyPairError("tls: private key does not match public key")
    return certificates[0] + b"\n" + key_block + b"\n"


def _blocks(pem: bytes):
    """(type, the whole block) of each PEM block, in order."""
    for match in _BLOCK.finditer(pem):
        yield match.group(1), match.group(0)
