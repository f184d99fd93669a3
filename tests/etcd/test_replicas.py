"""
Two platformd replicas over one three-member etcd cluster (issue 17): what is written
through one is read, listed, paged and watched through the other, with the same
resource versions; and the faults: a member down, etcd unreachable.

One cluster for the module (about a second to start, stopped at exit; trial has no
class fixtures); each test gets its own ``--etcd-prefix`` so the replicas of one test see
none of another's objects, and a test that stops members starts them again.
"""

from __future__ import annotations

import atexit
import itertools

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from tests.e2e.harness import Client, open_watch, start_server
from tests.etcd.cluster import Cluster

_prefixes = itertools.count()
_shared: list = []


def shared_cluster() -> Cluster:
    """The module's three-member cluster, started on first use."""
    if not _shared:
        _shared.append(Cluster.start(3))
        atexit.register(_shared[0].stop)
    return _shared[0]


class ReplicasTestCase(TestCase):
    timeout = 60

    def setUp(self):
        self.cluster = shared_cluster()

    @inlineCallbacks
    def replicas(self, count: int = 2, *args):
        """``count`` servers over the cluster under a prefix of this test's, and clients."""
        prefix = f"/registry-{next(_prefixes)}"
        servers = []
        for _ in range(count):
            server = yield start_server(
                self, "--storage-backend", "etcd3", "--etcd-servers",
                ",".join(self.cluster.urls), "--etcd-prefix", prefix,
                "--etcd-compaction-interval", "0", *args)
            servers.append(server)
        return [Client(self, s.pki_dir, s.port_number) for s in servers]


class TwoReplicaTests(ReplicasTestCase):
    @inlineCallbacks
    def test_write_on_one_read_on_other(self):
        """A write on A is at once in a GET and a consistent LIST on B, same version."""
        a, b = yield self.replicas()
        created = yield a.post("/api/v1/namespaces/default/configmaps",
                               {"metadata": {"name": "one"}, "data": {"k": "v"}})
        self.assertEqual(created.code, 201, created.body)
        rv = created.json()["metadata"]["resourceVersion"]
        listed = yield b.get("/api/v1/namespaces/default/configmaps")
        self.assertEqual(listed.code, 200)
        [item] = listed.json()["items"]
        self.assertEqual((item["metadata"]["name"], item["metadata"]["resourceVersion"]),
                         ("one", rv))
        self.assertGreaterEqual(int(listed.json()["metadata"]["resourceVersion"]), int(rv))
        got = yield b.get("/api/v1/namespaces/default/configmaps/one?resourceVersion=" + rv)
        self.assertEqual(got.json()["data"], {"k": "v"})

    @inlineCallbacks
    def test_continue_token_across_replicas(self):
        """A continue token and resourceVersion from A page on through B."""
        a, b = yield self.replicas()
        for n in range(3):
            r = yield a.post("/api/v1/namespaces/default/configmaps",
                             {"metadata": {"name": f"cm{n}"}})
            self.assertEqual(r.code, 201, r.body)
        first = yield a.get("/api/v1/namespaces/default/configmaps?limit=2")
        meta = first.json()["metadata"]
        self.assertEqual([i["metadata"]["name"] for i in first.json()["items"]], ["cm0", "cm1"])
        rest = yield b.get("/api/v1/namespaces/default/configmaps?limit=2&continue="
                           + meta["continue"])
        self.assertEqual(rest.code, 200, rest.body)
        self.assertEqual([i["metadata"]["name"] for i in rest.json()["items"]], ["cm2"])
        self.assertEqual(rest.json()["metadata"]["resourceVersion"], meta["resourceVersion"])
        exact = yield b.get("/api/v1/namespaces/default/configmaps?resourceVersionMatch=Exact"
                            "&resourceVersion=" + meta["resourceVersion"])
        self.assertEqual(len(exact.json()["items"]), 3)

    @inlineCallbacks
    def test_watch_resumed_on_other_replica(self):
        """A watch from A's resourceVersion, resumed on B, gets every later change once."""
        a, b = yield self.replicas()
        r = yield a.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "w0"}})
        rv = r.json()["metadata"]["resourceVersion"]
        # Changes after rv, made while no watch is open.
        yield a.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "w1"}})
        yield a.delete("/api/v1/namespaces/default/configmaps/w0")
        response, reader = yield open_watch(
            b, f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}")
        self.assertEqual(response.code, 200)
        yield a.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "w2"}})
        yield reader.wait_for(3)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in reader.events],
                         [("ADDED", "w1"), ("DELETED", "w0"), ("ADDED", "w2")])
        response._transport.loseConnection()


