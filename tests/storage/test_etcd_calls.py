"""
``Client.unary``'s retries, deadline and cancellation, on a Clock: which failures are
retried (clientv3's rules), when, and that nothing is left scheduled or running once
the caller gives up; which endpoint each call goes to, and how a failed one is left.
The outcomes of grpcio's futures are scripted here (but for the words grpcio refuses an
unsent call with, taken from grpcio itself); the calls themselves are exercised against
a real etcd in ``test_etcd.py`` and ``tests/etcd``.
"""

from __future__ import annotations

import grpc
from twisted.internet.defer import CancelledError
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.errors import StatusError
from platformd.storage.etcd3.client import (
    _NOT_SENT, HEDGE_AFTER, REQUIRE_LEADER, Client, pick, targets)
from tests.etcd.cluster import free_ports


class _Clock(Clock):
    """A Clock whose ``callFromThread`` runs at once (the futures here complete inline)."""

    def callFromThread(self, f, *args, **kwargs):
        f(*args, **kwargs)


class _Error(grpc.RpcError):
    def __init__(self, code, details=""):
        super().__init__(details)
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


class _Future:
    """A grpcio future whose outcome the test sets with ``finish``."""

    def __init__(self):
        self.callbacks: list = []
        self.outcome = None
        self.cancelled = False

    def add_done_callback(self, fn):
        self.callbacks.append(fn)

    def finish(self, outcome):
        self.outcome = outcome
        for fn in self.callbacks:
            fn(self)

    def result(self):
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome

    def cancel(self):
        self.cancelled = True
        self.finish(grpc.FutureCancelledError())


class _Method:
    """A stub's multi-callable: records each attempt and its future."""

    def __init__(self):
        self.attempts: list = []

    def future(self, request, timeout, wait_for_ready, metadata):
        future = _Future()
        self.attempts.append((request, timeout, wait_for_ready, metadata, future))
        return future

    def finish(self, outcome):
        self.attempts[-1][-1].finish(outcome)


class _KV:
    def __init__(self, method):
        self.Call = method


class _CallTestCase(SynchronousTestCase):
    """A client of one endpoint whose stub's ``Call`` is a ``_Method``."""

    def setUp(self):
        self.clock = _Clock()
        self.client = Client(self.clock, ["http://127.0.0.1:1"], timeout=10)
        self.addCleanup(self.client.stop)
        self.method = _Method()
        self.client.endpoints[0].kv = _KV(self.method)


