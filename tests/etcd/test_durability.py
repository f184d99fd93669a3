"""
No acknowledged write lost (issue 17): three etcd members with fsync on, a real
``twistd platformd --storage-backend etcd3`` acknowledging creates under load from
several client threads, and kill -9 of one member, of every member, and of the replica,
each started again; then every create that was answered 201 is there, with its data,
and the replica still exits cleanly on SIGTERM (a grpcio thread left running once hung
its exit).

Blocking on purpose: the daemon is a subprocess and the clients are threads, so the
test's reactor has nothing to do.  Every process is reaped at cleanup.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import threading
import time

from twisted.trial.unittest import TestCase

from tests.e2e.daemon import ROOT, TWISTD, Server, free_port, write_tokens
from tests.etcd.cluster import Cluster

TOKEN = "durability-token"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
#: Client threads creating at once.
_WRITERS = 4
#: Creates acknowledged after each fault before the next, proving the API writes again.
_PROGRESS = 10


class LoggedServer(Server):
    """A ``Server`` whose standard error goes to a file, not a pipe: while etcd is down
    the daemon logs a warning per failed call, and a full pipe nobody reads would block
    it.  ``output`` is the file's end once the process has exited."""

    def spawn(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
        with open(os.path.join(self.data_dir + ".log"), "ab") as log:
            self.process = subprocess.Popen(
                [*TWISTD, "-n", "--pidfile=", "platformd", "--data-dir", self.data_dir,
                 "--secure-port", str(self.port), "--token-auth-file", self.tokens,
                 *self.args], env=env, stdout=log, stderr=log)

    def wait(self, timeout=30) -> int:
        status = self.process.wait(timeout)
        with open(self.data_dir + ".log", "rb") as log:
            self.output = log.read()[-4000:].decode("utf-8", "replace")
        return status

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


class Load:
    """``_WRITERS`` threads creating ConfigMaps until stopped; ``acked`` holds every name
    answered 201.  A refused connection or an error answer is retried with a new name."""

    def __init__(self, server: Server):
        self.server = server
        self.acked: set = set()
        self.failures = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(n,)) for n in range(_WRITERS)]

    def start(self):
        for thread in self._threads:
            thread.start()

    def stop(self):
        self._stopping.set()
        for thread in self._threads:
            thread.join(30)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_for(self, count: int, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while self.count() < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {self.count()} of {count} creates acknowledged"
                                     f" ({self.failures} failed)")
            time.sleep(0.05)

    def _run(self, writer: int):
        connection, n = None, 0
        while not self._stopping.is_set():
            name = f"w{writer}-{n}"
            n += 1
            try:
                connection = connection or self.server.connection()
                status, _ = connection.request(
                    "POST", CONFIGMAPS, {"metadata": {"name": name}, "data": {"name": name}})
            except (OSError, http.client.HTTPException):
                connection = None
                self.failures += 1
                self._stopping.wait(0.05)
                continue
            if status == 201:
                with self._lock:
                    self.acked.add(name)
            else:
                self.failures += 1


class DurabilityTests(TestCase):
    timeout = 240

    def test_no_acknowledged_write_lost(self):
        cluster = Cluster.start(3, fsync=True)
        self.addCleanup(cluster.stop)
        tmp = os.path.abspath(self.mktemp())
        os.makedirs(tmp)
        server = LoggedServer(os.path.join(tmp, "data"), free_port(), write_tokens(tmp, TOKEN),
                        ["--storage-backend", "etcd3", "--etcd-servers",
                         ",".join(cluster.urls), "--etcd-compaction-interval", "0",
                         "--request-timeout", "5s"], token=TOKEN)
        server.start()
        self.addCleanup(server.stop)
        load = Load(server)
        load.start()
        self.addCleanup(load.stop)
        load.wait_for(_PROGRESS)

        # One member (the leader: the harshest), killed under load and started again.
        leader = next(m for m in cluster.members if m.is_leader())
        leader.kill()
        load.wait_for(load.count() + _PROGRESS)
        leader.start()
        leader.wait_ready()

        # Every member at once: writes in flight answer 504; the WAL holds the rest.
        for member in cluster.members:
            member.kill()
        for member in cluster.members:
            member.start()
        for member in cluster.members:
            member.wait_ready()
        load.wait_for(load.count() + _PROGRESS)

        # The replica: writes it acknowledged were in etcd before it answered.
        server.kill()
        server.start()
        load.wait_for(load.count() + _PROGRESS)
        load.stop()

        status, body = server.connection().request("GET", CONFIGMAPS)
        self.assertEqual(status, 200, body)
        stored = {item["metadata"]["name"]: item["data"]["name"]
                  for item in json.loads(body)["items"]}
        missing = sorted(load.acked - set(stored))
        self.assertEqual(missing, [], f"{len(missing)} acknowledged creates lost")
        self.assertTrue(all(stored[name] == name for name in load.acked))
        self.assertGreaterEqual(len(load.acked), 4 * _PROGRESS)

        # A clean exit on SIGTERM, promptly: no grpcio thread keeps the process alive.
        server.process.terminate()
        started = time.monotonic()
        self.assertEqual(server.wait(30), 0, server.output)
        self.assertLess(time.monotonic() - started, 15)
