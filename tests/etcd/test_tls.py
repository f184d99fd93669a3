"""
A replica over a three-member etcd cluster served over TLS as production clusters are
(issue 17's ``--etcd-cafile``, ``--etcd-certfile``, ``--etcd-keyfile``): each member's
certificate names only that member, and members require a client certificate.  The
endpoints mix a DNS name (``localhost``) and addresses.
"""

from __future__ import annotations

import re
import urllib.request

import grpc
from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from tests.e2e.harness import Client, open_watch, start_server
from tests.etcd.cluster import Cluster


def metrics(member) -> str:
    with urllib.request.urlopen(member.url + "/metrics", timeout=5,
                                context=member.context) as reply:
        return reply.read().decode()


def calls_served(member) -> int:
    """How many KV calls the member has answered (its gRPC metrics)."""
    return sum(int(float(n)) for n in re.findall(
        r'^grpc_server_handled_total\{[^}]*grpc_service="etcdserverpb\.KV"[^}]*\} (\S+)$',
        metrics(member), re.M))


def watch_streams(member) -> int:
    """How many watch streams the member serves."""
    found = re.search(r"^etcd_debugging_mvcc_watch_stream_total (\S+)$", metrics(member),
                      re.M)
    return int(float(found.group(1))) if found else 0


class TLSClusterTests(TestCase):
    timeout = 60

    def setUp(self):
        self.cluster = Cluster.start(3, tls=True)
        self.addCleanup(self.cluster.stop)

    def replica(self, members):
        """A replica over ``members`` (the first named ``localhost`` if it is m0)."""
        urls = [f"https://localhost:{m.client_port}" if m is self.cluster.members[0]
                else m.url for m in members]
        files = self.cluster.tls
        return start_server(
            self, "--storage-backend", "etcd3", "--etcd-servers", ",".join(urls),
            "--etcd-cafile", files.ca, "--etcd-certfile", files.cert,
            "--etcd-keyfile", files.key, "--etcd-compaction-interval", "0")

    @inlineCallbacks
    def test_members_reached_each_by_its_own_name(self):
        """
        Calls reach every member, each checked against its own certificate; with a
        member down (a follower: a killed leader costs an election, see test_replicas),
        reads and writes go on through the others.
        """
        server = yield self.replica(self.cluster.members)
        client = Client(self, server.pki_dir, server.port_number)
        before = [calls_served(m) for m in self.cluster.members]
        for n in range(12):
            r = yield client.post("/api/v1/namespaces/default/configmaps",
                                  {"metadata": {"name": f"cm{n}"}})
            self.assertEqual(r.code, 201, r.body)
        served = [calls_served(m) - b for m, b in zip(self.cluster.members, before)]
        self.assertTrue(all(n > 0 for n in served), served)

        down = next(n for n, m in enumerate(self.cluster.members) if not m.is_leader())
        self.cluster.members[down].kill()
        # Until the client has seen the connection go, a write may still be sent to the
        # member and fail (a 504: whether etcd applied it is unknown, so it is not
        # tried again), as upstream's; after, calls go to the others.
        seen = server.storage.client.endpoints[down]
        for _ in range(100):
            if seen.state is not grpc.ChannelConnectivity.READY:
                break
            yield deferLater(reactor, 0.05, lambda: None)
        self.assertIsNot(seen.state, grpc.ChannelConnectivity.READY)
        for n in range(12, 17):
            r = yield client.post("/api/v1/namespaces/default/configmaps",
                                  {"metadata": {"name": f"cm{n}"}})
            self.assertEqual(r.code, 201, r.body)
        listed = yield client.get("/api/v1/namespaces/default/configmaps")
        self.assertEqual(len(listed.json()["items"]), 17)

    @inlineCallbacks
    def test_watch_moves_off_a_member_that_died(self):
        """
        The store's etcd watch, its member killed, opens again on another: a watch on
        replica A goes on receiving what replica B writes, without gap or duplicate.
        """
        a = yield self.replica(self.cluster.members)
        watched = [m for m in self.cluster.members if watch_streams(m)]
        self.assertEqual(len(watched), 1, [watch_streams(m) for m in self.cluster.members])
        [lost] = watched
        b = yield self.replica([m for m in self.cluster.members if m is not lost])
        on_a = Client(self, a.pki_dir, a.port_number)
        on_b = Client(self, b.pki_dir, b.port_number)
        path = "/api/v1/namespaces/default/configmaps"
        response, reader = yield open_watch(on_a, path + "?watch=1")
        self.addCleanup(response._transport.loseConnection)

        @inlineCallbacks
        def create(name):
            # Through an election (should the killed member have led), etcd times
            # writes out: a 504, after which the create is made again.
            for _ in range(50):
                r = yield on_b.post(path, {"metadata": {"name": name}})
                if r.code != 504:
                    break
                yield deferLater(reactor, 0.2, lambda: None)
            self.assertIn(r.code, (201, 409), r.body)

        yield create("before")
        yield reader.wait_for(1)
        lost.kill()
        for n in range(3):
            yield create(f"after{n}")
        events = yield reader.wait_for(4, timeout=20)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                         [("ADDED", "before"), ("ADDED", "after0"), ("ADDED", "after1"),
                          ("ADDED", "after2")])
        self.assertEqual(len(reader.events), 4)
