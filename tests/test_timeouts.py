"""The connection deadline (``timeouts.Deadline``): exact times with a lazily moved timer."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.edge.timeouts import Deadline


class DeadlineTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.deadline = Deadline(self.clock)
        self.fired: list = []

    def action(self, name):
        return lambda: self.fired.append((name, self.clock.seconds()))

    def test_a_later_deadline_fires_at_its_own_time(self):
        self.deadline.set(32, self.action("header"))
        self.clock.advance(10)
        self.deadline.clear()
        self.deadline.set(90, self.action("idle"))  # due at 100
        self.clock.advance(89.9)
        self.assertEqual(self.fired, [])
        self.clock.advance(0.1)
        self.assertEqual(self.fired, [("idle", 100)])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_an_earlier_deadline_fires_at_its_own_time(self):
        self.deadline.set(90, self.action("idle"))
        self.clock.advance(5)
        self.deadline.set(32, self.action("header"))  # due at 37
        self.clock.advance(31.9)
        self.assertEqual(self.fired, [])
        self.clock.advance(0.1)
        self.assertEqual(self.fired, [("header", 37)])

    def test_cleared_deadline_never_acts(self):
        self.deadline.set(32, self.action("header"))
        self.deadline.clear()
        self.clock.advance(100)
        self.assertEqual((self.fired, self.clock.getDelayedCalls()), ([], []))
        self.deadline.set(1, self.action("again"))
        self.clock.advance(1)
        self.assertEqual(self.fired, [("again", 101)])

    def test_one_timer_for_many_requests(self):
        self.deadline.set(32, self.action("header"))
        for _ in range(100):
            self.clock.advance(0.01)
            self.deadline.set(32, self.action("header"))
            self.deadline.clear()
            self.deadline.set(90, self.action("idle"))
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.clock.advance(32)  # the timer wakes, the deadline is later: it waits again
        self.assertEqual((self.fired, len(self.clock.getDelayedCalls())), ([], 1))
        self.clock.advance(58)
        self.assertEqual(self.fired, [("idle", 91)])

    def test_stop_leaves_no_timer(self):
        self.deadline.set(32, self.action("header"))
        self.deadline.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.clock.advance(40)
        self.assertEqual(self.fired, [])
