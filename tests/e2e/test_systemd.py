"""
platformd under systemd, proven with real processes: a ``twistd platformd`` subprocess
notifies a datagram socket standing in for systemd's ``NOTIFY_SOCKET``; a listening
socket passed by ``systemd-socket-activate`` (LISTEN_FDS), named or not, is served over
HTTPS, several are refused, and those passed to another process are ignored; the unit
files pass ``systemd-analyze verify``.
"""

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from twisted.trial.unittest import SkipTest, TestCase

from tests.authz.helpers import document
from tests.e2e.daemon import ROOT, Connection, Server, free_port, write_tokens
from tests.etcd.cluster import free_ports

TOKEN = "systemd-token"
RBAC = {"type": "RBAC", "name": "rbac"}


class NotifySocket:
    """
    A datagram socket as systemd's notification socket (abstract name: ``@...``), read
    by a thread as systemd reads it (the kernel queues only a few datagrams).
    """

    def __init__(self):
        self.name = f"@platformd-test-{uuid.uuid4().hex}"
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind(b"\0" + self.name[1:].encode())
        self.messages: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            while True:
                self.messages.put(self.socket.recv(4096).decode())
        except OSError:
            pass  # closed

    def receive(self, timeout=30.0) -> str:
        return self.messages.get(timeout=timeout)

    def until(self, line: str, timeout=30.0) -> list:
        """Every message up to and including the first one holding ``line``."""
        deadline = time.monotonic() + timeout
        messages = []
        while True:
            messages.append(self.receive(max(0.01, deadline - time.monotonic())))
            if line in messages[-1].splitlines():
                return messages

    def close(self):
        self.socket.shutdown(socket.SHUT_RDWR)
        self.socket.close()
        self.thread.join(5)


def _server(testcase, **kw) -> Server:
    data_dir = os.path.abspath(testcase.mktemp())
    os.makedirs(data_dir)
    server = Server(data_dir, kw.pop("port", None) or free_port(),
                    write_tokens(data_dir, TOKEN), token=TOKEN, **kw)
    testcase.addCleanup(server.stop)
    return server


class NotifyTests(TestCase):
    timeout = 90

    def test_ready_status_watchdog_stopping(self):
        """
        STATUS= names each boot step; READY=1 comes once /readyz answers 200; WATCHDOG=1
        pings follow; SIGTERM sends STOPPING=1 and exits 0.
        """
        notify = NotifySocket()
        self.addCleanup(notify.close)
        server = _server(self, env={"NOTIFY_SOCKET": notify.name, "WATCHDOG_USEC": "200000"})
        server.spawn()
        booting = notify.until("READY=1")
        status, _ = server.connection().request("GET", "/readyz")
        self.assertEqual(status, 200, "READY=1 was sent before the server was ready")
        steps = [m.partition("STATUS=starting: ")[2].strip() for m in booting
                 if m.startswith("STATUS=starting: ")]
        self.assertEqual(steps[:4], ["storage", "customresource-preload", "cache",
                                     "rbac-index"])
        self.assertEqual(steps[-1], "ready")
        self.assertEqual(booting[-1],
                         f"READY=1\nSTATUS=serving on https://127.0.0.1:{server.port}\n")

        # (the interval itself, half of WATCHDOG_USEC, is pinned on a Clock in
        # tests/systemd/test_sdnotify.py)
        pings = [notify.receive() for _ in range(3)]
        self.assertEqual(pings, ["WATCHDOG=1\n"] * 3)

        server.signal(signal.SIGTERM)
        stopping = notify.until("STOPPING=1")
        self.assertIn("STATUS=shutting down", stopping[-1])
        self.assertEqual(server.wait(), 0)


