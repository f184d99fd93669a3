"""
The filter chain (api/filters.py) on bare requests: order, authenticators and
authorizers that answer later, impersonation, max-in-flight, Audit-Id, and upstream's
forbidden messages.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock, deferLater
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest
from zope.interface import implementer

from platformd import errors
from platformd import requestinfo
from platformd.api import filters
from platformd.auth.authenticators import AuthenticatorChain
from platformd.auth.authorizers import AlwaysAllow, AuthorizerChain, forbidden
from platformd.auth.interfaces import (
    ALLOW, DENY, NO_OPINION, Attributes, AuthenticationError, Decision, IAuthenticator,
    IAuthorizer, UserInfo,
)
from platformd.context import RequestContext

JANE = UserInfo("jane", "", ("devs", "system:authenticated"))
ADMIN = UserInfo("admin", "", ("system:masters", "system:authenticated"))


def request(method=b"GET", path=b"/api/v1/namespaces/default/pods", headers=(), args=None):
    r = DummyRequest([b""])
    r.method = method
    r.path = path
    r.uri = path
    r.args = args or {}
    for name, value in headers:
        r.requestHeaders.addRawHeader(name, value)
    return r


@implementer(IAuthenticator)
class Later:
    """An authenticator (or authorizer) that answers ``answer`` after ``delay`` seconds."""

    def __init__(self, clock, answer, delay=1.0):
        self.clock, self.answer, self.delay = clock, answer, delay
        self.asked = []

    def _later(self, asked):
        self.asked.append(asked)
        answer = self.answer
        if isinstance(answer, Exception):
            def fail():
                raise answer
            return deferLater(self.clock, self.delay, fail)
        return deferLater(self.clock, self.delay, lambda: answer)

    def authenticate(self, request):
        return self._later(request)

    def authorize(self, attributes):
        return self._later(attributes)


@implementer(IAuthorizer)
class Recording:
    def __init__(self, decide):
        self.decide = decide
        self.asked = []

    def authorize(self, attributes):
        self.asked.append(attributes)
        return self.decide(attributes)


def chain(authenticator, authorizer, ready=lambda: True, max_in_flight=None, endpoint=None):
    seen = []

    def serve(ctx):
        seen.append(ctx)
        return endpoint(ctx) if endpoint else b"served"

    return filters.FilterChain([
        filters.audit_id, filters.RequestInfo(), filters.Readiness(ready),
        filters.Authentication(authenticator), filters.Impersonation(authorizer),
        max_in_flight or filters.MaxInFlight(),
        filters.Authorization(authorizer)], serve), seen


def result_of(d):
    """The value or StatusError of a (possibly fired) Deferred or plain value."""
    if not isinstance(d, Deferred):
        return d
    out = []
    d.addBoth(out.append)
    assert out, "Deferred has not fired"
    value = out[0]
    if hasattr(value, "value") and isinstance(value.value, Exception):
        return value.value
    return value


class Static:
    def __init__(self, user):
        self.user = user

    def authenticate(self, request):
        return self.user


class ChainTests(SynchronousTestCase):
    def test_synchronous_path(self):
        """Answers given at once keep the whole chain synchronous (no Deferred)."""
        run, seen = chain(Static(JANE), AlwaysAllow())
        ctx = RequestContext(request())
        self.assertEqual(run(ctx), b"served")
        self.assertEqual((ctx.user, ctx.info.verb, ctx.info.resource), (JANE, "list", "pods"))
        self.assertEqual(len(seen), 1)

    def test_authenticator_and_authorizer_answer_later(self):
        """An authenticator and an authorizer that answer with Deferreds hold the
        request until they fire, and then it is served."""
        clock = Clock()
        authenticator = AuthenticatorChain([Static(None), Later(clock, JANE, 1.0)])
        authorizer = AuthorizerChain([Later(clock, Decision(NO_OPINION), 1.0),
                                      Later(clock, Decision(ALLOW), 2.0)])
        run, seen = chain(authenticator, authorizer)
        d = run(RequestContext(request()))
        self.assertIsInstance(d, Deferred)
        clock.advance(1.0)
        self.assertEqual(seen, [])  # authenticated; the authorizers are still thinking
        clock.advance(1.0)
        self.assertEqual(seen, [])  # first authorizer: no opinion; the second thinks
        clock.advance(2.0)
        self.assertEqual(result_of(d), b"served")
        self.assertEqual(seen[0].user, JANE)

    def test_later_denial_is_403(self):
        clock = Clock()
        authorizer = AuthorizerChain([Later(clock, Decision(DENY, "not today"))])
        run, seen = chain(Static(JANE), authorizer)
        d = run(RequestContext(request()))
        clock.advance(1)
        error = result_of(d)
        self.assertIsInstance(error, errors.StatusError)
        self.assertEqual(error.to_status()["message"],
                         'pods is forbidden: User "jane" cannot list resource "pods" in API '
                         'group "" in the namespace "default": not today')
        self.assertEqual(seen, [])

    def test_later_authentication_failure_is_401(self):
        clock = Clock()
        run, seen = chain(AuthenticatorChain([Later(clock, AuthenticationError("bad"))]),
                          AlwaysAllow())
        d = run(RequestContext(request()))
        clock.advance(1)
        error = result_of(d)
        self.assertEqual((error.code, error.reason), (401, "Unauthorized"))
        self.assertEqual(seen, [])

    def test_no_credentials_is_401(self):
        run, _ = chain(AuthenticatorChain([Static(None)]), AlwaysAllow())
        with self.assertRaises(errors.StatusError) as e:
            run(RequestContext(request()))
        self.assertEqual(e.exception.code, 401)

    def test_no_opinion_from_every_authorizer_is_403(self):
        run, _ = chain(Static(JANE), AuthorizerChain([]))
        with self.assertRaises(errors.StatusError) as e:
            run(RequestContext(request(path=b"/apis/rbac.authorization.platform.io/v1/"
                                            b"clusterrolebindings/x")))
        self.assertEqual(e.exception.to_status(), {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'clusterrolebindings.rbac.authorization.platform.io "x" is forbidden: '
                       'User "jane" cannot get resource "clusterrolebindings" in API group '
                       '"rbac.authorization.platform.io" at the cluster scope',
            "reason": "Forbidden",
            "details": {"name": "x", "group": "rbac.authorization.platform.io",
                        "kind": "clusterrolebindings"},
            "code": 403})

    def test_readiness_comes_before_authentication(self):
        """While starting, every request is 503 (Retry-After 1), credentials or not."""
        asked = []
        authenticator = Static(JANE)
        authenticator.authenticate = asked.append
        run, _ = chain(authenticator, AlwaysAllow(), ready=lambda: False)
        with self.assertRaises(errors.StatusError) as e:
            run(RequestContext(request()))
        self.assertEqual((e.exception.code, e.exception.retry_after), (503, 1))
        self.assertEqual(asked, [])

    def test_audit_id(self):
        """Each response carries an Audit-Id: the client's, or a new UUID."""
        run, _ = chain(Static(JANE), AlwaysAllow())
        given = request(headers=[(b"Audit-ID", b"abc-123")])
        run(RequestContext(given))
        self.assertEqual(given.responseHeaders.getRawHeaders(b"audit-id"), [b"abc-123"])
        fresh, other = request(), request()
        run(RequestContext(fresh))
        run(RequestContext(other))
        first = fresh.responseHeaders.getRawHeaders(b"audit-id")[0]
        self.assertEqual(len(first), 36)
        self.assertNotEqual(first, other.responseHeaders.getRawHeaders(b"audit-id")[0])


