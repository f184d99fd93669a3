"""
Socket activation's variables read as ``sd_listen_fds_with_names(3)`` reads them
(``platformd.edge.activation``), and which passed socket is served
(``listening.activated_socket``); tests/e2e/test_systemd.py passes real sockets to a
real process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from twisted.internet import reactor
from twisted.internet.protocol import Factory
from twisted.trial.unittest import SynchronousTestCase

from platformd.edge import listening
from platformd.edge.activation import UNKNOWN, Passed, passed
from platformd.process.startup import StartupError

PID = 4242


def env(**variables) -> dict:
    return {name.encode(): value.encode() for name, value in variables.items()}


class PassedTests(SynchronousTestCase):
    def test_none(self):
        """No LISTEN_PID, or no LISTEN_FDS: nothing was passed."""
        self.assertEqual(passed(env(LISTEN_FDS="1"), PID), [])
        self.assertEqual(passed(env(LISTEN_PID=str(PID)), PID), [])

    def test_another_process(self):
        """Variables meant for another process (even unparsable ones) are not ours."""
        self.assertEqual(passed(env(LISTEN_PID="1", LISTEN_FDS="1"), PID), [])
        self.assertEqual(passed(env(LISTEN_PID="1", LISTEN_FDS="x"), PID), [])

    def test_unnamed(self):
        """Without LISTEN_FDNAMES each descriptor, from 3 on, is "unknown"."""
        self.assertEqual(passed(env(LISTEN_PID=str(PID), LISTEN_FDS="2"), PID),
                         [Passed(3, UNKNOWN), Passed(4, UNKNOWN)])

    def test_named(self):
        self.assertEqual(
            passed(env(LISTEN_PID=str(PID), LISTEN_FDS="2", LISTEN_FDNAMES="a:b"), PID),
            [Passed(3, "a"), Passed(4, "b")])

    def test_invalid(self):
        """What sd_listen_fds answers -EINVAL for is a StartupError, in one line."""
        for variables, message in [
                (env(LISTEN_PID="me", LISTEN_FDS="1"), "LISTEN_PID='me' is not a number"),
                (env(LISTEN_PID=str(PID), LISTEN_FDS="x"), "LISTEN_FDS='x' is not a number"),
                (env(LISTEN_PID=str(PID), LISTEN_FDS="0"),
                 "LISTEN_FDS=0: not a count of passed sockets"),
                (env(LISTEN_PID=str(PID), LISTEN_FDS="2", LISTEN_FDNAMES="a"),
                 "LISTEN_FDNAMES names 1 sockets and LISTEN_FDS counts 2: which socket is"
                 " which cannot be told")]:
            error = self.assertRaises(StartupError, passed, variables, PID)
            self.assertEqual(str(error), message)

    def test_initial_environment(self):
        """
        The environment the process started with: what was removed from ``os.environ``
        since (as importing ``twisted.internet.endpoints`` removes LISTEN_PID and
        LISTEN_FDS) is still there.
        """
        script = ("import os, twisted.internet.endpoints\n"
                  "from platformd.edge.activation import initial_environment\n"
                  "assert 'LISTEN_PID' not in os.environ\n"
                  "found = initial_environment()\n"
                  "assert found[b'LISTEN_PID'] == str(os.getpid()).encode()\n"
                  "print(found[b'LISTEN_FDS'].decode())\n")
        # exec: the shell's PID ($$) is Python's.
        out = subprocess.run(
            ["sh", "-c", 'LISTEN_PID=$$ LISTEN_FDNAMES=x LISTEN_FDS=1 exec "$@"', "sh",
             sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        self.assertEqual((out.returncode, out.stdout), (0, "1\n"), out.stderr)


class ActivatedSocketTests(SynchronousTestCase):
    """Which passed socket is served: the passed descriptors are given here."""

    def given(self, *fds: int) -> None:
        self.patch(listening, "passed", lambda environ, pid: [
            Passed(fd, UNKNOWN) for fd in fds])

    def test_none(self):
        self.given()
        self.assertIsNone(listening.activated_socket(reactor))

    def test_one(self):
        """One socket, whatever its name, is adopted; its address is read from it."""
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        self.addCleanup(server.close)
        self.given(os.dup(server.fileno()))  # adopting closes the descriptor
        inherited = listening.activated_socket(reactor)
        self.assertEqual((inherited.host, inherited.port), server.getsockname())
        port = self.successResultOf(inherited.endpoint.listen(Factory()))
        self.addCleanup(port.stopListening)
        self.assertEqual(port.getHost().port, server.getsockname()[1])

    def test_several(self):
        self.given(3, 4)
        error = self.assertRaises(StartupError, listening.activated_socket, reactor)
        self.assertEqual(str(error), "2 sockets were passed (LISTEN_FDS, named "
                                     "unknown:unknown) and platformd serves HTTPS on one:"
                                     " pass only that one")

    def test_not_tcp(self):
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        self.given(a.fileno())
        error = self.assertRaises(StartupError, listening.activated_socket, reactor)
        self.assertEqual(str(error), "the passed socket is not a TCP socket")

    def test_not_open(self):
        r, w = os.pipe()
        os.close(r)
        os.close(w)
        self.given(r)
        error = self.assertRaises(StartupError, listening.activated_socket, reactor)
        self.assertEqual(str(error), f"the passed socket (descriptor {r}) cannot be used:"
                                     " Bad file descriptor")

