"""
The Webhook authorizer against a real HTTPS server on loopback: a failed call retried as
upstream's ``DefaultRetryBackoff()`` and ``DefaultShouldRetry`` say (waits on a
``Clock``), and a list's field and label selectors in the review it sends.
"""

from __future__ import annotations

import json

from twisted.internet import defer, reactor
from twisted.internet.task import deferLater
from twisted.trial.unittest import SynchronousTestCase

from platformd.auth.interfaces import ALLOW, DENY, NO_OPINION
from platformd.auth.retry import DEFAULT_BACKOFF, Backoff
from tests.authz.helpers import pods
from tests.authz.test_webhook import RESET, WebhookTestCase

#: upstream's waits between the 5 attempts, before jitter (up to 20 % more).
WAITS = (0.5, 0.75, 1.125, 1.6875)
OOPS = 'an error on the server ("oops") has prevented the request from succeeding'
#: The call's timeout: longer than any wait, so that the clock's one short delayed call
#: is the backoff's.
TIMEOUT = 10.0


class BackoffTests(SynchronousTestCase):
    def test_default_is_upstreams(self):
        self.assertEqual(DEFAULT_BACKOFF, Backoff(duration=0.5, factor=1.5, jitter=0.2,
                                                  steps=5))
        for rand, factor in ((0.0, 1.0), (0.5, 1.1), (1.0, 1.2)):
            waits = list(DEFAULT_BACKOFF.waits(lambda: rand))
            self.assertEqual(len(waits), len(WAITS))
            for wait, base in zip(waits, WAITS):
                self.assertAlmostEqual(wait, base * factor)


class RetryTests(WebhookTestCase):
    @defer.inlineCallbacks
    def backoff_wait(self, asked):
        """The wait between two attempts, once it is pending on the clock (the only
        delayed call shorter than the call's timeout)."""
        while True:
            now = self.clock.seconds()
            pending = [c.getTime() - now for c in self.clock.getDelayedCalls()
                       if c.getTime() - now < TIMEOUT]
            if pending:
                [wait] = pending
                return wait
            self.assertFalse(asked.called, "decided before every wait")
            yield deferLater(reactor, 0.01, lambda: None)

    @defer.inlineCallbacks
    def decide_through_backoff(self, webhook, attributes, waits):
        """The decision, each of ``waits`` found pending on the clock (within upstream's
        jitter) and passed."""
        asked = webhook.authorize(attributes)
        for base in waits:
            wait = yield self.backoff_wait(asked)
            self.assertTrue(base <= wait <= base * 1.2, (base, wait))
            self.clock.advance(wait)
        decision = yield asked
        return decision

    @defer.inlineCallbacks
    def test_retried_until_answered(self):
        """Three 500s, then an answer: four calls, three waits."""
        self.service.failures = [(500, b"oops", {})] * 3
        webhook = self.authorizer(timeout=TIMEOUT)
        decision = yield self.decide_through_backoff(webhook, pods(), WAITS[:3])
        self.assertEqual(decision.verdict, ALLOW)
        self.assertEqual(webhook.calls, 4)
        self.assertEqual(len({json.dumps(r) for r in self.service.reviews}), 1)

    @defer.inlineCallbacks
    def test_gives_up_after_five_attempts(self):
        """The last error is the failure policy's, logged once."""
        self.service.failures = [(500, b"oops", {})] * 6
        webhook = self.authorizer(timeout=TIMEOUT, failure_policy="NoOpinion")
        decision = yield self.decide_through_backoff(webhook, pods(), WAITS)
        self.assertEqual((decision.verdict, decision.error), (NO_OPINION, OOPS))
        self.assertEqual(webhook.calls, 5)
        self.assertEqual(len(self.flushLoggedErrors()), 0)  # logged as a line, not raised

    @defer.inlineCallbacks
    def test_retriable_failures(self):
        """Each failure DefaultShouldRetry retries: one wait, then the answer."""
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "m"}
        json_type = {b"content-type": b"application/json"}
        for failure in [
            RESET,
            (502, b"bad gateway", {}),
            (504, b"", {}),
            (429, b"", {}),
            (503, b"", {b"retry-after": b"1"}),
            (409, b"", {b"retry-after": b"2"}),
            (500, json.dumps({**status, "reason": "InternalError", "code": 500}).encode(),
             json_type),
            (500, json.dumps({**status, "reason": "Custom", "code": 500}).encode(), json_type),
            (500, json.dumps({**status, "reason": "ServerTimeout", "code": 500,
                              "details": {}}).encode(), json_type),
            (400, json.dumps({**status, "reason": "BadRequest", "code": 400,
                              "details": {"retryAfterSeconds": 3}}).encode(), json_type),
        ]:
            self.service.failures = [failure]
            webhook = self.authorizer(timeout=TIMEOUT)
            decision = yield self.decide_through_backoff(webhook, pods(), WAITS[:1])
            self.assertEqual((decision.verdict, webhook.calls), (ALLOW, 2), failure)

    @defer.inlineCallbacks
    def test_not_retried(self):
        """A refusal the server means (403, 503 without Retry-After, a Status whose
        reason retries nothing) is answered after one call, without waiting."""
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "no",
                  "reason": "Forbidden", "code": 500}
        for failure, error in [
            ((403, b"forbidden", {}), "forbidden"),
            ((503, b"", {}), "the server is currently unable to handle the request"),
            ((500, json.dumps(status).encode(), {b"content-type": b"application/json"}),
             "no"),
        ]:
            self.service.failures = [failure]
            webhook = self.authorizer(timeout=TIMEOUT)
            decision = yield self.decide(webhook, pods())
            self.assertEqual((decision.verdict, decision.error, webhook.calls),
                             (DENY, error, 1))
            self.assertEqual([c for c in self.clock.getDelayedCalls() if c.active()], [])

    @defer.inlineCallbacks
    def test_refused_connection_not_retried(self):
        closed = f"https://127.0.0.1:{self.port.getHost().port}/authorize"
        yield self.port.stopListening()
        webhook = self.authorizer(closed, timeout=TIMEOUT)
        decision = yield self.decide(webhook, pods())
        self.assertEqual((decision.verdict, webhook.calls), (DENY, 1))
        self.assertIn("refused", decision.error)

    @defer.inlineCallbacks
    def test_cancelled_while_waiting(self):
        """Cancelling the decision (the request went away) ends the retries."""
        self.service.failures = [(500, b"oops", {})] * 2
        webhook = self.authorizer(timeout=TIMEOUT)
        asked = webhook.authorize(pods())
        yield self.backoff_wait(asked)
        asked.cancel()
        self.failureResultOf(asked, defer.CancelledError)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(webhook.calls, 1)


