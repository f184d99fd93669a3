"""
The cluster's own small PKI: a CA, the API server's serving certificate and an admin credential.

A fresh ``platformd --data-dir DATA`` must be reachable over TLS at once, with nothing to
prepare.  So, when the operator gave no certificates of their own, the server calls
``ensure_pki`` at start, which keeps this layout::

    DATA/pki/            0700
      ca.crt  ca.key     the cluster CA: CN platformd-ca, 10 years; trusts client certificates
      apiserver.crt/.key serving certificate: SANs localhost, 127.0.0.1, ::1 and the names and
                         addresses asked for; serverAuth; 1 year
      admin.crt/.key     CN admin, O system:masters; clientAuth; 1 year
    DATA/admin.kubeconfig  0600, the admin credential and CA embedded, ready for kubectl

Keys are ECDSA P-256 (cheap handshakes), key files are 0600, and every file is written to a
temporary name and renamed, so a crash leaves either the old file or the new one.

Later starts reuse what is there, so clients keep trusting the same CA and the admin keeps the
same credential.  Each piece is judged alone and only a piece that no longer fits is made again:

- ``ca.crt`` is the commit point of the CA (the key is written first).  If it is missing a new
  CA is made, which reissues everything below.  If it is present, ``ca.key`` must be present
  and match it, and the CA must not have expired: otherwise ``PKIError``, because silently
  making a new CA would lock out every client that trusts the old one.
- A leaf (apiserver, admin) is reissued, with a new key, when either file is missing, when it
  is not signed by the CA or does not match its key, when its subject or usage differ, when it
  lacks a requested SAN (extra SANs are kept), or when it has fewer than 30 days left.
- ``admin.kubeconfig`` is rewritten when its content differs from what the server URL, the CA
  and the admin credential call for.  It belongs to platformd: copy it to edit it.

A file that exists but cannot be read or parsed is an error, never a reason to regenerate:
``PKIError`` carries one line naming the file, for the command line to print.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import os
import tempfile
import time

import attrs
import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_NAME = "platformd-ca"
SERVING_NAME = "platformd-apiserver"
ADMIN_USER = "admin"
ADMIN_GROUP = "system:masters"
CLUSTER_NAME = "platformd"
CONTEXT_NAME = "admin@platformd"

CA_LIFETIME = datetime.timedelta(days=3650)
LEAF_LIFETIME = datetime.timedelta(days=365)
RENEW_BEFORE = datetime.timedelta(days=30)
# Certificates start a little in the past so that a client whose clock lags accepts them.
BACKDATE = datetime.timedelta(minutes=5)

_CERT_MODE = 0o644
_KEY_MODE = 0o600


@attrs.define(eq=False)
class PKIError(Exception):
    """A certificate or key file cannot be used; ``message`` is one line for the operator."""

    message: str

    def __str__(self):
        return self.message


@attrs.frozen
class PKIPaths:
    """Where the TLS listener and the admin find their files."""

    ca_cert: str
    serving_cert: str
    serving_key: str
    client_ca: str
    admin_kubeconfig: str


@attrs.frozen
class _KeyPair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


@attrs.frozen
class _LeafSpec:
    """What a leaf certificate must say; an existing one is kept while it says it."""

    subject: x509.Name
    usage: x509.ObjectIdentifier
    dns_names: tuple = ()
    ip_addresses: tuple = ()


def ensure_pki(data_dir, hostnames, ips, server_url, clock=time) -> PKIPaths:
    """
    Make or reuse the PKI under ``data_dir`` and return the paths of its files.

    ``hostnames`` and ``ips`` are added to the serving certificate's SANs (beside localhost,
    127.0.0.1 and ::1); ``server_url`` (``https://127.0.0.1:6443``) goes into the kubeconfig;
    ``clock.time()`` dates the certificates and judges their expiry.
    """
    for label, value in (("hostnames", hostnames), ("ips", ips)):
        if isinstance(value, (str, bytes)):
            raise TypeError(f"ensure_pki: {label} must be a list of strings, not {value!r}")
    serving = _serving_spec(hostnames, ips)
    now = datetime.datetime.fromtimestamp(int(clock.time()), datetime.timezone.utc)
    pki = os.path.join(data_dir, "pki")
    _make_private_dir(pki)
    ca_cert = os.path.join(pki, "ca.crt")
    serving_cert = os.path.join(pki, "apiserver.crt")
    serving_key = os.path.join(pki, "apiserver.key")
    kubeconfig = os.path.join(data_dir, "admin.kubeconfig")

    ca = _ensure_ca(ca_cert, os.path.join(pki, "ca.key"), now)
    _ensure_leaf(serving_cert, serving_key, ca, now, serving)
    admin = _ensure_leaf(
        os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"), ca, now,
        _LeafSpec(
            x509.Name([
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, ADMIN_GROUP),
                x509.NameAttribute(NameOID.COMMON_NAME, ADMIN_USER),
            ]),
            ExtendedKeyUsageOID.CLIENT_AUTH,
        ),
    )
    _ensure_kubeconfig(kubeconfig, server_url, ca, admin)
    return PKIPaths(ca_cert, serving_cert, serving_key, ca_cert, kubeconfig)


def read_certificates(path, what) -> list:
    """The PEM certificates in ``path``, first one first; ``what`` names the file in errors."""
    data = _read(path, what)
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise PKIError(f"{what} {path} holds no valid PEM certificate") from None


def read_private_key(path, what):
    """The unencrypted PEM private key in ``path``; ``what`` names the file in errors."""
    data = _read(path, what)
    try:
        return serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise PKIError(f"{what} {path} is encrypted; give an unencrypted key") from None
    except (ValueError, UnsupportedAlgorithm):
        raise PKIError(f"{what} {path} holds no valid PEM private key") from None


def _read(path, what) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise PKIError(f"cannot read {what} {path}: {e.strerror}") from None


def _serving_spec(hostnames, ips) -> _LeafSpec:
    try:
        addresses = [ipaddress.ip_address(ip) for ip in ips]
    except ValueError as e:
        raise PKIError(f"serving certificate: {e}") from None
    return _LeafSpec(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVING_NAME)]),
        ExtendedKeyUsageOID.SERVER_AUTH,
        tuple(dict.fromkeys(["localhost", *hostnames])),
        tuple(dict.fromkeys(
            [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"), *addresses]
        )),
    )


def _ensure_ca(cert_path, key_path, now) -> _KeyPair:
    if os.path.exists(cert_path):
        cert = read_certificates(cert_path, "CA certificate")[0]
        if not os.path.exists(key_path):
            raise PKIError(
                f"{key_path} is missing: restore it, or move {os.path.dirname(cert_path)} "
                "aside to make a new CA (clients will need the new admin.kubeconfig)"
            )
        key = read_private_key(key_path, "CA key")
        if cert.public_key() != key.public_key():
            raise PKIError(f"CA key {key_path} does not match CA certificate {cert_path}")
        if cert.not_valid_after_utc <= now:
            raise PKIError(
                f"CA certificate {cert_path} expired on {cert.not_valid_after_utc:%Y-%m-%d}; "
                f"move {os.path.dirname(cert_path)} aside to make a new CA"
            )
        return _KeyPair(cert, key)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    cert = (
        _builder(name, name, key.public_key(), now, CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(digital_signature=True, key_cert_sign=True, crl_sign=True),
                       critical=True)
        .sign(key, hashes.SHA256())
    )
    pair = _KeyPair(cert, key)
    _write_pair(cert_path, key_path, pair)
    return pair


def _ensure_leaf(cert_path, key_path, ca, now, spec) -> _KeyPair:
    if os.path.exists(cert_path) and os.path.exists(key_path):
        pair = _KeyPair(
            read_certificates(cert_path, "certificate")[0], read_private_key(key_path, "key")
        )
        if _fits(pair, ca, now, spec):
            return pair
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(spec.subject, ca.cert.subject, key.public_key(), now, LEAF_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([spec.usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    if spec.dns_names or spec.ip_addresses:
        try:
            names: list[x509.GeneralName] = [x509.DNSName(n) for n in spec.dns_names]
        except ValueError as e:
            raise PKIError(f"serving certificate: bad host name: {e}") from None
        names += [x509.IPAddress(a) for a in spec.ip_addresses]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    pair = _KeyPair(builder.sign(ca.key, hashes.SHA256()), key)
    _write_pair(cert_path, key_path, pair)
    return pair


def _fits(pair, ca, now, spec) -> bool:
    cert = pair.cert
    try:
        cert.verify_directly_issued_by(ca.cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    usage = _extension(cert, x509.ExtendedKeyUsage) or []
    sans = _extension(cert, x509.SubjectAlternativeName) or x509.SubjectAlternativeName([])
    return (
        cert.public_key() == pair.key.public_key()
        and cert.subject == spec.subject
        and list(usage) == [spec.usage]
        and set(spec.dns_names) <= set(sans.get_values_for_type(x509.DNSName))
        and set(spec.ip_addresses) <= set(sans.get_values_for_type(x509.IPAddress))
        and cert.not_valid_after_utc - now > RENEW_BEFORE
    )


def _extension(cert, kind):
    try:
        return cert.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None


def _builder(subject, issuer, public_key, now, lifetime) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + lifetime)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(digital_signature=False, key_cert_sign=False, crl_sign=False) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature, content_commitment=False,
        key_encipherment=False, data_encipherment=False, key_agreement=False,
        key_cert_sign=key_cert_sign, crl_sign=crl_sign,
        encipher_only=False, decipher_only=False,
    )


def _ensure_kubeconfig(path, server_url, ca, admin) -> None:
    wanted = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": CLUSTER_NAME,
            "cluster": {
                "server": server_url,
                "certificate-authority-data": _b64(_cert_pem(ca.cert)),
            },
        }],
        "users": [{
            "name": ADMIN_USER,
            "user": {
                "client-certificate-data": _b64(_cert_pem(admin.cert)),
                "client-key-data": _b64(_key_pem(admin.key)),
            },
        }],
        "contexts": [{
            "name": CONTEXT_NAME,
            "context": {"cluster": CLUSTER_NAME, "user": ADMIN_USER, "namespace": "default"},
        }],
        "current-context": CONTEXT_NAME,
        "preferences": {},
    }
    if os.path.exists(path):
        try:
            if yaml.safe_load(_read(path, "kubeconfig")) == wanted:
                return
        except yaml.YAMLError:
            pass  # ours to rewrite
    _write_atomic(path, yaml.safe_dump(wanted, sort_keys=False).encode(), _KEY_MODE)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _cert_pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_pair(cert_path, key_path, pair) -> None:
    # Key first: the certificate's arrival is what makes the pair count.
    _write_atomic(key_path, _key_pem(pair.key), _KEY_MODE)
    _write_atomic(cert_path, _cert_pem(pair.cert), _CERT_MODE)


def _make_private_dir(path) -> None:
    try:
        if not os.path.isdir(path):
            os.makedirs(path, mode=0o700, exist_ok=True)
            os.chmod(path, 0o700)
    except OSError as e:
        raise PKIError(f"cannot create {path}: {e.strerror}") from None


def _write_atomic(path, data: bytes, mode: int) -> None:
    directory, name = os.path.split(path)
    try:
        fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
    except OSError as e:
        raise PKIError(f"cannot write {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise PKIError(f"cannot write {path}: {e.strerror}") from None
