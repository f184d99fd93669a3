"""``deferreds.Shared``: one run at a time, its outcome handed to every caller."""

from __future__ import annotations

from twisted.internet.defer import CancelledError, Deferred
from twisted.trial.unittest import SynchronousTestCase

from platformd.util.deferreds import Shared


class SharedTests(SynchronousTestCase):
    def setUp(self):
        self.runs: list = []
        self.shared = Shared(self.work)

    def work(self, *args) -> Deferred:
        run: Deferred = Deferred()
        self.runs.append((args, run))
        return run

    def test_callers_share_one_run(self):
        first, second = self.shared.join("a"), self.shared.join("b")
        self.assertTrue(self.shared.running)
        self.assertEqual([args for args, _ in self.runs], [("a",)])
        self.runs[0][1].callback(7)
        self.assertEqual((self.successResultOf(first), self.successResultOf(second)), (7, 7))
        self.assertFalse(self.shared.running)
        self.shared.join("c")
        self.assertEqual([args for args, _ in self.runs], [("a",), ("c",)])

    def test_failure_to_each(self):
        first, second = self.shared.join(), self.shared.join()
        self.runs[0][1].errback(ValueError("down"))
        errors = [self.failureResultOf(d, ValueError) for d in (first, second)]
        self.assertIsNot(errors[0], errors[1])
        self.assertEqual({str(e.value) for e in errors}, {"down"})

    def test_cancelled_caller_leaves_the_run(self):
        gone, kept = self.shared.join(), self.shared.join()
        gone.cancel()
        self.failureResultOf(gone, CancelledError)
        self.assertTrue(self.shared.running)
        self.runs[0][1].callback("done")
        self.assertEqual(self.successResultOf(kept), "done")

    def test_synchronous_work(self):
        shared = Shared(lambda: 3)
        self.assertEqual(self.successResultOf(shared.join()), 3)
        self.assertFalse(shared.running)