class UnaryCallTests(_CallTestCase):
    def test_attempt(self):
        """A call waits for a member, carries hasleader and the time left as deadline."""
        self.clock.advance(3)
        d = self.client.unary("Call", "request")
        self.assertEqual(self.method.attempts[0][:4], ("request", 10, True, REQUIRE_LEADER))
        self.method.finish("reply")
        self.assertEqual(self.successResultOf(d), "reply")

    def test_read_retried_when_unavailable(self):
        """A repeatable call is tried again on UNAVAILABLE, after 25, 50, 100 ms ..."""
        d = self.client.unary("Call", "read", repeatable=True)
        self.method.finish(_Error(grpc.StatusCode.UNAVAILABLE, "connection refused"))
        self.clock.advance(0.024)
        self.assertEqual(len(self.method.attempts), 1)
        self.clock.advance(0.001)
        self.assertEqual(len(self.method.attempts), 2)
        self.assertAlmostEqual(self.method.attempts[1][1], 10 - 0.025)
        self.method.finish(_Error(grpc.StatusCode.UNAVAILABLE, "connection refused"))
        self.clock.advance(0.05)
        self.method.finish("reply")
        self.assertEqual(self.successResultOf(d), "reply")
        self.assertEqual(len(self.method.attempts), 3)

    def test_write_retried_only_without_leader(self):
        """
        A write is tried again only when refused for having no leader (it cannot have
        been applied); any other UNAVAILABLE is etcd unreachable: upstream's 504.
        """
        d = self.client.unary("Call", "write")
        self.method.finish(_Error(grpc.StatusCode.UNAVAILABLE, "etcdserver: no leader"))
        self.clock.advance(0.025)
        self.method.finish(_Error(grpc.StatusCode.UNAVAILABLE, "connection reset"))
        self.assertEqual(len(self.method.attempts), 2)
        error = self.failureResultOf(d, StatusError).value
        self.assertEqual((error.code, error.reason, error.message), (
            504, "Timeout", "Timeout: request did not complete within requested timeout"
            " - context deadline exceeded"))

    def test_refusal_passed_on(self):
        """
        An error that is not about reaching etcd (a bad request) is the caller's, not
        retried, as upstream's ErrorToAPIStatus answers an error it does not know: 500,
        no reason, etcd's own text.
        """
        d = self.client.unary("Call", "read", repeatable=True)
        self.method.finish(_Error(grpc.StatusCode.OUT_OF_RANGE, "etcdserver: mvcc: required"
                                  " revision has been compacted"))
        self.assertEqual(len(self.method.attempts), 1)
        error = self.failureResultOf(d, StatusError).value
        self.assertEqual(error.to_status(), {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "etcdserver: mvcc: required revision has been compacted", "code": 500})

    def test_refusal_by_grpc(self):
        """A refusal that is gRPC's, not etcd's, reads as Go's gRPC status error does."""
        d = self.client.unary("Call", "write")
        self.method.finish(_Error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  "grpc: received message larger than max (2500466 vs."
                                  " 2097152)"))
        error = self.failureResultOf(d, StatusError).value
        self.assertEqual((error.code, error.reason, error.message), (
            500, "", "rpc error: code = ResourceExhausted desc = grpc: received message"
            " larger than max (2500466 vs. 2097152)"))
        d = self.client.unary("Call", "write")
        self.method.finish(_Error(grpc.StatusCode.CANCELLED, "stopping"))
        self.assertEqual(self.failureResultOf(d, StatusError).value.message,
                         "rpc error: code = Canceled desc = stopping")

    def test_retries_end_at_the_deadline(self):
        """Retries stop at the deadline: the call is unreachable, no attempt is left."""
        d = self.client.unary("Call", "read", repeatable=True)
        while not d.called:
            self.method.finish(_Error(grpc.StatusCode.UNAVAILABLE))
            self.clock.advance(0.5)
        self.assertEqual(self.failureResultOf(d, StatusError).value.code, 504)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertLessEqual(self.clock.seconds(), 10.5)

    def test_cancel_in_flight(self):
        """Cancelling the Deferred cancels the attempt in flight."""
        d = self.client.unary("Call", "read", repeatable=True)
        d.cancel()
        self.failureResultOf(d, CancelledError)
        self.assertTrue(self.method.attempts[0][-1].cancelled)

    def test_cancel_between_attempts(self):
        """Cancelling while waiting to retry: no attempt follows."""
        d = self.client.unary("Call", "read", repeatable=True)
        self.method.finish(_Error(grpc.StatusCode.UNAVAILABLE))
        d.cancel()
        self.failureResultOf(d, CancelledError)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.clock.advance(1)
        self.assertEqual(len(self.method.attempts), 1)