class ForbiddenMessageTests(SynchronousTestCase):
    """responsewriters.Forbidden's forbiddenMessage and NewForbidden, form by form."""

    def message(self, method, path, reason=""):
        info = requestinfo.parse(method, path, False)
        return forbidden(Attributes(JANE, info), reason).to_status()

    def test_non_resource(self):
        status = self.message(b"GET", "/metrics")
        self.assertEqual(status["message"], 'forbidden: User "jane" cannot get path "/metrics"')
        self.assertEqual(status["details"], {})

    def test_subresource_in_namespace(self):
        status = self.message(b"PUT", "/api/v1/namespaces/ns1/pods/p1/status", "why")
        self.assertEqual(status["message"],
                         'pods "p1" is forbidden: User "jane" cannot update resource '
                         '"pods/status" in API group "" in the namespace "ns1": why')
        self.assertEqual(status["details"], {"name": "p1", "kind": "pods"})

    def test_collection_at_cluster_scope(self):
        status = self.message(b"GET", "/api/v1/namespaces")
        self.assertEqual(status["message"], 'namespaces is forbidden: User "jane" cannot list '
                                            'resource "namespaces" in API group "" at the '
                                            'cluster scope')


class ImpersonationTests(SynchronousTestCase):
    def run_as(self, user, headers, decide=lambda a: Decision(ALLOW)):
        authorizer = Recording(decide)
        run, seen = chain(Static(user), authorizer)
        ctx = RequestContext(request(headers=headers))
        result = run(ctx)
        return result, ctx, authorizer.asked

    def test_user_and_groups(self):
        _, ctx, asked = self.run_as(ADMIN, [(b"Impersonate-User", b"jane"),
                                            (b"Impersonate-Group", b"devs"),
                                            (b"Impersonate-Group", b"ops")])
        self.assertEqual(ctx.user, UserInfo("jane", "", ("devs", "ops", "system:authenticated")))
        self.assertEqual([(a.user.name, a.info.verb, a.info.resource, a.info.name)
                          for a in asked[:3]],
                         [("admin", "impersonate", "users", "jane"),
                          ("admin", "impersonate", "groups", "devs"),
                          ("admin", "impersonate", "groups", "ops")])
        # The request itself is then authorized as the impersonated user.
        self.assertEqual((asked[3].user.name, asked[3].info.verb), ("jane", "list"))

    def test_service_account_extra_and_uid(self):
        _, ctx, asked = self.run_as(ADMIN, [
            (b"Impersonate-User", b"system:serviceaccount:ns1:robot"),
            (b"Impersonate-Extra-Scopes%2Fread", b"a"),
            (b"Impersonate-Uid", b"u-1")])
        self.assertEqual(ctx.user, UserInfo(
            "system:serviceaccount:ns1:robot", "u-1",
            ("system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated"),
            (("scopes/read", ("a",)),)))
        self.assertEqual([(a.info.resource, a.info.group, a.info.namespace, a.info.name,
                           a.info.subresource) for a in asked[:3]],
                         [("serviceaccounts", "", "ns1", "robot", ""),
                          ("userextras", "authentication.platform.io", "", "a", "scopes/read"),
                          ("uids", "authentication.platform.io", "", "u-1", "")])

    def test_anonymous_gets_unauthenticated(self):
        _, ctx, _ = self.run_as(ADMIN, [(b"Impersonate-User", b"system:anonymous")])
        self.assertEqual(ctx.user.groups, ("system:unauthenticated",))

    def test_denied(self):
        with self.assertRaises(errors.StatusError) as e:
            self.run_as(JANE, [(b"Impersonate-User", b"admin")],
                        lambda a: Decision(ALLOW if a.info.verb != "impersonate" else NO_OPINION))
        self.assertEqual(e.exception.to_status()["message"],
                         'users "admin" is forbidden: User "jane" cannot impersonate resource '
                         '"users" in API group "" at the cluster scope')

    def test_group_without_user(self):
        with self.assertRaises(errors.StatusError) as e:
            self.run_as(ADMIN, [(b"Impersonate-Group", b"devs")])
        self.assertEqual(e.exception.code, 400)

    def test_impersonation_checks_may_answer_later(self):
        clock = Clock()
        authorizer = Later(clock, Decision(ALLOW))
        run, seen = chain(Static(ADMIN), authorizer)
        d = run(RequestContext(request(headers=[(b"Impersonate-User", b"jane"),
                                                (b"Impersonate-Group", b"devs")])))
        clock.advance(1)
        clock.advance(1)
        self.assertEqual(seen, [])
        clock.advance(1)
        self.assertEqual(result_of(d), b"served")
        self.assertEqual(seen[0].user.name, "jane")