class ReloadTests(TestCase):
    timeout = 90

    def test_sighup_reloads_the_authorization_config_at_once(self):
        """
        SIGHUP checks --authorization-config now (its poll is once a minute): a user RBAC
        denies is allowed right after AlwaysAllow is added to the file; systemd hears
        RELOADING=1, then READY=1.
        """
        notify = NotifySocket()
        self.addCleanup(notify.close)
        config = os.path.abspath(self.mktemp())
        with open(config, "wb") as f:
            f.write(document(RBAC))
        server = _server(self, env={"NOTIFY_SOCKET": notify.name},
                         args=["--authorization-config", config])
        with open(server.tokens, "a") as f:
            f.write('alice-token,alice,2,"dev"\n')
        server.start()
        notify.until("READY=1")
        alice = Connection(server.port, "alice-token")
        self.assertEqual(alice.request("GET", "/api/v1/namespaces")[0], 403)

        with open(config, "wb") as f:
            f.write(document(RBAC, {"type": "AlwaysAllow", "name": "alwaysallow"}))
        server.signal(signal.SIGHUP)
        reloading = notify.until("READY=1", timeout=10)
        self.assertEqual(reloading[0].splitlines()[0], "RELOADING=1")
        self.assertEqual(alice.request("GET", "/api/v1/namespaces")[0], 200)


class SocketActivationTests(TestCase):
    """
    Sockets passed as systemd's ``sd_listen_fds`` describes (docs/operations.md): by
    ``systemd-socket-activate``, which starts platformd at the first connection, with
    names (``--fdname``, as systemd always passes them) or without.
    """

    timeout = 90

    def setUp(self):
        if shutil.which("systemd-socket-activate") is None:
            raise SkipTest("systemd-socket-activate is not installed")

    def activated(self, *options, sockets: int = 1, args=()):
        """
        platformd under ``systemd-socket-activate`` listening on ``sockets`` free ports
        (``options`` its own, e.g. ``--fdname``), spawned; ``server.port`` the first
        passed socket's, ``server.secure_port`` the ``--secure-port`` it is given.
        """
        secure_port, *passed = free_ports(1 + sockets)  # all different
        wrapper = ["systemd-socket-activate", *options,
                   *(f"--listen=127.0.0.1:{port}" for port in passed),
                   "-E", "PYTHONPATH", "-E", "PYTHONHASHSEED", "-E", "PATH"]
        server = _server(self, port=secure_port, wrapper=wrapper, args=args)
        server.secure_port, server.port = secure_port, passed[0]
        server.spawn()
        return server

    def served(self, server) -> None:
        """Wait until /readyz answers 200 on the passed socket (the first connection
        starts platformd)."""
        deadline = time.monotonic() + 30
        while True:
            try:
                status, _ = server.connection().request("GET", "/readyz")
                if status == 200:
                    return
            except OSError:
                pass
            self.assertLess(time.monotonic(), deadline, "not served on the passed socket")
            time.sleep(0.05)

    def assertNotListening(self, port: int) -> None:
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()

    def test_serves_https_on_the_passed_socket(self):
        """
        With a socket passed as LISTEN_FDS, HTTPS is served on it, --secure-port is not
        bound, admin.kubeconfig names the passed socket's port and kubectl works with it.
        """
        server = self.activated("--fdname=platformd.socket")
        self.served(server)

        status, body = server.connection().request_json("GET", "/api/v1/namespaces/default")
        self.assertEqual((status, body["metadata"]["name"]), (200, "default"))
        self.assertNotListening(server.secure_port)

        kubeconfig = os.path.join(server.data_dir, "admin.kubeconfig")
        with open(kubeconfig) as f:
            self.assertIn(f"server: https://127.0.0.1:{server.port}\n", f.read())
        if shutil.which("kubectl"):
            out = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "get", "namespace",
                                  "default", "-o", "name"], capture_output=True, text=True,
                                 timeout=30)
            self.assertEqual((out.returncode, out.stdout), (0, "namespace/default\n"),
                             out.stderr)

        server.signal(signal.SIGTERM)
        self.assertEqual(server.wait(), 0)

    def test_workers_share_the_passed_socket(self):
        """
        ``--workers 2`` under socket activation: worker 0 hands the passed socket on, and
        with worker 0 stopped (SIGSTOP) the worker serves a new connection on it.
        """
        server = self.activated("--fdname=platformd.socket", args=["--workers", "2"])
        self.served(server)
        parent = server.process.pid
        os.kill(parent, signal.SIGSTOP)
        self.addCleanup(lambda: server.process.poll() is None
                        and os.kill(parent, signal.SIGCONT))
        # The worker starts once worker 0 is ready and accepts once it is ready itself:
        # the connection waits in the socket's queue meanwhile.
        status, body = server.connection().request_json("GET", "/api/v1/namespaces/default")
        self.assertEqual((status, body["metadata"]["name"]), (200, "default"))
        os.kill(parent, signal.SIGCONT)
        self.assertNotListening(server.secure_port)
        server.signal(signal.SIGTERM)
        self.assertEqual(server.wait(), 0)

    def test_unnamed_socket(self):
        """One socket passed without LISTEN_FDNAMES is served all the same."""
        server = self.activated()
        self.served(server)
        self.assertNotListening(server.secure_port)
        server.signal(signal.SIGTERM)
        self.assertEqual(server.wait(), 0)

    def test_several_sockets_refused(self):
        """
        Two sockets (named or not): platformd cannot tell which one is its HTTPS
        listener, so it says so in one line and exits 1, listening nowhere else.
        """
        for options in ((), ("--fdname=a:b",)):
            server = self.activated(*options, sockets=2)
            with self.assertRaises(OSError):  # starts it, which then refuses
                server.connection().request("GET", "/readyz")
            self.assertEqual(server.wait(), 1)
            self.assertEqual(
                server.output.splitlines()[-1],
                "platformd: 2 sockets were passed (LISTEN_FDS, named "
                f"{'a:b' if options else 'unknown:unknown'}) and platformd serves HTTPS on"
                " one: pass only that one")
            self.assertNotListening(server.secure_port)


