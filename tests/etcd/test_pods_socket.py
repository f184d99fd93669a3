"""
The pods socket over etcd (spec 4.10 item 4: the node's latest knowledge "stays
available when the node has lost contact with the control plane"): with every etcd
member down, ListPods and GetPod answer from the watch cache and a WatchPods stream stays
open, then carries the next change once etcd is back.
"""

from __future__ import annotations

import os

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from tests.e2e.harness import Client as HTTPClient, start_server
from tests.etcd.cluster import Cluster
from tests.podinfo.support import Client, pod, socket_dir

PODS = "/api/v1/namespaces/default/pods"


def new_pod(name: str) -> dict:
    body = pod(name)
    del body["metadata"]["uid"], body["metadata"]["creationTimestamp"], body["status"]
    return body


class PodsSocketOutageTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def test_serves_last_knowledge_while_etcd_is_down(self):
        cluster = Cluster.start(1)
        self.addCleanup(cluster.stop)
        path = os.path.join(socket_dir(self), "pods", "nodeagent.sock")
        server = yield start_server(
            self, "--storage-backend", "etcd3", "--etcd-servers", ",".join(cluster.urls),
            "--etcd-compaction-interval", "0", "--request-timeout", "2s",
            "--feature-gates", "PodsAPI=true", "--pods-socket", path, "--node-name", "node-a")
        http = HTTPClient(self, server.pki_dir, server.port_number)
        pods = Client(self, path)
        created = yield http.post(PODS, new_pod("web"))
        self.assertEqual(created.code, 201, created.body)
        uid = created.json()["metadata"]["uid"]
        watch = pods.watch()
        self.addCleanup(watch.cancel)
        [initial] = yield watch.take(1)
        self.assertEqual(initial.pod.metadata.name, "web")

        [member] = cluster.members
        member.kill()
        # The server knows etcd is gone (its watch broke) before the socket is asked.
        for _ in range(100):
            if not server.components.storage.connected:
                break
            yield deferLater(reactor, 0.05, lambda: None)
        self.assertFalse(server.components.storage.connected)
        listed = yield pods.list()
        self.assertEqual([p.metadata.name for p in listed.pods], ["web"])
        got = yield pods.get(uid)
        self.assertEqual(got.pod.metadata.name, "web")
        failed = yield http.post(PODS, new_pod("lost"))
        self.assertEqual(failed.code, 504, failed.body)

        member.start()
        member.wait_ready()
        for _ in range(100):  # the channel reconnects with backoff
            added = yield http.post(PODS, new_pod("api"))
            if added.code == 201:
                break
            yield deferLater(reactor, 0.1, lambda: None)
        self.assertEqual(added.code, 201, added.body)
        [after] = yield watch.take(1)
        self.assertEqual(after.pod.metadata.name, "api")