class MaxInFlightTests(SynchronousTestCase):
    def test_limits_reads_and_writes_separately(self):
        pending = []

        def endpoint(ctx):
            d = Deferred()
            pending.append(d)
            return d

        limit = filters.MaxInFlight(readonly=1, mutating=1)
        run, _ = chain(Static(JANE), AlwaysAllow(), max_in_flight=limit, endpoint=endpoint)
        run(RequestContext(request()))
        with self.assertRaises(filters.TooManyRequests):
            run(RequestContext(request()))
        run(RequestContext(request(method=b"POST")))  # writes have their own budget
        # Watches are long-running: never counted, never refused.
        run(RequestContext(request(path=b"/api/v1/pods", args={b"watch": [b"1"]})))
        # system:masters always gets an answer.
        run2, _ = chain(Static(ADMIN), AlwaysAllow(), max_in_flight=limit, endpoint=endpoint)
        run2(RequestContext(request()))
        self.assertEqual(limit.in_flight, {False: 2, True: 1})
        pending[0].callback(b"done")
        pending[3].callback(b"done")
        self.assertEqual(limit.in_flight, {False: 0, True: 1})
        run(RequestContext(request()))  # a slot is free again
        self.assertEqual(limit.in_flight, {False: 1, True: 1})

    def test_zero_is_no_limit_and_long_running_is_not_counted(self):
        """0 lifts a kind's limit (upstream's nil channel); exec, logs, proxy are
        long-running as watches are: neither counted nor refused."""
        pending = []

        def endpoint(ctx):
            pending.append(Deferred())
            return pending[-1]

        limit = filters.MaxInFlight(readonly=0, mutating=1)
        run, _ = chain(Static(JANE), AlwaysAllow(), max_in_flight=limit, endpoint=endpoint)
        for _ in range(3):
            run(RequestContext(request()))
        self.assertEqual(limit.in_flight, {False: 3, True: 0})
        run(RequestContext(request(method=b"POST")))
        with self.assertRaises(filters.TooManyRequests):
            run(RequestContext(request(method=b"POST")))
        for path in (b"/api/v1/namespaces/default/pods/p/exec",
                     b"/api/v1/namespaces/default/pods/p/log",
                     b"/api/v1/namespaces/default/pods/p/attach"):
            run(RequestContext(request(method=b"POST", path=path)))
        self.assertEqual(limit.in_flight, {False: 3, True: 1})

    def test_long_running_check(self):
        """Upstream's BasicLongRunningRequestCheck, case by case."""
        def long_running(method, path, watch=False):
            return requestinfo.long_running(requestinfo.parse(method, path, watch))

        self.assertTrue(long_running(b"GET", "/api/v1/pods", watch=True))
        self.assertTrue(long_running(b"GET", "/api/v1/namespaces/a/pods/p/log"))
        self.assertTrue(long_running(b"GET", "/api/v1/namespaces/a/pods/p/portforward"))
        self.assertTrue(long_running(b"GET", "/api/v1/namespaces/a/services/s/proxy"))
        self.assertTrue(long_running(b"GET", "/debug/pprof/profile"))
        self.assertFalse(long_running(b"GET", "/api/v1/namespaces/a/pods/p"))
        self.assertFalse(long_running(b"PUT", "/api/v1/namespaces/a/pods/p/status"))
        self.assertFalse(long_running(b"GET", "/api"))

    def test_failures_free_their_slot(self):
        def endpoint(ctx):
            raise errors.bad_request("no")

        limit = filters.MaxInFlight(readonly=1, mutating=1)
        run, _ = chain(Static(JANE), AlwaysAllow(), max_in_flight=limit, endpoint=endpoint)
        for _ in range(3):
            with self.assertRaises(errors.StatusError):
                run(RequestContext(request()))
        self.assertEqual(limit.in_flight, {False: 0, True: 0})


