"""
The request timeout (api/deadline.py) on a Clock: upstream's 504 body and headers when
the time is up, the ``timeout`` query parameter, long-running requests left alone, the
work cancelled, and a response already under way aborted.
"""

from __future__ import annotations

import time

from twisted.internet.defer import CancelledError, Deferred, succeed
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from platformd import errors
from platformd.api import deadline, filters
from platformd.context import RequestContext
from tests.api.test_filters import request


class Channel:
    def __init__(self):
        self.transport = StringTransport()


def run(limit: deadline.RequestDeadline, req, work):
    """The request through audit ID, request info and the deadline to ``work``."""
    req.startedWriting = False
    req.channel = Channel()
    chain = filters.FilterChain([filters.audit_id, filters.RequestInfo(), limit], work)
    return chain(RequestContext(req))


class DeadlineTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.limit = deadline.RequestDeadline(self.clock, 60.0)
        self.cancelled = []

    def slow(self, ctx):
        ctx.request.responseHeaders.setRawHeaders(b"Content-Type", [b"application/json"])
        return Deferred(self.cancelled.append)

    def test_timeout_answer(self):
        """Upstream's timeout handler: 504, the bare Status, sniffed text/plain, the outer
        filters' headers only; the work is cancelled."""
        req = request(headers=[(b"audit-id", b"a1")])
        answer = run(self.limit, req, self.slow)
        self.clock.advance(59.9)
        self.assertFalse(answer.called)
        self.clock.advance(0.1)
        self.assertEqual(self.successResultOf(answer), deadline.TIMEOUT_BODY)
        self.assertEqual(deadline.TIMEOUT_BODY,
                         b'{"metadata":{},"status":"Failure","message":"Timeout: request did '
                         b'not complete within the allotted timeout","reason":"Timeout",'
                         b'"details":{},"code":504}\n')
        self.assertEqual(req.responseCode, 504)
        self.assertEqual(dict(req.responseHeaders.getAllRawHeaders()), {
            b"Audit-Id": [b"a1"], b"Content-Type": [b"text/plain; charset=utf-8"],
            b"Content-Length": [b"%d" % len(deadline.TIMEOUT_BODY)]})
        self.assertEqual(len(self.cancelled), 1)

    def test_fired_work_waiting_on_more_is_timed(self):
        """
        Work whose Deferred has fired but waits on another (a write chained after
        ``succeed`` on its storage call) is timed like unfired work: the 504 at the
        deadline, and the call it waits on cancelled.
        """
        inner = Deferred(self.cancelled.append)
        answer = run(self.limit, request(), lambda ctx: succeed(None).addCallback(
            lambda _: inner))
        self.assertFalse(answer.called)
        self.clock.advance(60)
        self.assertEqual(self.successResultOf(answer), deadline.TIMEOUT_BODY)
        self.assertEqual(self.cancelled, [inner])

    def test_fired_work_answers_at_once(self):
        """Work that has its answer already is passed on as it is, with no timer."""
        work = succeed(b"served")
        self.assertIs(run(self.limit, request(), lambda ctx: work), work)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_answer_in_time(self):
        work = Deferred()
        answer = run(self.limit, request(), lambda ctx: work)
        self.clock.advance(30)
        work.callback(b"served")
        self.assertEqual(self.successResultOf(answer), b"served")
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_failure_in_time_passes_through(self):
        work = Deferred()
        answer = run(self.limit, request(), lambda ctx: work)
        work.errback(errors.bad_request("no"))
        self.assertEqual(self.failureResultOf(answer, errors.StatusError).value.message, "no")
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_immediate_answers_stay_synchronous(self):
        self.assertEqual(run(self.limit, request(), lambda ctx: b"now"), b"now")
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_timeout_parameter(self):
        """A shorter ?timeout= wins; 0, or longer than the maximum, is the maximum."""
        for value, expected in ((b"1s", 1.0), (b"1500ms", 1.5), (b"2m", 60.0), (b"0", 60.0),
                                (b"-5s", 60.0), (b"", 60.0)):
            self.assertEqual(self.limit.timeout_of(request(args={b"timeout": [value]})),
                             expected, value)
        answer = run(self.limit, request(args={b"timeout": [b"2s"]}), self.slow)
        self.clock.advance(2)
        self.assertEqual(self.successResultOf(answer), deadline.TIMEOUT_BODY)

    def test_bad_timeout_parameter(self):
        """Upstream's 400 with Go's ParseDuration words: a bare number misses its unit
        unless its whole part overflows first; past int64 nanoseconds is invalid; any
        length is read in linear time."""
        digits = "9" * 200_000
        for value, problem in (("abc", 'invalid duration "abc"'),
                               ("5", 'missing unit in duration "5"'),
                               ("9223372036854775808.5", 'missing unit in duration '
                                                         '"9223372036854775808.5"'),
                               ("9223372036854775809", 'invalid duration '
                                                       '"9223372036854775809"'),
                               ("-" + digits, f'invalid duration "-{digits}"'),
                               (digits + "s", f'invalid duration "{digits}s"'),
                               ("2562048h", 'invalid duration "2562048h"')):
            started = time.monotonic()
            with self.assertRaises(errors.StatusError) as caught:
                run(self.limit, request(args={b"timeout": [value.encode()]}), self.slow)
            self.assertEqual((caught.exception.code, caught.exception.message),
                             (400, "invalid timeout specified in the request URL - time: "
                                   + problem))
            self.assertLess(time.monotonic() - started, 0.5, value[:20])

    def test_long_running_requests_are_not_timed(self):
        answer = run(self.limit, request(args={b"watch": [b"1"]}), self.slow)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertFalse(answer.called)

    def test_zero_maximum_is_no_timeout(self):
        self.limit.maximum = 0
        run(self.limit, request(), self.slow)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_started_answer_is_aborted(self):
        """Part of the answer sent: upstream's ErrAbortHandler, the connection is closed."""
        req = request()
        answer = run(self.limit, req, self.slow)
        req.startedWriting = True
        self.clock.advance(60)
        self.failureResultOf(answer, CancelledError)
        self.assertTrue(req.channel.transport.disconnecting)
        self.assertEqual(len(self.cancelled), 1)

    def test_client_gone_cancels_the_work(self):
        answer = run(self.limit, request(), self.slow)
        answer.cancel()
        self.failureResultOf(answer, CancelledError)
        self.assertEqual(len(self.cancelled), 1)
        self.assertEqual(self.clock.getDelayedCalls(), [])
