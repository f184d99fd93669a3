"""
The parts of ``--workers`` that need no process: the workers' arguments and
environment, the line splitting of their output, and the pipe that ends a worker when
worker 0 is gone (a real pipe on a real reactor).
"""

import os
import socket
import time

from twisted.internet import reactor
from twisted.internet.protocol import Protocol, ServerFactory
from twisted.internet.defer import Deferred
from twisted.logger import LogLevel
from twisted.trial.unittest import SynchronousTestCase, TestCase

from platformd.edge.accepting import accept_one_per_turn
from platformd.options import Options
from platformd.process.parentwatch import ParentWatch
from platformd.process.workers import (
    MAX_LINE, Lines, level_of, worker_arguments, worker_environment,
)


class ArgumentsTests(SynchronousTestCase):
    def test_workers_dropped_worker_added(self):
        self.assertEqual(
            worker_arguments(["--data-dir", "d", "--workers", "3", "--secure-port", "1"], 2),
            ["--data-dir", "d", "--secure-port", "1", "--worker", "2"])
        self.assertEqual(worker_arguments(["--workers=4", "--event-ttl", "1m"], 1),
                         ["--event-ttl", "1m", "--worker", "1"])

    def test_options_keep_their_arguments(self):
        options = Options()
        options.parseOptions(["--data-dir", "d", "--workers", "2"])
        self.assertEqual(options.argv, ("--data-dir", "d", "--workers", "2"))
        self.assertEqual(options["workers"], 2)
        self.assertTrue(options["shared-data-dir"])

    def test_workers_bounded(self):
        from twisted.python.usage import UsageError
        for bad in ("0", "65"):
            with self.assertRaises(UsageError) as caught:
                Options().parseOptions(["--workers", bad])
            self.assertEqual(str(caught.exception), f"--workers: {bad} is not between 1 and 64")

    def test_environment_loses_systemd_variables(self):
        environ = {"PATH": "/bin", "NOTIFY_SOCKET": "/run/n", "WATCHDOG_USEC": "1",
                   "WATCHDOG_PID": "2", "LISTEN_PID": "3", "LISTEN_FDS": "1",
                   "LISTEN_FDNAMES": "https", "PYTHONPATH": "/x"}
        self.assertEqual(worker_environment(environ), {"PATH": "/bin", "PYTHONPATH": "/x"})


class LevelTests(SynchronousTestCase):
    def test_twistd_text_form(self):
        self.assertEqual(level_of("[platformd.service#warn] x"), LogLevel.warn)
        self.assertEqual(level_of("[stderr#error] Traceback"), LogLevel.error)
        self.assertEqual(level_of("[-] APISite starting on 6443"), LogLevel.info)
        self.assertEqual(level_of("\tFile \"x.py\", line 1"), LogLevel.info)
        self.assertEqual(level_of("[a#loud] x"), LogLevel.info)


class LinesTests(SynchronousTestCase):
    def test_complete_lines_only(self):
        lines = Lines()
        self.assertEqual(lines.feed(b"a\nb"), [b"a\n"])
        self.assertEqual(lines.feed(b"c\n\n"), [b"bc\n", b"\n"])

    def test_long_line_cut(self):
        lines = Lines()
        self.assertEqual(lines.feed(b"x" * (MAX_LINE + 5)), [b"x" * MAX_LINE + b"\n"])
        self.assertEqual(lines.feed(b"y\n"), [b"y\n"])


class ParentWatchTests(TestCase):
    def test_end_of_file_is_gone(self):
        read, write = os.pipe()
        self.addCleanup(os.close, read)
        gone: Deferred = Deferred()
        watch = ParentWatch(reactor, lambda: gone.callback(None), fd=read)
        watch.start()
        self.assertIn(watch, reactor.getReaders())
        os.close(write)
        return gone.addCallback(lambda _: self.assertNotIn(watch, reactor.getReaders()))


class OnePerTurnTests(SynchronousTestCase):
    def test_one_connection_per_read(self):
        """Three connections waiting: each time the port is read, one is accepted."""
        accepted: list = []

        def build(address):
            accepted.append(Protocol())
            return accepted[-1]
        factory = ServerFactory.forProtocol(Protocol)
        factory.buildProtocol = build
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        accept_one_per_turn(port)
        clients = [socket.create_connection(("127.0.0.1", port.getHost().port))
                   for _ in range(3)]
        for client in clients:
            self.addCleanup(client.close)
        time.sleep(0.1)  # the handshakes are done: all three wait in the listen queue
        for count in (1, 2, 3):
            port.doRead()
            self.assertEqual(len(accepted), count)
        for protocol in accepted:
            protocol.transport.abortConnection()
