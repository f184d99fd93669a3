"""The journald observer: native protocol on a real datagram socket, memfd, fallback, choice."""

import io
import os
import socket
import struct
import tempfile

from twisted.logger import LogLevel, Logger
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from platformd.process import journald
from platformd.process.journald import JournalObserver, choose, field_name, serialize


def parse(data: bytes) -> dict:
    """The native protocol read back (as journald reads it)."""
    fields, rest = {}, data
    while rest:
        line, _, after = rest.partition(b"\n")
        if b"=" in line:
            name, _, value = line.partition(b"=")
            fields[name.decode()] = value.decode()
            rest = after
        else:
            (size,) = struct.unpack("<Q", after[:8])
            fields[line.decode()] = after[8:8 + size].decode()
            assert after[8 + size:9 + size] == b"\n"
            rest = after[9 + size:]
    return fields


def event(**kw):
    base = {"log_format": "cannot read {path}: {error}", "log_level": LogLevel.error,
            "log_namespace": "platformd.auth.reloading", "log_time": 0.0,
            "path": "/etc/authz.yaml", "error": "No such file", "log_logger": Logger()}
    base.update(kw)
    return base


class SerializeTests(SynchronousTestCase):
    def test_fields(self):
        self.assertEqual(parse(serialize(event(port=6443, **{"weird-key": "v"}))), {
            "MESSAGE": "cannot read /etc/authz.yaml: No such file", "PRIORITY": "3",
            "SYSLOG_IDENTIFIER": "platformd", "LOGGER": "platformd.auth.reloading",
            "PATH": "/etc/authz.yaml", "ERROR": "No such file", "PORT": "6443",
            "WEIRD_KEY": "v"})

    def test_multiline_values_are_length_prefixed(self):
        try:
            raise ValueError("boom")
        except ValueError:
            failure = Failure()
        data = serialize(event(log_failure=failure, log_level=LogLevel.critical))
        self.assertIn(b"MESSAGE\n", data)
        fields = parse(data)
        self.assertTrue(fields["MESSAGE"].startswith("cannot read /etc/authz.yaml: No such "
                                                     "file\nTraceback"))
        self.assertIn("ValueError: boom", fields["MESSAGE"])
        self.assertEqual(fields["PRIORITY"], "2")

    def test_field_names(self):
        self.assertEqual(field_name("path"), "PATH")
        self.assertEqual(field_name("_trusted"), "TRUSTED")
        self.assertEqual(field_name("9lives"), "LIVES")
        self.assertIsNone(field_name("__"))
        self.assertEqual(len(field_name("a" * 100)), 64)

    def test_own_fields_are_not_replaced(self):
        fields = parse(serialize(event(message="mine", priority=9)))
        self.assertEqual((fields["MESSAGE"], fields["PRIORITY"]),
                         ("cannot read /etc/authz.yaml: No such file", "3"))


class ObserverTests(SynchronousTestCase):
    def setUp(self):
        directory = tempfile.mkdtemp()
        self.path = os.path.join(directory, "socket")
        self.journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.journal.bind(self.path)
        self.addCleanup(os.rmdir, directory)
        self.addCleanup(os.unlink, self.path)
        self.addCleanup(self.journal.close)
        self.fallen_back: list = []
        self.observer = JournalObserver(self.path, fallback=self.fallen_back.append)
        self.addCleanup(self.observer.close)

    def test_one_datagram_per_event(self):
        self.observer(event())
        self.assertEqual(parse(self.journal.recv(65536))["PATH"], "/etc/authz.yaml")
        self.assertEqual(self.fallen_back, [])

    def test_big_event_goes_as_a_sealed_memfd(self):
        big = "x" * (1 << 20)  # beyond any datagram's size
        self.observer(event(path=big))
        data, fds, _flags, _addr = socket.recv_fds(self.journal, 16, 1)
        self.assertEqual((data, len(fds)), (b"", 1))
        with os.fdopen(fds[0], "rb") as f:
            f.seek(0)  # journald reads the memfd from its start
            self.assertEqual(parse(f.read())["PATH"], big)
        self.assertEqual(self.fallen_back, [])

    def test_journal_gone_falls_back(self):
        self.journal.close()
        self.observer(event())
        self.assertEqual(len(self.fallen_back), 1)


class ChooseTests(SynchronousTestCase):
    def setUp(self):
        self.stderr = tempfile.TemporaryFile("w+")
        self.addCleanup(self.stderr.close)
        st = os.fstat(self.stderr.fileno())
        self.stream = f"{st.st_dev}:{st.st_ino}"

    def test_journal_when_stderr_is_the_journal_stream(self):
        chosen = choose({"JOURNAL_STREAM": self.stream}, self.stderr, path="/")
        self.assertIsInstance(chosen, JournalObserver)
        chosen.close()

    def test_text_otherwise(self):
        for environ, path in (({}, "/"), ({"JOURNAL_STREAM": "1:2"}, "/"),
                              ({"JOURNAL_STREAM": self.stream}, "/nonexistent")):
            chosen = choose(environ, self.stderr, path=path)
            self.assertNotIsInstance(chosen, JournalObserver)
            chosen(event(log_level=LogLevel.info))
        self.stderr.seek(0)
        self.assertEqual(self.stderr.read().count("cannot read /etc/authz.yaml"), 3)

    def test_observer_uses_the_real_stderr(self):
        self.patch(journald.sys, "__stderr__", io.StringIO())
        self.patch(journald.os, "environ", {})
        chosen = journald.observer()
        chosen(event())
        self.assertIn("cannot read /etc/authz.yaml", journald.sys.__stderr__.getvalue())