class HedgedCallTests(_CallTestCase):
    """
    ``Client.hedged``: a call unanswered for ``HEDGE_AFTER`` is made again (to the next
    member in turn), the first answer wins and the others are cancelled.
    """

    def futures(self) -> list:
        return [attempt[-1] for attempt in self.method.attempts]

    def test_answer_in_time_is_one_call(self):
        d = self.client.hedged("Call", "read")
        self.clock.advance(HEDGE_AFTER - 0.001)
        self.method.finish("reply")
        self.assertEqual(self.successResultOf(d), "reply")
        self.assertEqual(len(self.method.attempts), 1)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_slow_call_is_made_again(self):
        """A member that hangs: the second call answers, the first is cancelled."""
        d = self.client.hedged("Call", "read")
        self.clock.advance(HEDGE_AFTER)
        self.assertEqual(len(self.method.attempts), 2)
        self.assertEqual(self.method.attempts[1][:4],
                         ("read", 10 - HEDGE_AFTER, True, REQUIRE_LEADER))
        self.clock.advance(HEDGE_AFTER)
        self.assertEqual(len(self.method.attempts), 3)
        self.futures()[1].finish("reply")
        self.assertEqual(self.successResultOf(d), "reply")
        first, _, third = self.futures()
        self.assertTrue(first.cancelled and third.cancelled)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_failure_waits_for_the_others(self):
        """A call that fails is not the answer while another is under way."""
        d = self.client.hedged("Call", "read")
        self.clock.advance(HEDGE_AFTER)
        self.futures()[0].finish(_Error(grpc.StatusCode.OUT_OF_RANGE, "etcdserver: no"))
        self.assertNoResult(d)
        self.futures()[1].finish("reply")
        self.assertEqual(self.successResultOf(d), "reply")

    def test_failure_alone_is_the_answer(self):
        """A refusal with no other call under way fails at once; no call follows."""
        d = self.client.hedged("Call", "read")
        self.method.finish(_Error(grpc.StatusCode.OUT_OF_RANGE, "etcdserver: no"))
        self.assertEqual(self.failureResultOf(d, StatusError).value.message, "etcdserver: no")
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_unanswered_to_the_deadline(self):
        """No member answers: 504 once the last call's deadline is past, nothing left."""
        d = self.client.hedged("Call", "read")
        made = round(10 / HEDGE_AFTER)  # one every HEDGE_AFTER, none at the deadline
        for _ in range(made + 2):
            self.clock.advance(HEDGE_AFTER)
        self.assertEqual([attempt[1] for attempt in self.method.attempts],
                         [10 - n * HEDGE_AFTER for n in range(made)])
        for future in self.futures():  # grpcio ends each at the deadline
            self.clock.advance(0.01)
            future.finish(_Error(grpc.StatusCode.DEADLINE_EXCEEDED))
        self.assertEqual(self.failureResultOf(d, StatusError).value.code, 504)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_none_made_once_closed(self):
        """Once the client has stopped, no call is made again; the one under way (ended
        by the channel's close) is the answer."""
        d = self.client.hedged("Call", "read")
        self.client.stop()
        self.clock.advance(HEDGE_AFTER)
        self.assertEqual(len(self.method.attempts), 1)
        self.method.finish(_Error(grpc.StatusCode.CANCELLED, "Channel closed!"))
        self.assertEqual(self.failureResultOf(d, StatusError).value.code, 500)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_asked_after_stop(self):
        """A call asked of a stopped client fails at once, unsent."""
        self.client.stop()
        self.failureResultOf(self.client.hedged("Call", "read"), CancelledError)
        self.assertEqual(self.method.attempts, [])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_cancel(self):
        """Cancelling (the last waiter's deadline) cancels every call and the timer."""
        d = self.client.hedged("Call", "read")
        self.clock.advance(HEDGE_AFTER)
        d.cancel()
        self.failureResultOf(d, CancelledError)
        self.assertTrue(all(f.cancelled for f in self.futures()))
        self.assertEqual(self.clock.getDelayedCalls(), [])


READY, IDLE = grpc.ChannelConnectivity.READY, grpc.ChannelConnectivity.IDLE
CONNECTING = grpc.ChannelConnectivity.CONNECTING
FAILED = grpc.ChannelConnectivity.TRANSIENT_FAILURE


class _Endpoint:
    def __init__(self, name, state):
        self.name, self.state = name, state


