"""
/healthz, /livez and /readyz with upstream's checks, sub-paths, ``?verbose``,
``?exclude`` and failure texts (``k8s.io/apiserver/pkg/server/healthz``).
"""

from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from platformd.api import health

from tests.metrics.test_metrics import parse
from tests.stub import StubServer

READYZ_VERBOSE = (
    "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]etcd-readiness ok\n[+]informer-sync ok\n"
    "[+]poststarthook/generic-apiserver-start-informers ok\n"
    "[+]poststarthook/start-system-namespaces-controller ok\n"
    "[+]poststarthook/rbac/bootstrap-roles ok\n[+]shutdown ok\nreadyz check passed\n")


class HealthTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer(rbac_policy=True)
        self.addCleanup(self.stub.stop)
        self.anonymous = self.stub.client(user=None)

    def test_roots_answer_ok_to_anyone(self):
        for path in ("/healthz", "/livez", "/readyz"):
            r = self.anonymous.get(path)
            self.assertEqual((r.code, r.body), (200, b"ok"), path)
            self.assertEqual(r.header("content-type"), "text/plain; charset=utf-8")
            self.assertEqual(r.header("x-content-type-options"), "nosniff")

    def test_verbose(self):
        r = self.anonymous.get("/readyz?verbose")
        self.assertEqual((r.code, r.body.decode()), (200, READYZ_VERBOSE))
        r = self.anonymous.get("/livez?verbose")
        self.assertEqual(r.body.decode(), (
            "[+]ping ok\n[+]log ok\n[+]etcd ok\n"
            "[+]poststarthook/generic-apiserver-start-informers ok\n"
            "[+]poststarthook/start-system-namespaces-controller ok\n"
            "[+]poststarthook/rbac/bootstrap-roles ok\nlivez check passed\n"))

    def test_sub_paths(self):
        for path in ("/readyz/ping", "/readyz/log", "/readyz/etcd", "/readyz/informer-sync",
                     "/readyz/shutdown", "/livez/poststarthook/rbac/bootstrap-roles",
                     "/healthz/etcd"):
            r = self.anonymous.get(path)
            self.assertEqual((r.code, r.body), (200, b"ok"), path)
        # A readiness-only check has no liveness path: the API's 401 for anonymous.
        self.assertEqual(self.anonymous.get("/livez/shutdown").code, 401)

    def test_exclude(self):
        r = self.anonymous.get("/livez?verbose&exclude=etcd&exclude=nosuch")
        self.assertEqual(r.body.decode(), (
            "[+]ping ok\n[+]log ok\n[+]etcd excluded: ok\n"
            "[+]poststarthook/generic-apiserver-start-informers ok\n"
            "[+]poststarthook/start-system-namespaces-controller ok\n"
            "[+]poststarthook/rbac/bootstrap-roles ok\n"
            'warn: some health checks cannot be excluded: no matches for "nosuch"\n'
            "livez check passed\n"))

    def test_failure_withholds_the_reason(self):
        self.stub.components.health.shutdown.initiated = True
        r = self.anonymous.get("/readyz")
        self.assertEqual(r.code, 500)
        self.assertEqual(r.body.decode(), READYZ_VERBOSE.replace(
            "[+]shutdown ok\nreadyz check passed\n",
            "[-]shutdown failed: reason withheld\nreadyz check failed\n"))
        self.assertEqual(r.header("content-type"), "text/plain; charset=utf-8")
        r = self.anonymous.get("/readyz/shutdown")
        self.assertEqual((r.code, r.body),
                         (500, b"internal server error: process is shutting down\n"))
        self.assertEqual(self.anonymous.get("/readyz?exclude=shutdown").code, 200)
        self.assertEqual(self.anonymous.get("/livez").code, 200)

    def test_added_check_may_answer_later(self):
        """The seam other parts use: ``add_check(name, fn)``; a Deferred is waited for."""
        pending = Deferred()
        self.stub.api.health.add_check("etcd-custom", lambda: pending, (health.READYZ,))
        answer = self.anonymous.start("GET", "/readyz/etcd-custom")
        self.assertEqual(answer.answered, [])
        pending.callback("connection refused")
        self.stub.flush()
        r = answer.result()
        self.assertEqual((r.code, r.body),
                         (500, b"internal server error: connection refused\n"))
        with self.assertRaises(ValueError):
            self.stub.api.health.add_check("ping", health.ping)

    def test_checks_added_after_others(self):
        """``add_checks(after=...)``: in their order, after the last anchor of each root
        (the KMS checks follow the storage's, as upstream adds them)."""
        checks = health.standard_checks(self.stub.storage, self.stub.clock).checks
        checks.add_checks([("kms-provider-0", health.ping), ("kms-provider-1", health.ping)],
                          (health.HEALTHZ, health.READYZ), after=health.STORAGE_CHECKS)
        names = {root: [c.name for c in checks.roots[root]] for root in health.ROOTS}
        self.assertEqual(names[health.HEALTHZ][:6], [
            "ping", "log", "etcd", "kms-provider-0", "kms-provider-1",
            "poststarthook/generic-apiserver-start-informers"])
        self.assertEqual(names[health.READYZ][2:6], [
            "etcd", "etcd-readiness", "kms-provider-0", "kms-provider-1"])
        self.assertNotIn("kms-provider-0", names[health.LIVEZ])
        with self.assertRaises(ValueError):
            checks.add_checks([("kms-provider-1", health.ping)], (health.READYZ,))

    def test_roots_are_counted_as_upstream(self):
        self.anonymous.get("/readyz")
        samples, _ = parse(self.stub.client().get("/metrics").body.decode())
        labels = (("code", "200"), ("component", ""), ("dry_run", ""), ("group", ""),
                  ("resource", ""), ("scope", ""), ("subresource", "/readyz"), ("verb", "GET"),
                  ("version", ""))
        self.assertEqual(samples[("apiserver_request_total", labels)], 1.0)


class BootTests(SynchronousTestCase):
    def test_not_ready_until_booted(self):
        """Before the cache has loaded, readiness fails on its checks."""
        stub = StubServer()
        self.addCleanup(stub.stop)
        checks = health.standard_checks(stub.storage, stub.clock)
        stub.api.health = checks.checks
        r = stub.client(user=None).get("/readyz")
        self.assertEqual(r.code, 500)
        self.assertIn(b"[-]informer-sync failed: reason withheld\n", r.body)
        self.assertIn(b"[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n",
                      r.body)
        self.assertTrue(r.body.endswith(b"readyz check failed\n"))
        r = stub.client(user=None).get("/readyz/informer-sync")
        self.assertEqual(r.body, b"internal server error: the watch cache has not loaded\n")
