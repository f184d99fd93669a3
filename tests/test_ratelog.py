"""Each distinct message logged at most once per interval (platformd/ratelog.py)."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.ratelog import RateLimitedLog


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
