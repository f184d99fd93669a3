"""Each distinct message logged at most once per interval (platformd/util/ratelog.py)."""

from twisted.internet.task import Clock
from twisted.logger import Logger, LogLevel
from twisted.trial.unittest import SynchronousTestCase

from platformd.util.ratelog import RateLimitedLog, origin


class Recorder:
    def __init__(self):
        self.lines = []

    def warn(self, format, **kw):
        self.lines.append(format.format(**kw))


class RateLimitedLogTests(SynchronousTestCase):
    def test_once_per_interval_per_message(self):
        clock, out = Clock(), Recorder()
        log = RateLimitedLog(out, "refused: {detail}", clock, every=60)
        for _ in range(3):
            log.warn("bad token")
            log.warn("expired")
        self.assertEqual(out.lines, ["refused: bad token", "refused: expired"])
        clock.advance(59)
        log.warn("bad token")
        clock.advance(1)
        log.warn("bad token")
        self.assertEqual(out.lines[2:], ["refused: bad token"])

    def test_keys_errors_and_failures(self):
        """Messages that differ per request share a ``key``; ``origin`` names one bug
        however it is reached; ``failure`` logs the traceback."""
        clock, events = Clock(), []
        log = RateLimitedLog(Logger(observer=events.append), clock=clock)

        def bug(path):
            raise ValueError(path)
        for path in ("/a", "/b"):
            try:
                bug(path)
            except ValueError:
                log.failure(f"request failed: {path}", key=origin())
        log.error("webhook down", key="accept")
        log.error("webhook down again", key="accept")
        self.assertEqual([(e["detail"], e["log_level"]) for e in events],
                         [("request failed: /a", LogLevel.critical),
                          ("webhook down", LogLevel.error)])
        self.assertIsInstance(events[0]["log_failure"].value, ValueError)
        try:
            bug("/c")
        except ValueError:
            self.assertEqual(origin(), f"builtins.ValueError at {__file__}:"
                                       f"{bug.__code__.co_firstlineno + 1}")