class InheritedVariablesTests(TestCase):
    timeout = 90

    def test_sockets_passed_to_another_process_ignored(self):
        """
        LISTEN_FDS with another process's LISTEN_PID (inherited from a parent they were
        meant for) passes nothing to this one: --secure-port is served.
        """
        server = _server(self, env={"LISTEN_PID": "1", "LISTEN_FDS": "1"})
        server.start()
        server.signal(signal.SIGTERM)
        self.assertEqual(server.wait(), 0)


class LoggerTests(TestCase):
    timeout = 90

    def test_the_units_logger_writes_text_without_a_journal(self):
        """
        ``twistd --logger=platformd.process.journald.observer`` (the unit's) runs the server; not
        connected to a journal it writes twistd's text lines to standard error.
        """
        server = _server(self, twistd_args=["--logger=platformd.process.journald.observer"])
        server.start()
        server.signal(signal.SIGTERM)
        self.assertEqual(server.wait(), 0)
        self.assertIn(f"platformd serving on https://127.0.0.1:{server.port}",
                      server.output)


class UnitFileTests(TestCase):
    def test_units_verify(self):
        """
        ``systemd-analyze verify`` passes on both units.  It checks that ExecStart's
        program exists, so the copy verified names this interpreter's twistd instead of
        /usr/local/bin/twistd; nothing else is changed.
        """
        analyze = shutil.which("systemd-analyze")
        if analyze is None:
            raise SkipTest("systemd-analyze is not installed: the units are NOT verified")
        twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
        if not os.access(twistd, os.X_OK):
            raise SkipTest(f"no twistd beside {sys.executable}: the units are NOT verified")
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        for name in ("platformd.service", "platformd.socket"):
            with open(os.path.join(ROOT, "systemd", name)) as f:
                text = f.read()
            with open(os.path.join(directory, name), "w") as f:
                f.write(text.replace("/usr/local/bin/twistd", twistd))
        result = subprocess.run(
            [analyze, "verify", os.path.join(directory, "platformd.service"),
             os.path.join(directory, "platformd.socket")],
            capture_output=True, text=True, timeout=60)
        self.assertEqual((result.returncode, result.stderr), (0, ""))
