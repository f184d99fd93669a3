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

from tests.e2e.harness import Client, start_server
from tests.etcd.cluster import Cluster


def calls_served(member) -> int:
    """How many KV calls the member has answered (its gRPC metrics)."""
    with urllib.request.urlopen(member.url + "/metrics", timeout=5,
                                context=member.context) as reply:
        text = reply.read().decode()
    return sum(int(float(n)) for n in re.findall(
        r'^grpc_server_handled_total\{[^}]*grpc_service="etcdserverpb\.KV"[^}]*\} (\S+)$',
        text, re.M))


class TLSClusterTests(TestCase):
    timeout = 60

    def setUp(self):
        self.cluster = Cluster.start(3, tls=True)
        self.addCleanup(self.cluster.stop)

    @inlineCallbacks
    def test_members_reached_each_by_its_own_name(self):
        """
        Calls reach every member, each checked against its own certificate; with a
        member down (a follower: a killed leader costs an election, see test_replicas),
        reads and writes go on through the others.
        """
        first, *others = self.cluster.members
        urls = [f"https://localhost:{first.client_port}"] + [m.url for m in others]
        files = self.cluster.tls
        server = yield start_server(
            self, "--storage-backend", "etcd3", "--etcd-servers", ",".join(urls),
            "--etcd-cafile", files.ca, "--etcd-certfile", files.cert,
            "--etcd-keyfile", files.key, "--etcd-compaction-interval", "0")
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