class FaultTests(ReplicasTestCase):
    @inlineCallbacks
    def test_one_member_down(self):
        """
        With a follower of three killed, reads and writes go on; it rejoins.  (A killed
        leader costs an election, during which etcd answers "request timed out" to the
        writes it was given: those answer 504, as upstream's.)
        """
        [a] = yield self.replicas(1)
        member = next(m for m in self.cluster.members if not m.is_leader())
        member.kill()
        try:
            for n in range(5):
                r = yield a.post("/api/v1/namespaces/default/configmaps",
                                 {"metadata": {"name": f"down{n}"}})
                self.assertEqual(r.code, 201, r.body)
            listed = yield a.get("/api/v1/namespaces/default/configmaps")
            self.assertEqual(len(listed.json()["items"]), 5)
        finally:
            member.start()
            member.wait_ready()

    @inlineCallbacks
    def readiness(self, client, code: int):
        """Poll ``/readyz/etcd-readiness`` until it answers ``code`` (the watch's
        connection changes a moment after etcd's); the last answer."""
        for _ in range(100):
            r = yield client.get("/readyz/etcd-readiness")
            if r.code == code:
                break
            yield deferLater(reactor, 0.1, lambda: None)
        return r

    @inlineCallbacks
    def test_etcd_unreachable(self):
        """
        With no member up, a write answers 504 within the request timeout (upstream's
        finisher's Timeout, no Retry-After), /readyz fails its etcd-readiness check, a
        watch stays open, and all work again once etcd is back.
        """
        [a] = yield self.replicas(1, "--request-timeout", "2s")
        ready = yield a.get("/readyz/etcd-readiness")
        self.assertEqual((ready.code, ready.body), (200, b"ok"))
        response, reader = yield open_watch(
            a, "/api/v1/namespaces/default/configmaps?watch=1")
        for member in self.cluster.members:
            member.kill()
        try:
            ready = yield self.readiness(a, 500)
            self.assertEqual((ready.code, ready.body),
                             (500, b"internal server error: etcd watch is not connected\n"))
            whole = yield a.get("/readyz")
            self.assertEqual(whole.code, 500)
            self.assertIn(b"[-]etcd-readiness failed: reason withheld\n", whole.body)
            started = reactor.seconds()
            r = yield a.post("/api/v1/namespaces/default/configmaps",
                             {"metadata": {"name": "lost"}})
            self.assertLess(reactor.seconds() - started, 10)
            # The request deadline (api/deadline.py) and the etcd call's are the same:
            # whichever fires first, upstream's 504 Timeout.
            self.assertEqual(r.code, 504, r.body)
            self.assertEqual(r.json()["reason"], "Timeout")
            self.assertTrue(r.json()["message"].startswith(
                "Timeout: request did not complete within"), r.json()["message"])
            self.assertEqual(r.headers_named("Retry-After"), [])
        finally:
            for member in self.cluster.members:
                member.start()
            for member in self.cluster.members:
                member.wait_ready()
        self.assertFalse(reader.finished.called)
        for _ in range(100):  # the channel reconnects with backoff
            r = yield a.post("/api/v1/namespaces/default/configmaps",
                             {"metadata": {"name": "back"}})
            if r.code == 201:
                break
            yield deferLater(reactor, 0.1, lambda: None)
        self.assertEqual(r.code, 201, r.body)
        ready = yield self.readiness(a, 200)
        self.assertEqual((ready.code, ready.body), (200, b"ok"))
        yield reader.wait_for(1)
        self.assertEqual(reader.events[-1]["object"]["metadata"]["name"], "back")
        response._transport.loseConnection()


class RefusalTests(ReplicasTestCase):
    @inlineCallbacks
    def test_value_over_etcd_request_limit(self):
        """
        An object etcd refuses to store (over its default --max-request-bytes, 1.5 MiB,
        yet under the API's 3 MiB body limit) is answered as upstream answers clientv3's
        error: 500, no reason, etcd's text; nothing is stored, on create or on update.
        """
        [client] = yield self.replicas(1)
        refusal = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "etcdserver: request is too large", "code": 500}
        path = "/api/v1/namespaces/default/configmaps"
        big = "x" * 1_700_000
        r = yield client.post(path, {"metadata": {"name": "big"}, "data": {"k": big}})
        self.assertEqual((r.code, r.json()), (500, refusal))
        r = yield client.get(path + "/big")
        self.assertEqual(r.code, 404)
        r = yield client.post(path, {"metadata": {"name": "big"}, "data": {"k": "small"}})
        self.assertEqual(r.code, 201, r.body)
        r = yield client.put(path + "/big", {"metadata": {"name": "big"}, "data": {"k": big}})
        self.assertEqual((r.code, r.json()), (500, refusal))
        r = yield client.get(path + "/big")
        self.assertEqual(r.json()["data"], {"k": "small"})
