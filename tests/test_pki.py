"""Tests for platformd.files.pki: the generated CA, certificates and admin kubeconfig."""

import base64
import datetime
import ipaddress
import os
import shutil
import stat
import subprocess
import sys

import attrs
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from twisted.trial.unittest import SynchronousTestCase

from platformd.files.pki import PKIError, ensure_pki, read_certificates, read_private_key

START = 1_800_000_000
SERVER = "https://127.0.0.1:6443"
KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or shutil.which(
    "kubectl"
)


@attrs.define
class FakeClock:
    """Stands in for the ``time`` module: ``time()`` is whatever the test says."""

    now: float = START

    def time(self):
        return self.now


def at(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


def certificate(path):
    return read_certificates(path, "test certificate")[0]


def extension(cert, kind):
    return cert.extensions.get_extension_for_class(kind)


class PKITestCase(SynchronousTestCase):
    def setUp(self):
        self.data = self.mktemp()
        self.clock = FakeClock()

    def ensure(self, hostnames=("node1.example",), ips=("10.0.0.5",), server=SERVER):
        return ensure_pki(self.data, list(hostnames), list(ips), server, clock=self.clock)

    def contents(self, paths):
        """The bytes of every file the PKI keeps, by file name."""
        files = [paths.ca_cert, paths.serving_cert, paths.serving_key, paths.admin_kubeconfig]
        pki = os.path.dirname(paths.ca_cert)
        files += [os.path.join(pki, n) for n in ("ca.key", "admin.crt", "admin.key")]
        result = {}
        for f in files:
            with open(f, "rb") as stream:
                result[os.path.basename(f)] = stream.read()
        return result


class GenerationTests(PKITestCase):
    def test_paths(self):
        """The record names DATA/pki's files and DATA/admin.kubeconfig; the CA trusts clients."""
        paths = self.ensure()
        pki = os.path.join(self.data, "pki")
        self.assertEqual(paths.ca_cert, os.path.join(pki, "ca.crt"))
        self.assertEqual(paths.client_ca, paths.ca_cert)
        self.assertEqual(paths.serving_cert, os.path.join(pki, "apiserver.crt"))
        self.assertEqual(paths.serving_key, os.path.join(pki, "apiserver.key"))
        self.assertEqual(paths.admin_kubeconfig, os.path.join(self.data, "admin.kubeconfig"))

    def test_modes(self):
        """The pki directory is 0700, keys and the kubeconfig 0600, certificates 0644."""
        self.ensure()
        pki = os.path.join(self.data, "pki")
        expected = {
            pki: 0o700,
            os.path.join(self.data, "admin.kubeconfig"): 0o600,
            **{os.path.join(pki, f"{n}.key"): 0o600 for n in ("ca", "apiserver", "admin")},
            **{os.path.join(pki, f"{n}.crt"): 0o644 for n in ("ca", "apiserver", "admin")},
        }
        self.assertEqual(
            {p: stat.S_IMODE(os.stat(p).st_mode) for p in expected}, expected
        )
        self.assertEqual(
            sorted(os.listdir(pki)),
            sorted(f"{n}.{e}" for n in ("ca", "apiserver", "admin") for e in ("crt", "key")),
        )

    def test_ca(self):
        """The CA is a self-signed P-256 certificate authority named platformd-ca for 10 years."""
        paths = self.ensure()
        ca = certificate(paths.ca_cert)
        self.assertEqual(ca.subject.rfc4514_string(), "CN=platformd-ca")
        ca.verify_directly_issued_by(ca)
        constraints = extension(ca, x509.BasicConstraints)
        self.assertTrue(constraints.critical)
        self.assertTrue(constraints.value.ca)
        usage = extension(ca, x509.KeyUsage).value
        self.assertTrue(usage.key_cert_sign)
        self.assertTrue(usage.crl_sign)
        self.assertEqual(ca.not_valid_before_utc, at(START - 300))
        self.assertEqual(ca.not_valid_after_utc, at(START) + datetime.timedelta(days=3650))
        self.assertIsInstance(ca.public_key().curve, ec.SECP256R1)

    def test_serving_certificate(self):
        """The serving certificate covers localhost, loopback and the names given; serverAuth."""
        paths = self.ensure(hostnames=["node1.example", "api.example"], ips=["10.0.0.5", "fd00::1"])
        cert = certificate(paths.serving_cert)
        cert.verify_directly_issued_by(certificate(paths.ca_cert))
        sans = extension(cert, x509.SubjectAlternativeName).value
        self.assertEqual(
            sans.get_values_for_type(x509.DNSName), ["localhost", "node1.example", "api.example"]
        )
        self.assertEqual(
            sans.get_values_for_type(x509.IPAddress),
            [ipaddress.ip_address(a) for a in ("127.0.0.1", "::1", "10.0.0.5", "fd00::1")],
        )
        self.assertEqual(
            list(extension(cert, x509.ExtendedKeyUsage).value), [ExtendedKeyUsageOID.SERVER_AUTH]
        )
        self.assertFalse(extension(cert, x509.BasicConstraints).value.ca)
        self.assertEqual(cert.not_valid_after_utc, at(START) + datetime.timedelta(days=365))
        key = read_private_key(paths.serving_key, "test key")
        self.assertIsInstance(key.curve, ec.SECP256R1)
        self.assertEqual(cert.public_key(), key.public_key())

    def test_admin_certificate(self):
        """The admin certificate says user admin in group system:masters, for clientAuth."""
        paths = self.ensure()
        cert = certificate(os.path.join(os.path.dirname(paths.ca_cert), "admin.crt"))
        cert.verify_directly_issued_by(certificate(paths.ca_cert))
        self.assertEqual(
            [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)], ["admin"]
        )
        self.assertEqual(
            [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)],
            ["system:masters"],
        )
        self.assertEqual(
            list(extension(cert, x509.ExtendedKeyUsage).value), [ExtendedKeyUsageOID.CLIENT_AUTH]
        )

    def test_kubeconfig(self):
        """The kubeconfig embeds the CA and admin credential under context admin@platformd."""
        paths = self.ensure()
        files = self.contents(paths)
        with open(paths.admin_kubeconfig) as f:
            config = yaml.safe_load(f)
        self.assertEqual(config["kind"], "Config")
        self.assertEqual(config["current-context"], "admin@platformd")
        [cluster] = config["clusters"]
        self.assertEqual(cluster["name"], "platformd")
        self.assertEqual(cluster["cluster"]["server"], SERVER)
        self.assertEqual(
            base64.b64decode(cluster["cluster"]["certificate-authority-data"]), files["ca.crt"]
        )
        [user] = config["users"]
        self.assertEqual(user["name"], "admin")
        self.assertEqual(base64.b64decode(user["user"]["client-certificate-data"]),
                         files["admin.crt"])
        self.assertEqual(base64.b64decode(user["user"]["client-key-data"]), files["admin.key"])
        self.assertEqual(
            config["contexts"],
            [{"name": "admin@platformd",
              "context": {"cluster": "platformd", "user": "admin", "namespace": "default"}}],
        )

    def test_kubectl_reads_kubeconfig(self):
        """kubectl accepts the kubeconfig and sees its context, server and namespace."""
        if KUBECTL is None:
            raise self.skipTest("kubectl is not installed")
        paths = self.ensure()

        def kubectl(*args):
            return subprocess.run(
                [KUBECTL, "--kubeconfig", paths.admin_kubeconfig, "config", *args],
                check=True, capture_output=True, text=True, timeout=30,
                env={"HOME": self.data, "PATH": os.environ.get("PATH", "")},
            ).stdout

        self.assertEqual(kubectl("current-context").strip(), "admin@platformd")
        self.assertEqual(
            kubectl("view", "--minify", "-o",
                    "jsonpath={.clusters[0].cluster.server} {.contexts[0].context.namespace}"),
            f"{SERVER} default",
        )


