"""
What is stored and how (item 9: files under ``--data-dir`` and the audit log are the
service user's alone; ``docs/security.md`` "Files").
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import stat
from contextlib import closing
from unittest import mock

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import SynchronousTestCase, TestCase

from platformd.audit import rotation
from tests.e2e.harness import Client, start_server
from tests.test_cli import twistd

SECRETS = "/api/v1/namespaces/default/secrets"

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
