"""
Issue 32 with stock kubectl against a real server: ``get nodes`` of a Node created
through the API with a Ready condition, ``cordon``, and ``drain`` evicting pods through
``pods/eviction`` under a PodDisruptionBudget kept by the disruption controller: one pod
goes, the second is refused (429) while the budget allows nothing, and drain retries
until it may.  With no kubelet here an evicted pod is deleted at once (it has no
finalizers).

kubectl finds the eviction subresource in ``/api/v1``'s discovery (``group:
policy.platform.io``); not being upstream's ``policy/v1`` it falls back to posting a
``policy/v1beta1`` Eviction, which the server accepts as upstream does.
"""

import json
import time

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater

from tests.e2e.test_clients import KubectlCase

NS = ("-n", "shop")

NODE = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    node-role.platform.io/worker: ""
status:
  conditions:
  - type: Ready
    status: "True"
    reason: KubeletReady
  nodeInfo:
    kubeletVersion: v1.36.0
"""

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: shop
  labels:
    app: web
  ownerReferences:
  - apiVersion: apps/v1
    kind: ReplicaSet
    name: web-5d4f
    uid: 6e1c8a52-3b8f-4c1e-9a55-0f0e1d2c3b4a
    controller: true
spec:
  nodeName: {node}
  containers:
  - name: web
    image: registry.example/web:1.0
"""

PDB = """
apiVersion: policy.platform.io/v1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: shop
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: web
"""

READY = json.dumps({"status": {"phase": "Running", "conditions": [
    {"type": "Ready", "status": "True"}]}})


class DrainTests(KubectlCase):
    timeout = 240

    @inlineCallbacks
    def succeeds(self, *args, stdin=None):
        r = yield self.run_kubectl(*args, stdin=stdin)
        self.assertEqual(r.returncode, 0, f"kubectl {' '.join(args)}: {r.stderr}")
        return r.stdout

    @inlineCallbacks
    def ready_pod(self, name: str, node: str):
        yield self.succeeds("create", "-f", "-", stdin=POD.format(name=name, node=node))
        yield self.succeeds(*NS, "patch", "pod", name, "--subresource=status",
                            "--type=merge", "-p", READY)

    @inlineCallbacks
    def budget(self) -> dict:
        out = yield self.succeeds(*NS, "get", "pdb", "web", "-o", "json")
        return json.loads(out)["status"]

    @inlineCallbacks
    def allowed(self, count: int, timeout: float = 30.0):
        """Until the controller has made the budget allow ``count`` disruptions."""
        deadline = time.monotonic() + timeout
        while True:
            status = yield self.budget()
            if status.get("disruptionsAllowed") == count and status.get("conditions"):
                return status
            self.assertLess(time.monotonic(), deadline, f"budget still {status}")
            yield deferLater(reactor, 0.2, lambda: None)

    @inlineCallbacks
    def pods(self) -> list:
        out = yield self.succeeds(*NS, "get", "pods", "-o", "json")
        return sorted(p["metadata"]["name"] for p in json.loads(out)["items"])

    @inlineCallbacks
    def test_get_nodes_cordon_drain(self):
        for name in ("n1", "n2"):
            yield self.succeeds("create", "-f", "-", stdin=NODE.format(name=name))
        out = yield self.succeeds("get", "nodes")
        rows = [line.split() for line in out.splitlines()]
        self.assertEqual(rows[0], ["NAME", "STATUS", "ROLES", "AGE", "VERSION"])
        self.assertEqual([(r[0], r[1], r[2], r[4]) for r in rows[1:]],
                         [("n1", "Ready", "worker", "v1.36.0"),
                          ("n2", "Ready", "worker", "v1.36.0")])

        yield self.succeeds("create", "namespace", "shop")
        yield self.succeeds("create", "-f", "-", stdin=PDB)
        for name in ("web-a", "web-b"):
            yield self.ready_pod(name, "n1")
        yield self.allowed(1)
        status = yield self.budget()
        self.assertEqual((status["currentHealthy"], status["desiredHealthy"],
                          status["expectedPods"], status["observedGeneration"]), (2, 1, 2, 1))
        self.assertEqual([(c["type"], c["status"], c["reason"]) for c in status["conditions"]],
                         [("DisruptionAllowed", "True", "SufficientPods")])
        out = yield self.succeeds(*NS, "get", "pdb")
        self.assertEqual([line.split()[:4] for line in out.splitlines()],
                         [["NAME", "MIN", "AVAILABLE", "MAX"], ["web", "1", "N/A", "1"]])

        out = yield self.succeeds("cordon", "n1")
        self.assertEqual(out, "node/n1 cordoned\n")
        out = yield self.succeeds("get", "nodes", "n1", "--no-headers")
        self.assertEqual(out.split()[1], "Ready,SchedulingDisabled")
        out = yield self.succeeds("get", "nodes", "--field-selector", "spec.unschedulable=false",
                                  "-o", "name")
        self.assertEqual(out, "node/n2\n")

        # A server-side dry run evicts nothing and spends nothing.
        r = yield self.run_kubectl("drain", "n1", "--ignore-daemonsets", "--dry-run=server")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("node/n1 drained (server dry run)", r.stdout)
        self.assertEqual((yield self.pods()), ["web-a", "web-b"])
        self.assertEqual((yield self.budget())["disruptionsAllowed"], 1)

        # One pod may go; the second would leave fewer than minAvailable: 429, retried
        # every 5 s until drain's timeout.
        r = yield self.run_kubectl("drain", "n1", "--ignore-daemonsets",
                                   "--delete-emptydir-data", "--timeout=12s")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("Cannot evict pod as it would violate the pod's disruption budget.",
                      r.stderr)
        self.assertIn("(will retry after 5s)", r.stderr)
        left = yield self.pods()
        self.assertEqual(len(left), 1, left)
        self.assertIn(f"pod/{'web-a' if left == ['web-b'] else 'web-b'} evicted", r.stdout)
        status = yield self.budget()
        self.assertEqual((status["disruptionsAllowed"], status["currentHealthy"]), (0, 1))

        # A replacement becomes ready on the other node: the budget allows one again and
        # drain finishes.
        yield self.ready_pod("web-c", "n2")
        yield self.allowed(1)
        r = yield self.run_kubectl("drain", "n1", "--ignore-daemonsets",
                                   "--delete-emptydir-data", "--timeout=60s")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"pod/{left[0]} evicted", r.stdout)
        self.assertIn("node/n1 drained", r.stdout)
        remaining = yield self.pods()
        self.assertEqual(remaining, ["web-c"])
        yield self.allowed(0)
        out = yield self.succeeds("uncordon", "n1")
        self.assertEqual(out, "node/n1 uncordoned\n")
        out = yield self.succeeds("get", "nodes", "n1", "--no-headers")
        self.assertEqual(out.split()[1], "Ready")