class ReuseTests(PKITestCase):
    def test_second_start_changes_nothing(self):
        """A second start with the same arguments leaves every file's bytes as they were."""
        before = self.contents(self.ensure())
        self.clock.now += 86400
        self.assertEqual(self.contents(self.ensure()), before)

    def test_new_san_reissues_only_the_serving_certificate(self):
        """A host name the serving certificate lacks gets it reissued; nothing else changes."""
        before = self.contents(self.ensure())
        paths = self.ensure(hostnames=["node1.example", "new.example"])
        after = self.contents(paths)
        changed = {name for name in before if before[name] != after[name]}
        self.assertEqual(changed, {"apiserver.crt", "apiserver.key"})
        sans = extension(certificate(paths.serving_cert), x509.SubjectAlternativeName).value
        self.assertIn("new.example", sans.get_values_for_type(x509.DNSName))

    def test_fewer_sans_keep_the_certificate(self):
        """A start asking for fewer names keeps the certificate that has more."""
        before = self.contents(self.ensure())
        self.assertEqual(self.contents(self.ensure(hostnames=[], ips=[])), before)

    def test_new_server_url_rewrites_only_the_kubeconfig(self):
        """A different server URL rewrites the kubeconfig and keeps every certificate."""
        before = self.contents(self.ensure())
        paths = self.ensure(server="https://10.0.0.5:6443")
        after = self.contents(paths)
        changed = {name for name in before if before[name] != after[name]}
        self.assertEqual(changed, {"admin.kubeconfig"})
        with open(paths.admin_kubeconfig) as f:
            self.assertEqual(
                yaml.safe_load(f)["clusters"][0]["cluster"]["server"], "https://10.0.0.5:6443"
            )

    def test_leaves_renewed_near_expiry(self):
        """With under 30 days left, the leaf certificates are reissued under the same CA."""
        before = self.contents(self.ensure())
        self.clock.now += 334 * 86400
        self.assertEqual(self.contents(self.ensure()), before)
        self.clock.now += 2 * 86400
        paths = self.ensure()
        after = self.contents(paths)
        changed = {name for name in before if before[name] != after[name]}
        self.assertEqual(
            changed,
            {"apiserver.crt", "apiserver.key", "admin.crt", "admin.key", "admin.kubeconfig"},
        )
        self.assertEqual(
            certificate(paths.serving_cert).not_valid_after_utc,
            at(self.clock.now) + datetime.timedelta(days=365),
        )

    def test_lost_ca_certificate_makes_a_new_ca(self):
        """Without ca.crt a new CA is made and everything is reissued under it."""
        paths = self.ensure()
        before = self.contents(paths)
        os.remove(paths.ca_cert)
        after = self.contents(self.ensure())
        self.assertEqual({n for n in before if before[n] == after[n]}, set())
        certificate(paths.serving_cert).verify_directly_issued_by(certificate(paths.ca_cert))

    def test_replaced_leaf_key_reissues_the_leaf(self):
        """A serving key that does not match its certificate gets the pair reissued."""
        paths = self.ensure()
        pki = os.path.dirname(paths.ca_cert)
        shutil.copy(os.path.join(pki, "admin.key"), paths.serving_key)
        self.ensure()
        self.assertEqual(
            certificate(paths.serving_cert).public_key(),
            read_private_key(paths.serving_key, "test key").public_key(),
        )