class SelectorTests(WebhookTestCase):
    """A list's selectors, as upstream's webhook sends them: requirements only."""

    def sent(self, **selectors):
        webhook = self.authorizer()
        attributes = pods(verb="list")
        attributes = type(attributes)(attributes.user, attributes.info, **selectors)
        return self.decide(webhook, attributes).addCallback(
            lambda _: self.service.reviews[-1]["spec"]["resourceAttributes"])

    @defer.inlineCallbacks
    def test_list_with_label_and_field_selectors(self):
        sent = yield self.sent(
            field_selector="status.phase!=Failed,metadata.name==p\\,1,spec.nodeName=",
            label_selector="tier in (web, api, web),app=shop,!legacy,env,track!=canary")
        self.assertEqual(sent, {
            "namespace": "kube-system", "verb": "list", "version": "v1", "resource": "pods",
            # Terms sorted as written, values unescaped: upstream's fields.ParseSelector.
            "fieldSelector": {"requirements": [
                {"key": "metadata.name", "operator": "In", "values": ["p,1"]},
                {"key": "spec.nodeName", "operator": "In", "values": [""]},
                {"key": "status.phase", "operator": "NotIn", "values": ["Failed"]}]},
            # Sorted by key, values sorted and unique: upstream's labels.Parse.
            "labelSelector": {"requirements": [
                {"key": "app", "operator": "In", "values": ["shop"]},
                {"key": "env", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "tier", "operator": "In", "values": ["api", "web"]},
                {"key": "track", "operator": "NotIn", "values": ["canary"]}]}})

    @defer.inlineCallbacks
    def test_unparsable_selector_left_out(self):
        """A selector that does not parse is not sent (a selector only narrows: asking
        about the whole list is safe); the other still is."""
        sent = yield self.sent(field_selector="metadata.name", label_selector="app=shop")
        self.assertNotIn("fieldSelector", sent)
        self.assertEqual(sent["labelSelector"],
                         {"requirements": [{"key": "app", "operator": "In",
                                            "values": ["shop"]}]})
        sent = yield self.sent(field_selector="a=b\\x", label_selector="app in (")
        self.assertEqual(set(sent), {"namespace", "verb", "version", "resource"})

    @defer.inlineCallbacks
    def test_selectors_in_the_cache_key(self):
        webhook = self.authorizer()
        info = pods(verb="list")
        for selector in ("app=a", "app=b", "app=a"):
            yield self.decide(webhook, type(info)(info.user, info.info,
                                                  label_selector=selector))
        self.assertEqual(webhook.calls, 2)