class EndpointChoiceTests(SynchronousTestCase):
    """Which endpoint a call goes to (one channel per ``--etcd-servers`` URL)."""

    def test_targets(self):
        """Each URL its own target: addresses as such, names through DNS."""
        self.assertEqual(targets(["https://10.0.0.1:2379", "https://etcd-b.example:2380",
                                  "https://[fd00::3]"]),
                         (["ipv4:10.0.0.1:2379", "dns:///etcd-b.example:2380",
                           "ipv6:[fd00::3]:2379"], True))
        self.assertEqual(targets(["127.0.0.1:2379"]), (["ipv4:127.0.0.1:2379"], False))
        for bad, message in ((["http://a:1", "https://b:1"], "same scheme"),
                             (["unix:///x"], "not an http(s) URL"), ([], "at least one")):
            with self.assertRaises(ValueError) as raised:
                targets(bad)
            self.assertIn(message, str(raised.exception))

    def test_turns_round_connected_members(self):
        """Calls turn round the connected members, evenly, skipping the others."""
        members = [_Endpoint("a", READY), _Endpoint("b", FAILED), _Endpoint("c", READY)]
        self.assertEqual([pick(members, turn).name for turn in range(4)], ["a", "c", "a", "c"])

    def test_falls_back_to_members_not_known_failed(self):
        """None connected: one still connecting (or idle) before one that failed."""
        members = [_Endpoint("a", FAILED), _Endpoint("b", CONNECTING), _Endpoint("c", IDLE)]
        self.assertEqual([pick(members, turn).name for turn in range(3)], ["b", "c", "b"])
        members = [_Endpoint("a", FAILED), _Endpoint("b", FAILED)]
        self.assertEqual([pick(members, turn).name for turn in range(3)], ["a", "b", "a"])

    def test_call_to_connected_member_does_not_wait(self):
        """
        A call to a member seen connected fails at once if that connection has just
        broken (to be tried on another); a call to one not seen connected waits.
        """
        clock = _Clock()
        client = Client(clock, ["http://127.0.0.1:1"], timeout=10)
        self.addCleanup(client.stop)
        method = _Method()
        [endpoint] = client.endpoints
        endpoint.kv = _KV(method)
        waits = []
        for state, repeatable in ((READY, True), (READY, False), (CONNECTING, True),
                                  (FAILED, False)):
            endpoint.state = state
            client.unary("Call", "request", repeatable=repeatable)
            waits.append(method.attempts[-1][2])
            method.finish("reply")
        self.assertEqual(waits, [False, False, True, True])

    def two_members(self):
        """A client of two connected members (a channel each), their calls scripted."""
        clock = _Clock()
        client = Client(clock, ["http://localhost:1", "http://127.0.0.2:1"], timeout=10)
        self.addCleanup(client.stop)
        methods = [_Method(), _Method()]
        for endpoint, method in zip(client.endpoints, methods):
            endpoint.kv, endpoint.state = _KV(method), READY
        return clock, client, methods

    def test_write_never_sent_tried_on_another_member(self):
        """
        A write grpcio refused unsent (its member's connection gone) is tried again on
        another member; one that failed once sent (the connection broke under it) is
        not: it may have been applied, so upstream's 504.
        """
        clock, client, methods = self.two_members()
        d = client.unary("Call", "write")
        [first] = [m for m in methods if m.attempts]
        first.finish(_Error(grpc.StatusCode.UNAVAILABLE, "connections to all backends"
                            " failing; last error: UNAVAILABLE: ipv4:127.0.0.2:1:"
                            " Connection refused"))
        client.endpoints[methods.index(first)].state = FAILED
        clock.advance(0.025)
        [other] = [m for m in methods if m is not first]
        other.finish("reply")
        self.assertEqual(self.successResultOf(d), "reply")
        d = client.unary("Call", "write")
        other.finish(_Error(grpc.StatusCode.UNAVAILABLE, "Socket closed"))
        self.assertEqual(self.failureResultOf(d, StatusError).value.code, 504)
        self.assertEqual(len(other.attempts), 2)

    def test_retry_goes_to_another_member(self):
        """A read that failed on one member is tried again on the next connected one."""
        clock, client, methods = self.two_members()
        d = client.unary("Call", "read", repeatable=True)
        [first] = [m for m in methods if m.attempts]
        [other] = [m for m in methods if m is not first]
        first.finish(_Error(grpc.StatusCode.UNAVAILABLE, "connection reset"))
        client.endpoints[methods.index(first)].state = FAILED
        clock.advance(0.025)
        self.assertEqual((len(first.attempts), len(other.attempts)), (1, 1))
        other.finish("reply")
        self.assertEqual(self.successResultOf(d), "reply")


class GrpcioWordsTests(SynchronousTestCase):
    """
    The words ``_NOT_SENT`` matches are grpcio's own: a call refused for want of a
    connection, made for real against a port nothing listens on (a grpcio release that
    rewords them fails here, not in production, where such writes would stop moving to
    another member).
    """

    def test_unsent_call_words(self):
        [port] = free_ports(1)
        for target, policy in ((f"ipv4:127.0.0.1:{port}", "round_robin"),
                               (f"dns:///localhost:{port}", "round_robin"),
                               (f"ipv4:127.0.0.1:{port}", "pick_first")):
            channel = grpc.insecure_channel(target, [("grpc.lb_policy_name", policy)])
            self.addCleanup(channel.close)
            call = channel.unary_unary("/etcdserverpb.KV/Range")
            with self.assertRaises(grpc.RpcError) as raised:
                call(b"", timeout=10, wait_for_ready=False)
            self.assertEqual(raised.exception.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertTrue(raised.exception.details().startswith(_NOT_SENT),
                            (policy, raised.exception.details()))