class ErrorTests(PKITestCase):
    def assertPKIError(self, *fragments, **kwargs):
        error = self.assertRaises(PKIError, self.ensure, **kwargs)
        message = str(error)
        self.assertNotIn("\n", message)
        for fragment in fragments:
            self.assertIn(fragment, message)

    def test_corrupt_certificate(self):
        """A certificate file that is not PEM is an error naming the file, not a regeneration."""
        paths = self.ensure()
        with open(paths.serving_cert, "wb") as f:
            f.write(b"not a certificate\n")
        self.assertPKIError(paths.serving_cert, "no valid PEM certificate")

    def test_corrupt_key(self):
        """A key file that is not PEM is an error naming the file."""
        paths = self.ensure()
        with open(paths.serving_key, "wb") as f:
            f.write(b"-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
        self.assertPKIError(paths.serving_key, "no valid PEM private key")

    def test_missing_ca_key(self):
        """A CA certificate without its key is an error: a new CA would lock out clients."""
        paths = self.ensure()
        ca_key = os.path.join(os.path.dirname(paths.ca_cert), "ca.key")
        os.remove(ca_key)
        self.assertPKIError(ca_key, "is missing")

    def test_expired_ca(self):
        """An expired CA is an error that says how to make a new one."""
        paths = self.ensure()
        self.clock.now += 3651 * 86400
        self.assertPKIError(paths.ca_cert, "expired", "aside")

    def test_unwritable_data_dir(self):
        """A data directory that cannot be made is an error naming the path."""
        with open(self.data, "w"):
            pass
        self.assertPKIError(os.path.join(self.data, "pki"), "cannot create")

    def test_bad_ip(self):
        """An address that is not an IP address is an error quoting it."""
        self.assertPKIError("not.an.ip", ips=["not.an.ip"])

    def test_string_instead_of_list(self):
        """A single string for hostnames is refused, instead of becoming one SAN per letter."""
        self.assertRaises(TypeError, ensure_pki, self.data, "node1", [], SERVER)
