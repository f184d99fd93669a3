"""sd_notify: addresses, the environment, the waiting queue, watchdog pings (real sockets)."""

import os
import socket
import tempfile
import uuid

from twisted.internet.task import Clock
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from platformd.process import sdnotify
from platformd.process.sdnotify import Notifier, WatchdogService, socket_address, watchdog_interval


class Receiver:
    """A datagram socket at a file system path or an abstract name."""

    def __init__(self, testcase, abstract=False):
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            self.name = f"@platformd-test-{uuid.uuid4().hex}"
            self.socket.bind(b"\0" + self.name[1:].encode())
        else:
            directory = tempfile.mkdtemp()  # short: AF_UNIX paths are at most 107 bytes
            self.name = os.path.join(directory, "notify")
            self.socket.bind(self.name)
            testcase.addCleanup(os.rmdir, directory)
            testcase.addCleanup(os.unlink, self.name)
        self.socket.setblocking(False)
        testcase.addCleanup(self.socket.close)

    def all(self) -> list:
        messages = []
        while True:
            try:
                messages.append(self.socket.recv(4096).decode())
            except BlockingIOError:
                return messages


class AddressTests(SynchronousTestCase):
    def test_abstract_and_path(self):
        self.assertEqual(socket_address("@abc"), b"\0abc")
        self.assertEqual(socket_address("/run/systemd/notify"), "/run/systemd/notify")


class WatchdogIntervalTests(SynchronousTestCase):
    def test_half_of_watchdog_usec(self):
        self.assertEqual(watchdog_interval({"WATCHDOG_USEC": "30000000"}, 7), 15.0)

    def test_for_this_pid_only(self):
        env = {"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "7"}
        self.assertEqual(watchdog_interval(env, 7), 0.5)
        self.assertIsNone(watchdog_interval(env, 8))

    def test_off_or_malformed(self):
        self.assertIsNone(watchdog_interval({}, 7))
        self.assertIsNone(watchdog_interval({"WATCHDOG_USEC": "0"}, 7))
        self.assertIsNone(watchdog_interval({"WATCHDOG_USEC": "soon"}, 7))


class NotifierTests(SynchronousTestCase):
    def notifier(self, receiver, **env):
        environ = {"NOTIFY_SOCKET": receiver.name, "OTHER": "kept", **env}
        self.clock = Clock()
        notifier = Notifier(self.clock, environ, pid=7)
        self.environ = environ
        return notifier

    def test_sends_one_datagram_and_unsets_the_environment(self):
        for abstract in (False, True):
            receiver = Receiver(self, abstract)
            notifier = self.notifier(receiver, WATCHDOG_USEC="1000000")
            notifier.ready("serving on https://127.0.0.1:6443")
            notifier.status("starting: cache")
            notifier.stopping()
            self.assertEqual(receiver.all(), [
                "READY=1\nSTATUS=serving on https://127.0.0.1:6443\n",
                "STATUS=starting: cache\n", "STOPPING=1\nSTATUS=shutting down\n"])
            self.assertEqual(self.environ, {"OTHER": "kept"})

    def test_without_notify_socket_nothing_is_sent(self):
        notifier = Notifier(Clock(), {}, pid=7)
        notifier.ready("x")
        self.assertIsNone(notifier.address)

    def test_a_full_queue_keeps_messages_in_order(self):
        """The kernel queues few datagrams; the rest wait and go out once read."""
        receiver = Receiver(self)
        notifier = self.notifier(receiver)
        for i in range(40):
            notifier.status(f"step {i}")
        first = receiver.all()
        self.assertLess(len(first), 40)
        self.clock.advance(sdnotify.RETRY)
        rest = receiver.all()
        while len(first) + len(rest) < 40:
            self.clock.advance(sdnotify.RETRY)
            rest += receiver.all()
        self.assertEqual(first + rest, [f"STATUS=step {i}\n" for i in range(40)])
        self.assertFalse(self.clock.getDelayedCalls())

    def test_socket_gone_is_logged_not_raised(self):
        receiver = Receiver(self)
        notifier = self.notifier(receiver)
        receiver.socket.close()
        os.unlink(receiver.name)
        os.symlink("/nonexistent", receiver.name)  # cleaned by the receiver's unlink
        events: list = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        notifier.status("x")
        notifier.status("y")
        self.assertEqual([formatEvent(e) for e in events if e.get("log_namespace")
                          == "platformd.process.sdnotify"],
                         ["cannot notify the service manager (STATUS=x): No such file or directory",
                          "cannot notify the service manager (STATUS=y): No such file or directory"])
        self.assertFalse(self.clock.getDelayedCalls())


class WatchdogServiceTests(SynchronousTestCase):
    def test_pings_every_interval_until_stopped(self):
        receiver = Receiver(self)
        clock = Clock()
        notifier = Notifier(clock, {"NOTIFY_SOCKET": receiver.name,
                                    "WATCHDOG_USEC": "2000000"}, pid=7)
        service = WatchdogService(notifier, clock)
        service.startService()
        self.assertEqual(receiver.all(), ["WATCHDOG=1\n"])
        clock.advance(0.9)
        self.assertEqual(receiver.all(), [])
        clock.advance(0.1)
        self.assertEqual(receiver.all(), ["WATCHDOG=1\n"])
        service.stopService()
        clock.advance(5)
        self.assertEqual(receiver.all(), [])

    def test_no_pings_for_another_pid(self):
        receiver = Receiver(self)
        clock = Clock()
        notifier = Notifier(clock, {"NOTIFY_SOCKET": receiver.name, "WATCHDOG_USEC": "2000000",
                                    "WATCHDOG_PID": "8"}, pid=7)
        WatchdogService(notifier, clock).startService()
        clock.advance(5)
        self.assertEqual(receiver.all(), [])
