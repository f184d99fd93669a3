"""
What is stored and how: files under ``--data-dir`` and the audit log are the service
user's alone (item 9, ``docs/security.md`` "Files"); a hung KMS plugin delays only the
writes it encrypts (item 13, ``docs/encryption.md``).
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import stat
from contextlib import closing
from unittest import mock

from twisted.internet import reactor
from twisted.internet.defer import gatherResults, inlineCallbacks
from twisted.internet.task import deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase

from platformd.audit import rotation
from platformd.protos.platform.kms.apis.v2 import api_pb2_grpc as v2_grpc
from tests.e2e.harness import Client, start_server
from tests.encryption.helpers import document, write
from tests.encryption.kmsv1plugin import serve
from tests.encryption.test_kmsv1_e2e import kms
from tests.encryption.test_kms import Plugin as V2Plugin
from tests.etcd.cluster import Cluster
from tests.test_cli import twistd

NAMESPACES = "/api/v1/namespaces"
SECRETS = f"{NAMESPACES}/default/secrets"

#: Every path under a fresh --data-dir once a Secret is written, and its mode: data and
#: keys 0600, directories 0700; certificates are public (0644).
FRESH = {
    ".": 0o700,
    "admin.kubeconfig": 0o600,
    "platformd.db": 0o600,
    "platformd.db-shm": 0o600,
    "platformd.db-wal": 0o600,
    "pki": 0o700,
    "pki/admin.crt": 0o644,
    "pki/admin.key": 0o600,
    "pki/apiserver.crt": 0o644,
    "pki/apiserver.key": 0o600,
    "pki/ca.crt": 0o644,
    "pki/ca.key": 0o600,
    "pki/service-account.key": 0o600,
}


def modes(top: str) -> dict:
    """Every path under ``top`` (relative) and its permission bits."""
    found = {".": stat.S_IMODE(os.stat(top).st_mode)}
    for directory, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, top)] = stat.S_IMODE(os.stat(path).st_mode)
    return found


class DataDirectoryTests(TestCase):
    timeout = 60

    def setUp(self):
        # The test runner's umask (022) is what a careless service manager gives: the
        # modes below must not depend on it.
        self.addCleanup(os.umask, os.umask(0o022))

    @inlineCallbacks
    def write_secret(self, server, name: str):
        client = Client(self, server.pki_dir, server.port_number)
        r = yield client.post(SECRETS, {"metadata": {"name": name}, "data": {"k": "aGk="}})
        self.assertEqual(r.code, 201, r.body)
        return client

    @inlineCallbacks
    def test_fresh_data_dir(self):
        """A new data directory is 0700 and every file holding data in it 0600."""
        server = yield start_server(self)
        yield self.write_secret(server, "s")
        self.assertEqual(modes(server.data_dir), FRESH)

    @inlineCallbacks
    def test_existing_files_narrowed(self):
        """
        A data directory left 0755 and a database, WAL and shared-memory file left 0644
        (an older release, a restore) are narrowed at start, and serve as before.
        """
        data = os.path.abspath(self.mktemp())
        first = yield start_server(self, data_dir=data)
        yield self.write_secret(first, "kept")
        yield first.stopService()
        database = os.path.join(data, "platformd.db")
        # A connection held open keeps the WAL and shared-memory files in place.
        with closing(sqlite3.connect(database)) as held:
            held.execute("SELECT count(*) FROM revisions").fetchone()
            for name in ("platformd.db", "platformd.db-wal", "platformd.db-shm"):
                os.chmod(os.path.join(data, name), 0o644)
            os.chmod(data, 0o755)
            second = yield start_server(self, data_dir=data)
            found = modes(data)
        self.assertEqual({path: found[path] for path in (".", "platformd.db",
                                                           "platformd.db-wal",
                                                           "platformd.db-shm")},
                         {".": 0o700, "platformd.db": 0o600, "platformd.db-wal": 0o600,
                          "platformd.db-shm": 0o600})
        client = Client(self, second.pki_dir, second.port_number)
        r = yield client.get(f"{SECRETS}/kept")
        self.assertEqual(r.code, 200, r.body)


class ForeignDataDirectoryTests(SynchronousTestCase):
    def test_refused(self):
        """
        A data directory open to others that is another user's is not narrowed (not
        even as root: ``--data-dir /var/lib`` by mistake) but refused: one line,
        exit status 1, nothing written in it.
        """
        if os.geteuid() != 0:
            raise self.skipTest("making a directory another user's needs root")
        data = os.path.abspath(self.mktemp())
        os.makedirs(data)
        os.chmod(data, 0o755)
        os.chown(data, 65534, 65534)
        result = twistd("--data-dir", data, "--secure-port", "0")
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        self.assertEqual((result.returncode, lines), (1, [
            f"platformd: --data-dir {data} is mode 0755, open to other users, and owned by "
            "uid 65534, not this user (uid 0): make it 0700 or use a directory of this "
            "user's"]))
        self.assertEqual((os.listdir(data), stat.S_IMODE(os.stat(data).st_mode)), ([], 0o755))


class AuditLogFileTests(SynchronousTestCase):
    def test_rotated_and_compressed_files_private(self):
        """
        The audit log's directory is 0700 and the log 0600 (upstream's
        ``ensureLogFile``, lumberjack's), its backups keep that mode, and a compressed
        copy has it from its creation, not once written.
        """
        self.addCleanup(os.umask, os.umask(0o022))
        directory = os.path.abspath(self.mktemp())
        path = os.path.join(directory, "audit.log")
        rotation.ensure(path)  # at start (audit/fromflags.py)
        log = rotation.RotatingFile(path, max_size=1, compress=True)
        self.addCleanup(log.close)
        seen = []
        copy = shutil.copyfileobj

        def copying(source, target):
            seen.append(stat.S_IMODE(os.stat(source.name + ".gz").st_mode))
            copy(source, target)

        line = b"x" * 700_000 + b"\n"
        with mock.patch("shutil.copyfileobj", copying):
            log.write_lines([line, line])
        found = modes(directory)
        [backup] = [name for name in found if name.endswith(".gz")]
        self.assertEqual((seen, found), ([0o600], {".": 0o700, "audit.log": 0o600,
                                                   backup: 0o600}))
        with gzip.open(os.path.join(directory, backup)) as f:
            self.assertEqual(f.read(), line)


class HungKMSPluginTests(TestCase):
    """
    Item 13: a KMS v2 plugin that hangs delays only the writes it encrypts.  Ten Secret
    writes (encrypted by the plugin) are sent, then a ConfigMap write (not encrypted):
    the ConfigMap is answered at once, the Secrets once the plugin's timeout has passed
    (500, the plugin's error), all ten together.
    """

    timeout = 60
    #: The provider's timeout, and how long the plugin hangs unless released.
    KMS_TIMEOUT = 1.5
    HANG = 30.0

    @inlineCallbacks
    def server(self, *storage_args):
        plugin = V2Plugin()
        plugin.delay = self.HANG
        self.addCleanup(plugin.released.set)
        endpoint = serve(self, plugin, v2_grpc.add_KeyManagementServiceServicer_to_server)
        data_dir = os.path.abspath(self.mktemp())
        os.makedirs(data_dir)
        config = write(os.path.join(data_dir, "enc.json"), document((["secrets"], [
            kms("v2", "p", endpoint, timeout=f"{self.KMS_TIMEOUT}s")])))
        server = yield start_server(self, "--encryption-provider-config", config,
                                    *storage_args, data_dir=data_dir)
        return Client(self, server.pki_dir, server.port_number)

    @inlineCallbacks
    def check_hang(self, client):
        started = reactor.seconds()
        secrets = [client.post(SECRETS, {"metadata": {"name": f"s{n}"},
                                         "stringData": {"k": "v"}}) for n in range(10)]
        yield deferLater(reactor, 0.2, lambda: None)  # the Secrets are waiting on the plugin
        r = yield client.post(f"{NAMESPACES}/default/configmaps",
                              {"metadata": {"name": "c"}, "data": {"k": "v"}})
        configmap = reactor.seconds() - started - 0.2
        self.assertEqual(r.code, 201, r.body)
        self.assertLess(configmap, 0.5)
        self.assertFalse(any(secret.called for secret in secrets))
        answers = yield gatherResults(secrets)
        secret = reactor.seconds() - started
        self.assertEqual({(a.code, a.json()["message"]) for a in answers}, {(
            500, "Internal error occurred: failed to perform status section of the healthz "
            "check for KMS Provider p, error: rpc error: code = DeadlineExceeded desc = "
            "Deadline Exceeded")})
        self.assertLess(secret, self.KMS_TIMEOUT + 1.0)
        self.measured = (configmap, secret)

    @inlineCallbacks
    def test_sqlite(self):
        client = yield self.server()
        yield self.check_hang(client)

    @inlineCallbacks
    def test_etcd(self):
        cluster = Cluster.start(1)
        self.addCleanup(cluster.stop)
        client = yield self.server("--storage-backend", "etcd3",
                                   "--etcd-servers", cluster.urls[0])
        yield self.check_hang(client)
