"""
Leases and Events with real clients against a real server (issue 32):

- leader election: the kubernetes Python client's ``kubernetes.leaderelection`` with a
  ``LeaseLock``, in two processes: one leader at a time, and the second takes over once
  the first stops renewing (killed), read off the Lease itself;
- ``kubectl describe pod`` lists the pod's Events (kubectl's events search: a field
  selector on the involved object's name, namespace and uid);
- ``kubectl get events -w`` streams an event created after it started.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import sys
import time

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater
from twisted.trial.unittest import SkipTest

from tests.e2e.harness import ServerTestCase
from tests.e2e.streams import spawn
from tests.e2e.test_clients import kubectl_binary

LEASES = "/apis/coordination.platform.io/v1/namespaces/default/leases"
EVENTS = "/api/v1/namespaces/default/events"

#: A candidate: ``kubernetes.leaderelection`` unchanged.  Its typed client names
#: upstream's group (coordination.k8s.io); platformd serves coordination.platform.io, so
#: the client's paths are renamed on the way out (as every platform client does).
CANDIDATE = r'''
import logging, sys, time
from kubernetes import client, config
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

kubeconfig, identity = sys.argv[1:3]
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
api_client = config.new_client_from_config(config_file=kubeconfig)
param_serialize = api_client.param_serialize


def renamed(method, resource_path, *args, **kwargs):
    return param_serialize(method, resource_path.replace("/apis/coordination.k8s.io/",
                                                         "/apis/coordination.platform.io/"),
                           *args, **kwargs)


api_client.param_serialize = renamed
lock = LeaseLock("demo", "default", identity)
lock.api_instance = client.CoordinationV1Api(api_client)


def started():
    print("LEADING", identity, time.time(), flush=True)
    while True:
        time.sleep(1)


def stopped():
    print("STOPPED", identity, time.time(), flush=True)


leaderelection.LeaderElection(electionconfig.Config(lock, 4, 3, 1, started, stopped)).run()
'''


def sleep(seconds):
    return deferLater(reactor, seconds, lambda: None)


class _Case(ServerTestCase):
    timeout = 120

    def spawn(self, argv, env=None):
        return spawn(self, argv, env)

    def kubectl(self, *args):
        kubectl = kubectl_binary()
        if kubectl is None:
            raise SkipTest("kubectl not installed")
        home = os.path.abspath(self.mktemp())
        os.makedirs(home)
        env = dict(os.environ, HOME=home, KUBECACHEDIR=os.path.join(home, "cache"))
        env.pop("KUBECONFIG", None)
        kubeconfig = os.path.join(self.server.data_dir, "admin.kubeconfig")
        return [kubectl, "--kubeconfig", kubeconfig, "--request-timeout=20s", *args], env


class LeaderElectionTests(_Case):
    def setUp(self):
        if importlib.util.find_spec("kubernetes") is None:
            raise SkipTest("kubernetes client not installed")
        return super().setUp()

    @inlineCallbacks
    def test_one_leader_then_handover(self):
        script = os.path.abspath(self.mktemp()) + ".py"
        with open(script, "w") as f:
            f.write(CANDIDATE)
        kubeconfig = os.path.join(self.server.data_dir, "admin.kubeconfig")
        holders = []

        def candidate(identity):
            return self.spawn([sys.executable, script, kubeconfig, identity])

        first, first_out = candidate("first")
        yield first_out.wait_for("LEADING first", 30)
        second, second_out = candidate("second")
        # The second candidate runs while the first renews: it must not lead.
        for _ in range(6):
            yield sleep(1)
            r = yield self.client.get(f"{LEASES}/demo")
            holders.append(r.json()["spec"]["holderIdentity"])
        self.assertNotIn(b"LEADING", second_out.out, second_out.err.decode()[-2000:])
        self.assertEqual(set(holders), {"first"})
        lease = (yield self.client.get(f"{LEASES}/demo")).json()
        self.assertEqual(lease["spec"]["leaseDurationSeconds"], 4)
        renew = lease["spec"]["renewTime"]
        self.assertRegex(renew, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        # The first stops renewing (killed: no release); the second takes over after
        # the lease duration.
        killed_at = time.time()
        self.assertFalse(first_out.ended.called, first_out.err.decode()[-3000:])
        first.signalProcess("KILL")
        yield first_out.ended
        yield second_out.wait_for("LEADING second", 30)
        for _ in range(50):  # the line may arrive in pieces
            line = re.search(r"LEADING second (\S+)\n", second_out.out.decode())
            if line:
                break
            yield sleep(0.1)
        self.assertIsNotNone(line, second_out.out.decode())
        took_over = float(line.group(1))
        self.assertGreater(took_over - killed_at, 3.0)  # not before the lease ran out
        lease = (yield self.client.get(f"{LEASES}/demo")).json()
        self.assertEqual(lease["spec"]["holderIdentity"], "second")
        self.assertIsNotNone(lease["spec"].get("acquireTime"))


class KubectlEventTests(_Case):
    @inlineCallbacks
    def test_describe_pod_lists_events(self):
        r = yield self.client.post("/api/v1/namespaces/default/pods", {
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}})
        self.assertEqual(r.code, 201, r.body)
        pod = r.json()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        r = yield self.client.post(EVENTS, {
            "metadata": {"name": "web.1"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web",
                               "uid": pod["metadata"]["uid"], "apiVersion": "v1"},
            "reason": "Pulling", "message": "Pulling image \"nginx:1.27\"", "type": "Normal",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1})
        self.assertEqual(r.code, 201, r.body)
        # An event about another pod is not listed.
        yield self.client.post(EVENTS, {
            "metadata": {"name": "other.1"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "other"},
            "reason": "Elsewhere", "message": "not this pod", "type": "Warning"})
        argv, env = self.kubectl("describe", "pod", "web")
        process, output = self.spawn(argv, env)
        yield output.ended
        text = output.out.decode()
        self.assertIn("Events:", text, output.err.decode())
        events = text.split("Events:", 1)[1]
        self.assertIn("Pulling", events)
        self.assertIn('Pulling image "nginx:1.27"', events)
        self.assertIn("kubelet", events)
        self.assertNotIn("Elsewhere", events)

    @inlineCallbacks
    def test_get_events_watch(self):
        yield self.client.post(EVENTS, {
            "metadata": {"name": "before"}, "involvedObject": {"namespace": "default"},
            "reason": "Before", "message": "first", "type": "Normal"})
        argv, env = self.kubectl("get", "events", "-w")
        process, output = self.spawn(argv, env)
        yield output.wait_for("Before", 30)
        yield sleep(1)
        r = yield self.client.post("/apis/events.platform.io/v1/namespaces/default/events", {
            "metadata": {"name": "after"},
            "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
            "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
            "action": "Check", "reason": "StreamedReason", "note": "streamed note",
            "type": "Warning", "regarding": {"kind": "Pod", "name": "p",
                                             "namespace": "default"}})
        self.assertEqual(r.code, 201, r.body)
        yield output.wait_for("StreamedReason", 30)
        process.signalProcess(signal.SIGTERM)
        yield output.ended
        text = output.out.decode()
        self.assertIn("LAST SEEN", text)
        line = [l for l in text.splitlines() if "StreamedReason" in l][0]
        self.assertIn("Warning", line)
        self.assertIn("pod/p", line)
        self.assertIn("streamed note", line)


class EventTTLTests(ServerTestCase):
    """``--event-ttl`` over a real daemon (SQLite here; etcd in tests/etcd): an event goes
    that long after its last write, and one stored before a restart goes too."""

    server_args = ("--event-ttl", "4s")

    @inlineCallbacks
    def test_expires_and_survives_restart(self):
        from tests.e2e.harness import Client, start_server
        body = {"metadata": {"name": "short"}, "involvedObject": {"namespace": "default"},
                "reason": "R", "message": "m", "type": "Normal"}
        r = yield self.client.post(EVENTS, body)
        self.assertEqual(r.code, 201, r.body)
        r = yield self.client.post("/api/v1/namespaces/default/configmaps",
                                   {"metadata": {"name": "stays"}})
        self.assertEqual(r.code, 201, r.body)
        for _ in range(60):
            r = yield self.client.get(f"{EVENTS}/short")
            if r.code == 404:
                break
            yield sleep(0.1)
        self.assertEqual(r.code, 404)
        r = yield self.client.get("/api/v1/namespaces/default/configmaps/stays")
        self.assertEqual(r.code, 200)
        # Stored, then the server stops before the TTL; the next one removes it.
        r = yield self.client.post(EVENTS, dict(body, metadata={"name": "kept"}))
        self.assertEqual(r.code, 201, r.body)
        written = time.time()
        data_dir = self.server.data_dir
        yield self.server.stopService()
        server = yield start_server(self, *self.server_args, data_dir=data_dir)
        client = Client(self, server.pki_dir, server.port_number)
        r = yield client.get(f"{EVENTS}/kept")
        if time.time() - written < 3:  # a quick restart: the event is still there
            self.assertEqual(r.code, 200)
        for _ in range(60):
            r = yield client.get(f"{EVENTS}/kept")
            if r.code == 404:
                break
            yield sleep(0.1)
        self.assertEqual(r.code, 404)


class KubectlLeaseTests(_Case):
    @inlineCallbacks
    def test_get_leases_and_new_events(self):
        """``kubectl get leases`` prints upstream's columns; the new Events version is
        reachable by its qualified name and shows the same table."""
        r = yield self.client.put(f"{LEASES}/lock", {
            "metadata": {"name": "lock"},
            "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 40,
                     "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}})
        self.assertEqual(r.code, 201, r.body)
        yield self.client.post(EVENTS, {
            "metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p",
                                                          "namespace": "default"},
            "reason": "Seen", "message": "both versions", "type": "Normal"})
        for args, expected in ((("get", "leases"), ["NAME", "HOLDER", "AGE"]),
                               (("get", "events.events.platform.io"),
                                ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"])):
            argv, env = self.kubectl(*args)
            process, output = self.spawn(argv, env)
            yield output.ended
            lines = output.out.decode().splitlines()
            self.assertTrue(lines, output.err.decode())
            header = lines[0]
            positions = [header.index(column) for column in expected]
            self.assertEqual(positions, sorted(positions), header)
            if args[1] == "leases":
                self.assertEqual(lines[1].split()[:2], ["lock", "node-a"])
            else:
                self.assertIn("both versions", lines[1])
                self.assertIn("pod/p", lines[1])
