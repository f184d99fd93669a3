"""
The writer side: the rotated file (lumberjack's rules), the writer thread's modes, the
line formats, and the daemon's startup errors.
"""

from __future__ import annotations

import gzip
import os
import threading

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import SynchronousTestCase, TestCase

from platformd.audit import event
from platformd.audit.rotation import MEGABYTE, RotatingFile
from platformd.audit.sink import BATCH, BLOCKING, BLOCKING_STRICT, LogSink
from platformd.options import Options
from platformd.service import daemon
from platformd.process.startup import StartupError

LINE = b"x" * (300 * 1024 - 1) + b"\n"


class Clock:
    def __init__(self, now=1_700_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


class RotationTests(SynchronousTestCase):
    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())
        self.path = os.path.join(self.dir, "audit.log")
        self.clock = Clock()

    def file(self, **kw) -> RotatingFile:
        return RotatingFile(self.path, now=self.clock, **kw)

    def test_rotates_by_size(self):
        log = self.file(max_size=1)
        log.write_lines([LINE] * 3)  # 900 KiB
        self.assertEqual(log.backups(), [])
        self.clock.now += 0.25
        log.write_lines([LINE, LINE])  # the 4th line would pass 1 MiB: rotated before it
        log.close()
        self.assertEqual(os.path.getsize(self.path), 2 * len(LINE))
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["audit-2023-11-14T22-13-20.250.log", "audit.log"])
        self.assertEqual(os.path.getsize(os.path.join(
            self.dir, "audit-2023-11-14T22-13-20.250.log")), 3 * len(LINE))
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o600)

    def test_reopens_and_appends(self):
        self.file().write_lines([b"a\n"])
        log = self.file()
        log.write_lines([b"b\n"])
        log.close()
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), b"a\nb\n")

    def test_too_long_line(self):
        log = self.file(max_size=1)
        with self.assertRaises(OSError) as caught:
            log.write_lines([b"a\n", b"y" * (MEGABYTE + 1), b"b\n"])
        self.assertEqual(str(caught.exception),
                         f"write length {MEGABYTE + 1} exceeds maximum file size {MEGABYTE}")
        log.close()
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), b"a\nb\n")

    def test_max_backups_max_age_compress(self):
        log = self.file(max_size=1, max_backups=2, compress=True)
        for _ in range(4):
            self.clock.now += 1
            log.write_lines([LINE] * 4)
        log.close()
        names = sorted(os.listdir(self.dir))
        # Rotated at each round's third line: the two newest of four backups are kept.
        self.assertEqual(names, ["audit-2023-11-14T22-13-23.000.log.gz",
                                 "audit-2023-11-14T22-13-24.000.log.gz", "audit.log"])
        with gzip.open(os.path.join(self.dir, names[0])) as f:
            self.assertEqual(f.read(), LINE * 3)
        old = self.file(max_size=1, max_age=1)
        self.clock.now += 2 * 86400
        old.write_lines([LINE] * 4)
        old.close()
        self.assertEqual(len(os.listdir(self.dir)), 2)  # the older ones are gone


class Lines:
    """An ``out`` whose writes wait for ``release`` (a slow disk), or fail."""

    def __init__(self, fail=False):
        self.lines: list = []
        self.release = threading.Event()
        self.fail = fail

    def write_lines(self, lines):
        self.release.wait(10)
        if self.fail:
            raise OSError("disk on fire")
        self.lines.extend(lines)

    def close(self):
        pass


