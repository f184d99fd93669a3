"""
The pods socket inside a real platformd: pods written through the HTTP API reach
ListPods and WatchPods of the node they are bound to.
"""

from __future__ import annotations

import os

from twisted.internet import defer
from twisted.trial.unittest import TestCase

from tests.e2e.harness import Client as HTTPClient, start_server
from tests.podinfo.support import Client, pod, socket_dir

PODS = "/api/v1/namespaces/default/pods"


class PodsAPIEndToEndTests(TestCase):
    @defer.inlineCallbacks
    def setUp(self):
        self.path = os.path.join(socket_dir(self), "pods", "nodeagent.sock")
        self.server = yield start_server(self, "--feature-gates", "PodsAPI=true",
                                         "--pods-socket", self.path, "--node-name", "node-a")
        self.http = HTTPClient(self, self.server.pki_dir, self.server.port_number)
        self.pods = Client(self, self.path)

    @defer.inlineCallbacks
    def test_http_writes_reach_watch(self):
        """A pod created, then its status updated, over HTTP reaches a WatchPods stream."""
        watch = self.pods.watch()
        self.addCleanup(watch.cancel)
        body = pod("web")
        del body["metadata"]["uid"], body["metadata"]["creationTimestamp"], body["status"]
        created = yield self.http.post(PODS, body)
        self.assertEqual(created.code, 201, created.body)
        [added] = yield watch.take(1)
        self.assertEqual(added.pod.metadata.name, "web")
        self.assertEqual(added.pod.metadata.uid, created.json()["metadata"]["uid"])
        self.assertEqual(added.pod.status.phase, "Pending")
        current = created.json()
        current["status"] = {"phase": "Running", "podIPs": [{"ip": "10.1.0.7"}],
                             "podIP": "10.1.0.7", "startTime": "2024-05-01T10:00:00Z"}
        updated = yield self.http.put(f"{PODS}/web/status", current)
        self.assertEqual(updated.code, 200, updated.body)
        [running] = yield watch.take(1)
        self.assertEqual(running.pod.status.phase, "Running")
        self.assertEqual([ip.ip for ip in running.pod.status.podIPs], ["10.1.0.7"])
        self.assertEqual(running.pod.status.startTime.seconds, 1714557600)
        got = yield self.pods.get(added.pod.metadata.uid, "status.phase")
        self.assertEqual(got.pod.status.phase, "Running")
        self.assertFalse(got.pod.HasField("metadata"))

    @defer.inlineCallbacks
    def test_only_this_nodes_pods(self):
        """ListPods holds pods bound to --node-name, not other nodes' or unbound ones."""
        for name, node in (("mine", "node-a"), ("theirs", "node-b"), ("unbound", None)):
            body = pod(name, node)
            del body["metadata"]["uid"], body["status"]
            if node is None:
                del body["spec"]["nodeName"]
            response = yield self.http.post(PODS, body)
            self.assertEqual(response.code, 201, response.body)
        listed = yield self.pods.list()
        self.assertEqual([p.metadata.name for p in listed.pods], ["mine"])
