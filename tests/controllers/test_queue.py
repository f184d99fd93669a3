"""The controllers' work queue (``controllers/queue.py``) and worker, on a Clock."""

from twisted.internet.defer import Deferred, fail
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase

from platformd.controllers.queue import (
    FixedRateLimiter, QueueShutDown, WorkQueue, default_rate_limiter)
from platformd.controllers.worker import work
from platformd.util.ratelog import RateLimitedLog


class RateLimiterTests(SynchronousTestCase):
    def test_default_doubles_from_5ms_to_1000s(self):
        """DefaultControllerRateLimiter's item limiter: 5 ms doubling, at most 1000 s."""
        limiter = default_rate_limiter()
        delays = [limiter.when("a") for _ in range(20)]
        self.assertEqual(delays[:4], [0.005, 0.01, 0.02, 0.04])
        self.assertEqual(delays[-1], 1000.0)
        self.assertEqual(limiter.num_requeues("a"), 20)
        self.assertEqual(limiter.when("b"), 0.005)
        limiter.forget("a")
        self.assertEqual((limiter.num_requeues("a"), limiter.when("a")), (0, 0.005))

    def test_fixed(self):
        """A fixed limiter waits the same each time."""
        limiter = FixedRateLimiter(1.0)
        self.assertEqual([limiter.when("a") for _ in range(3)], [1.0] * 3)
        self.assertEqual(limiter.num_requeues("a"), 3)


class QueueTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.queue = WorkQueue(self.clock)

    def test_coalescing(self):
        """An item added again while it waits is queued once, in its first place."""
        for item in ("a", "b", "a"):
            self.queue.add(item)
        self.assertEqual(len(self.queue), 2)
        self.assertEqual([self.successResultOf(self.queue.get()) for _ in range(2)], ["a", "b"])

    def test_waiting_worker_woken_on_a_later_turn(self):
        """A worker waiting is handed an added item on the next turn, not inside add."""
        d = self.queue.get()
        self.queue.add("a")
        self.queue.add("b")
        self.assertNoResult(d)
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d), "a")

    def test_not_processed_twice(self):
        """An item added while processed waits in the dirty set until done()."""
        self.queue.add("a")
        self.assertEqual(self.successResultOf(self.queue.get()), "a")
        self.queue.add("a")
        self.queue.add("a")
        second = self.queue.get()
        self.clock.advance(0)
        self.assertNoResult(second)
        self.queue.done("a")
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(second), "a")
        self.queue.done("a")
        self.assertEqual(len(self.queue), 0)

    def test_rate_limited_retries(self):
        """add_rate_limited waits 5 ms, then 10 ms ...; forget starts over."""
        self.queue.add_rate_limited("a")
        self.clock.advance(0.004)
        self.assertEqual(len(self.queue), 0)
        self.clock.advance(0.001)
        self.assertEqual(len(self.queue), 1)
        self.successResultOf(self.queue.get())
        self.queue.done("a")
        self.queue.add_rate_limited("a")
        self.clock.advance(0.009)
        self.assertEqual(len(self.queue), 0)
        self.clock.advance(0.001)
        self.assertEqual(len(self.queue), 1)
        self.assertEqual(self.queue.num_requeues("a"), 2)
        self.queue.forget("a")
        self.assertEqual(self.queue.num_requeues("a"), 0)

    def test_add_after_keeps_the_earliest(self):
        """An item delayed twice is added at the earlier time, once."""
        self.queue.add_after("a", 10)
        self.queue.add_after("a", 5)
        self.queue.add_after("a", 20)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.clock.advance(5)
        self.assertEqual(len(self.queue), 1)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_shut_down(self):
        """Shutting down cancels delayed adds and ends waiting workers."""
        d = self.queue.get()
        self.queue.add_after("a", 1)
        self.queue.shut_down()
        self.failureResultOf(d, QueueShutDown)
        self.failureResultOf(self.queue.get(), QueueShutDown)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.queue.add("b")
        self.assertEqual(len(self.queue), 0)


class WorkerTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.queue = WorkQueue(self.clock)
        self.failures = RateLimitedLog(Logger(), clock=self.clock)

    def test_failure_retried_with_backoff_then_forgotten(self):
        """A failing sync is logged and retried after 5 ms, then 10 ms; success forgets."""
        results = [fail(RuntimeError("no")), fail(RuntimeError("no")), None]
        synced = []

        def sync(item):
            synced.append(self.clock.seconds())
            return results.pop(0)
        done = work(self.queue, sync, lambda item: f"syncing {item} failed", self.failures)
        self.queue.add("a")
        self.clock.advance(0)
        self.clock.advance(0.005)
        self.clock.advance(0.010)
        self.assertEqual(synced, [0, 0.005, 0.015])
        self.assertEqual(self.queue.num_requeues("a"), 0)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.queue.shut_down()
        self.successResultOf(done)

    def test_failure_after_shut_down_is_quiet(self):
        """A sync failing after the queue shut down is neither logged nor retried."""
        pending = Deferred()
        done = work(self.queue, lambda item: pending, str, self.failures)
        self.queue.add("a")
        self.clock.advance(0)
        self.queue.shut_down()
        pending.errback(RuntimeError("stopped"))
        self.assertEqual(self.flushLoggedErrors(RuntimeError), [])
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.successResultOf(done)