class SinkTests(TestCase):
    timeout = 20

    def sink(self, mode, out, capacity=2):
        sink = LogSink(reactor, out, lambda e: e["n"], mode, capacity)
        sink.start()
        self.addCleanup(lambda: (out.release.set(), sink.stop())[1])
        return sink

    @inlineCallbacks
    def test_blocking_waits_for_room(self):
        out = Lines()
        sink = self.sink(BLOCKING, out)
        self.assertIsNone(sink.process({"n": b"1\n"}))
        self.assertIsNone(sink.process({"n": b"2\n"}))
        waiting = sink.process({"n": b"3\n"})
        later = sink.process({"n": b"4\n"})
        self.assertFalse(waiting.called)
        out.release.set()
        yield waiting
        yield later
        yield sink.stop()
        self.assertEqual(out.lines, [b"1\n", b"2\n", b"3\n", b"4\n"])

    @inlineCallbacks
    def test_batch_drops(self):
        out = Lines()
        sink = self.sink(BATCH, out)
        for n in (b"1\n", b"2\n", b"3\n"):
            self.assertIsNone(sink.process({"n": n}))
        self.assertEqual((sink.metrics.audit_events.get(),
                          sink.metrics.audit_errors.get(("buffered",))), (3, 1))
        out.release.set()
        yield sink.stop()
        self.assertEqual(out.lines, [b"1\n", b"2\n"])

    @inlineCallbacks
    def test_strict_reports_the_write(self):
        out = Lines(fail=True)
        sink = self.sink(BLOCKING_STRICT, out)
        written = sink.process({"n": b"1\n"})
        out.release.set()
        self.assertIs((yield written), False)
        self.assertEqual(sink.metrics.audit_errors.get(("log",)), 1)
        out.fail = False
        self.assertIs((yield sink.process({"n": b"2\n"})), True)


EVENT = {"kind": "Event", "apiVersion": "audit.platform.io/v1", "level": "Metadata",
         "auditID": "id-1", "stage": "ResponseComplete", "requestURI": "/api?x=<&>",
         "verb": "get", "user": {"username": "jane", "groups": ["a", "b"]},
         "sourceIPs": ["10.0.0.1"], "userAgent": "kubectl",
         "objectRef": {"namespace": "ns"},
         "responseStatus": {"metadata": {}, "code": 200},
         "requestReceivedTimestamp": "2026-11-25T04:16:11.572400Z",
         "stageTimestamp": "2026-11-25T04:16:11.575934Z"}


class FormatTests(SynchronousTestCase):
    def test_json_escapes_as_go(self):
        self.assertIn(b'"requestURI":"/api?x=\\u003c\\u0026\\u003e"',
                      event.encode_json(EVENT))
        self.assertTrue(event.encode_json(EVENT).endswith(b"}\n"))

    def test_legacy(self):
        self.assertEqual(event.encode_legacy(EVENT).decode(),
                         '2026-11-25T04:16:11.5724Z AUDIT: id="id-1" stage="ResponseComplete" '
                         'ip="10.0.0.1" method="get" user="jane" groups="\\"a\\",\\"b\\"" '
                         'as="<self>" asgroups="<lookup>" user-agent="kubectl" namespace="ns" '
                         'uri="/api?x=<&>" response="200"\n')

    def test_microtime(self):
        self.assertEqual(event.microtime(1700000000.5), "2023-11-14T22:13:20.500000Z")


class StartupTests(SynchronousTestCase):
    def prepare(self, *args):
        data_dir = os.path.abspath(self.mktemp())
        options = Options()
        options.parseOptions(["--data-dir", data_dir, "--secure-port", "0", *args])
        with self.assertRaises(StartupError) as caught:
            daemon(options, reactor)
        return str(caught.exception)

    def test_bad_policy(self):
        policy = os.path.abspath(self.mktemp())
        with open(policy, "w") as f:
            f.write("apiVersion: audit.platform.io/v1\nkind: Policy\nrules:\n- level: All\n")
        self.assertEqual(self.prepare("--audit-policy-file", policy,
                                      "--audit-log-path", "-"),
                         'loading audit policy file: rules[0].level: Unsupported value: '
                         '"All": supported values: "None", "Metadata", "Request", '
                         f'"RequestResponse": from file {policy}')

    def test_flags(self):
        from twisted.python.usage import UsageError
        options = Options()
        with self.assertRaises(UsageError) as caught:
            options.parseOptions(["--audit-log-path", "x", "--audit-log-mode", "fast",
                                  "--audit-log-maxsize", "-1"])
        self.assertEqual(str(caught.exception),
                         '[invalid audit log mode fast, allowed modes are '
                         '"batch,blocking,blocking-strict", --audit-log-maxsize -1 '
                         "can't be a negative number]")
