"""slices: work done on the event loop a slice at a time."""

from twisted.internet import reactor, task
from twisted.internet.defer import CancelledError, Deferred, inlineCallbacks
from twisted.trial.unittest import TestCase

from platformd.util import slices
def counting(steps: int, log: list):
    """Work of ``steps`` slices, noting each; returns ``steps``."""
    for step in range(steps):
        log.append(step)
        if step < steps - 1:
            yield
    return steps


class RunTests(TestCase):
    def test_one_slice_at_once(self):
        """Work that ends within its first slice is answered at once, no Deferred."""
        self.assertEqual(slices.run(counting(1, [])), 1)

    def test_errors_at_once(self):
        """What the first slice raises is raised at once."""
        def failing():
            raise ValueError("bad")
            yield
        self.assertRaises(ValueError, slices.run, failing())

    @inlineCallbacks
    def test_rest_through_the_cooperator(self):
        """Longer work is a Deferred of its value; the reactor runs between slices."""
        log: list = []
        result = slices.run(counting(5, log))
        self.assertIsInstance(result, Deferred)
        self.assertEqual(log, [0])
        self.assertEqual((yield result), 5)
        self.assertEqual(log, [0, 1, 2, 3, 4])

    @inlineCallbacks
    def test_failure_later(self):
        """What a later slice raises fails the Deferred."""
        def failing():
            yield
            raise ValueError("bad")
        with self.assertRaises(ValueError):
            yield slices.run(failing())

    @inlineCallbacks
    def test_cancel_stops_the_work(self):
        """A cancelled run (the client went away) runs no further slice."""
        log: list = []
        result = slices.run(counting(1000, log))
        result.cancel()
        with self.assertRaises(CancelledError):
            yield result
        yield task.deferLater(reactor, 0.05, lambda: None)
        self.assertEqual(log, [0])
