"""
Certificates for a test etcd cluster served over TLS (``Cluster.start(tls=True)``): a CA,
one serving certificate per member naming that member's own address only (and
``localhost`` for the first), and a client certificate, as production clusters have.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@attrs.frozen
class ClientFiles:
    """Where the CA, the members' and the client's certificates and keys were written."""

    directory: str

    @property
    def ca(self) -> str:
        return os.path.join(self.directory, "ca.crt")

    @property
    def cert(self) -> str:
        return os.path.join(self.directory, "client.crt")

    @property
    def key(self) -> str:
        return os.path.join(self.directory, "client.key")

    def member_cert(self, n: int) -> str:
        return os.path.join(self.directory, f"m{n}.crt")

    def member_key(self, n: int) -> str:
        return os.path.join(self.directory, f"m{n}.key")

    def context(self) -> ssl.SSLContext:
        """A client context trusting the CA and presenting the client certificate."""
        context = ssl.create_default_context(cafile=self.ca)
        context.load_cert_chain(self.cert, self.key)
        return context


def issue(base: str, hosts: list) -> ClientFiles:
    """Write the certificates for members listening on ``hosts`` under ``base``."""
    files = ClientFiles(os.path.join(base, "pki"))
    os.makedirs(files.directory)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "etcd-ca")])
    ca = (_builder(ca_name, ca_name, ca_key.public_key(), now)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    _write(files.ca, ca.public_bytes(serialization.Encoding.PEM))

    def leaf(cert_path: str, key_path: str, name: str, names: list, usages: list):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (_builder(subject, ca_name, key.public_key(), now)
                .add_extension(x509.SubjectAlternativeName(names), critical=False)
                .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                .sign(ca_key, hashes.SHA256()))
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        _write(key_path, key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))

    for n, host in enumerate(hosts):
        names: list = [x509.IPAddress(ipaddress.ip_address(host))]
        if n == 0:
            names.append(x509.DNSName("localhost"))
        leaf(files.member_cert(n), files.member_key(n), f"m{n}", names,
             [ExtendedKeyUsageOID.SERVER_AUTH])
    leaf(files.cert, files.key, "platformd", [x509.DNSName("platformd")],
         [ExtendedKeyUsageOID.CLIENT_AUTH])
    return files


def _builder(subject, issuer, public_key, now) -> x509.CertificateBuilder:
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1)))


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