class SelectedNameTests(SynchronousTestCase):
    """A list or watch selecting one name is authorized with that name (upstream's
    request info), so a resourceNames rule can allow it; the route is unchanged."""

    def asked(self, query_args, path=b"/api/v1/namespaces/default/configmaps"):
        authorizer = Recording(lambda a: Decision(ALLOW))
        run, seen = chain(Static(JANE), authorizer)
        run(RequestContext(request(path=path, args=query_args)))
        return authorizer.asked[0].info, seen[0].info

    def test_exact_name(self):
        for selector in (b"metadata.name=cm1", b"metadata.name==cm1",
                         b"metadata.namespace=default,metadata.name=cm1"):
            asked, routed = self.asked({b"fieldSelector": [selector]})
            self.assertEqual((asked.verb, asked.name, routed.name), ("list", "cm1", ""))
        asked, _ = self.asked({b"fieldSelector": [b"metadata.name=cm1"], b"watch": [b"1"]})
        self.assertEqual((asked.verb, asked.name), ("watch", "cm1"))

    def test_no_name(self):
        for selector in (b"metadata.name!=cm1", b"metadata.namespace=x", b"metadata.name=a/b",
                         b"metadata.name=.."):
            asked, _ = self.asked({b"fieldSelector": [selector]})
            self.assertEqual(asked.name, "")


class SelectorAttributesTests(SynchronousTestCase):
    """The authorizers are given the selectors of a list, watch or deletecollection (the
    first of each), as upstream's request info gives them; other verbs none."""

    def asked(self, method=b"GET", path=b"/api/v1/namespaces/default/pods", more=None):
        authorizer = Recording(lambda a: Decision(ALLOW))
        run, _ = chain(Static(JANE), authorizer)
        run(RequestContext(request(method, path, args={
            b"fieldSelector": [b"spec.nodeName=n1", b"ignored=1"],
            b"labelSelector": [b"app=shop"], **(more or {})})))
        [attributes] = authorizer.asked
        return attributes.info.verb, attributes.field_selector, attributes.label_selector

    def test_verbs_with_selectors(self):
        self.assertEqual(self.asked(), ("list", "spec.nodeName=n1", "app=shop"))
        self.assertEqual(self.asked(more={b"watch": [b"1"]}), ("watch", "spec.nodeName=n1", "app=shop"))
        self.assertEqual(self.asked(b"DELETE"),
                         ("deletecollection", "spec.nodeName=n1", "app=shop"))

    def test_other_verbs(self):
        self.assertEqual(self.asked(path=b"/api/v1/namespaces/default/pods/p"),
                         ("get", "", ""))
        self.assertEqual(self.asked(b"POST"), ("create", "", ""))
        self.assertEqual(self.asked(path=b"/healthz"), ("get", "", ""))
