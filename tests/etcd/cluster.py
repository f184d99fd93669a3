"""
Real etcd clusters for tests: 1 or 3 members on loopback, free ports, temporary data
directories.  The binary is Debian's ``etcd-server`` (``/usr/bin/etcd``) or ``etcd`` on
PATH; without it the tests that need it are skipped, saying so loudly (CI installs it:
``.ci/run``).

Startup waits (a fraction of a second) block the test's thread: they happen in
``setUp``/``setUpClass`` before the reactor has work.  ``fsync=False`` passes
``--unsafe-no-fsync`` for speed; the durability tests keep fsync on.

``tls=True`` serves clients over TLS as production clusters do: a CA of the cluster's,
a certificate per member naming only that member (member *n* listens on its own
loopback address, 127.0.0.*n+1*; the first is also ``localhost``), and client
certificates required (``--client-cert-auth``); ``cluster.tls`` holds the CA and a
client certificate and key.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request

import attrs
from twisted.trial.unittest import SkipTest

from tests.etcd import certificates

#: How long a member may take to answer /health.
_READY = 20.0


def etcd_binary() -> str:
    """The etcd server binary, or SkipTest with the reason."""
    found = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd")
                                     else None)
    if found is None:
        raise SkipTest("!!! etcd is not installed (apt-get install etcd-server): the etcd3"
                       " backend's tests are SKIPPED !!!")
    return found


def free_ports(count: int) -> list:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@attrs.define
class Member:
    """One etcd process: started, paused, killed (SIGKILL) and started again on its data."""

    name: str
    client_port: int
    peer_port: int
    data_dir: str
    args: list
    process: subprocess.Popen | None = None

    host: str = "127.0.0.1"
    #: With TLS: the context /health and /metrics are read with.
    context: ssl.SSLContext | None = None

    @property
    def url(self) -> str:
        scheme = "http" if self.context is None else "https"
        return f"{scheme}://{self.host}:{self.client_port}"

    def start(self):
        with open(os.path.join(os.path.dirname(self.data_dir), self.name + ".log"), "ab") as log:
            self.process = subprocess.Popen(self.args, stdout=log, stderr=log)

    def wait_ready(self):
        deadline = time.monotonic() + _READY
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"etcd member {self.name} exited with "
                                   f"{self.process.returncode}; see {self.data_dir}.log")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1,
                                            context=self.context) as reply:
                    if b'"true"' in reply.read():
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"etcd member {self.name} not healthy after {_READY}s")

    def is_leader(self) -> bool:
        """Whether this member leads (its ``etcd_server_is_leader`` metric)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=5,
                                    context=self.context) as reply:
            return b"\netcd_server_is_leader 1" in reply.read()

    def watch_streams(self) -> int:
        """The watch streams this member serves (``etcd_debugging_mvcc_watch_stream_total``)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=5,
                                    context=self.context) as reply:
            for line in reply.read().decode().splitlines():
                if line.startswith("etcd_debugging_mvcc_watch_stream_total "):
                    return int(float(line.split()[1]))
        raise AssertionError("no etcd_debugging_mvcc_watch_stream_total")

    def pause(self):
        """SIGSTOP: connections stay open and nothing answers (a hung disk or host)."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self):
        """SIGCONT after ``pause``."""
        self.process.send_signal(signal.SIGCONT)

    def kill(self):
        """SIGKILL, as a crash; the data directory stays."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.process = None


@attrs.define
class Cluster:
    """``size`` members (see module docstring); ``stop`` kills them and removes the data."""

    members: list
    base: str
    tls: certificates.ClientFiles | None = None

    @property
    def urls(self) -> list:
        return [m.url for m in self.members]

    @classmethod
    def start(cls, size: int = 1, fsync: bool = False, tls: bool = False) -> "Cluster":
        binary = etcd_binary()
        base = tempfile.mkdtemp(prefix="platformd-etcd-")
        ports = free_ports(2 * size)
        names = [f"m{n}" for n in range(size)]
        hosts = [f"127.0.0.{n + 1}" if tls else "127.0.0.1" for n in range(size)]
        initial = ",".join(f"{name}=http://{hosts[n]}:{ports[2 * n + 1]}"
                           for n, name in enumerate(names))
        client_files = certificates.issue(base, hosts) if tls else None
        # One member elects itself at once; three need room for a loaded machine.
        heartbeat, election = (10, 100) if size == 1 else (50, 1000)
        members = []
        for n, name in enumerate(names):
            client, peer, host = ports[2 * n], ports[2 * n + 1], hosts[n]
            scheme = "https" if tls else "http"
            data = os.path.join(base, name)
            args = [binary, "--name", name, "--data-dir", data,
                    "--listen-client-urls", f"{scheme}://{host}:{client}",
                    "--advertise-client-urls", f"{scheme}://{host}:{client}",
                    "--listen-peer-urls", f"http://{host}:{peer}",
                    "--initial-advertise-peer-urls", f"http://{host}:{peer}",
                    "--initial-cluster", initial, "--initial-cluster-state", "new",
                    "--initial-cluster-token", os.path.basename(base),
                    "--heartbeat-interval", str(heartbeat),
                    "--election-timeout", str(election),
                    "--logger", "zap", "--log-level", "warn"]
            if not fsync:
                args.append("--unsafe-no-fsync")
            context = None
            if client_files is not None:
                args += ["--cert-file", client_files.member_cert(n),
                         "--key-file", client_files.member_key(n),
                         "--client-cert-auth", "--trusted-ca-file", client_files.ca]
                context = client_files.context()
            members.append(Member(name, client, peer, data, args, host=host, context=context))
        cluster = cls(members, base, client_files)
        for member in members:
            member.start()
        try:
            for member in members:
                member.wait_ready()
        except Exception:
            cluster.stop()
            raise
        return cluster

    def stop(self):
        for member in self.members:
            member.kill()
        shutil.rmtree(self.base, ignore_errors=True)


_shared: list = []
_prefixes = itertools.count()


def shared_cluster() -> Cluster:
    """
    This process's three-member cluster, started on first use (about a second) and
    stopped at exit: trial has no module fixtures, and a cluster per test would cost
    more than most tests.  Tests that share it keep apart with ``fresh_prefix``; a test
    that stops members starts them again.
    """
    if not _shared:
        _shared.append(Cluster.start(3))
        atexit.register(_shared[0].stop)
    return _shared[0]


def fresh_prefix() -> str:
    """An ``--etcd-prefix`` no other test of this process uses."""
    return f"/registry-{next(_prefixes)}"

