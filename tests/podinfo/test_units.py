"""The pieces of the pods API without sockets: queue, node index, encoding, masks."""

from __future__ import annotations

import threading

import grpc
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs.protoconvert import ConversionError, from_message, to_message
from platformd.podinfo import fieldmask
from platformd.podinfo.encoding import PodVersion, field1
from platformd.podinfo.errors import PodsError
from platformd.podinfo.nodepods import NodePods
from platformd.podinfo.watchqueue import WatchQueue
from platformd.protos.platform.api.core.v1.generated_pb2 import Pod
from platformd.protos.platform.nodeagent.pods.v1alpha1 import api_pb2

from tests.podinfo.support import PodFeed, pod

FULL_POD = {
    "metadata": {
        "name": "p", "namespace": "default", "uid": "u1", "resourceVersion": "5",
        "generation": 0, "creationTimestamp": "2024-05-01T10:00:00Z", "labels": {"a": "b"},
        "finalizers": ["x/y"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "9",
                             "controller": False}],
        "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                           "time": "2024-05-01T10:00:00Z", "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
    "spec": {"nodeName": "node-a", "restartPolicy": "Always", "hostNetwork": False,
             "terminationGracePeriodSeconds": 30, "nodeSelector": {"disk": "ssd"},
             "containers": [{"name": "c", "image": "nginx", "command": ["run"],
                             "resources": {"limits": {"cpu": "100m"},
                                           "requests": {"memory": "1Gi"}},
                             "ports": [{"containerPort": 80, "protocol": "TCP"}],
                             "env": [{"name": "A", "value": ""}]}],
             "imagePullSecrets": [{"name": "reg"}]},
    "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}],
               "startTime": "2024-05-01T10:00:01Z",
               "conditions": [{"type": "Ready", "status": "True",
                               "lastTransitionTime": "1970-01-01T00:00:00Z"}],
               "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0,
                                      "image": "nginx", "imageID": "x",
                                      "state": {"running": {"startedAt": "2024-05-01T10:00:02Z"}}}]},
}


class ConversionTests(SynchronousTestCase):
    def test_round_trip(self):
        """A pod survives dict -> Pod -> dict, explicit zero values and the epoch included."""
        message = to_message(FULL_POD, Pod)
        self.assertEqual(from_message(message), FULL_POD)
        self.assertTrue(message.spec.HasField("hostNetwork"))
        self.assertEqual(message.metadata.creationTimestamp.seconds, 1714557600)
        self.assertEqual(message.spec.containers[0].resources.limits["cpu"].string, "100m")
        self.assertEqual(message.metadata.managedFields[0].fieldsV1.Raw,
                         b'{"f:spec":{"f:containers":{}}}')

    def test_unknown_fields_dropped(self):
        """Fields the message does not model are dropped; nulls mean absent."""
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": None},
               "status": {"containerStatuses": [{"name": "c", "state": {"weird": {}}}]}}
        self.assertEqual(from_message(to_message(obj, Pod)),
                         {"metadata": {"name": "p"},
                          "status": {"containerStatuses": [{"name": "c", "state": {}}]}})

    def test_fractional_time(self):
        """Nanos are kept in Protobuf and dropped in JSON, as upstream's Time does."""
        message = to_message({"metadata": {"creationTimestamp": "2024-05-01T10:00:00.5+01:00"}}, Pod)
        self.assertEqual((message.metadata.creationTimestamp.seconds,
                          message.metadata.creationTimestamp.nanos), (1714554000, 500000000))
        self.assertEqual(from_message(message)["metadata"]["creationTimestamp"],
                         "2024-05-01T09:00:00Z")

    def test_bad_time(self):
        """A time that is not RFC 3339 is a ConversionError naming it."""
        e = self.assertRaises(ConversionError, to_message,
                              {"metadata": {"creationTimestamp": "yesterday"}}, Pod)
        self.assertIn("yesterday", str(e))


class EncodingTests(SynchronousTestCase):
    def test_field1_equals_generated_serialiser(self):
        """Responses assembled from cached bytes equal what protobuf itself writes."""
        versions = [PodVersion(FULL_POD), PodVersion(pod("a")), PodVersion({})]
        pods = [v.message for v in versions]
        self.assertEqual(field1(v.encoded(None) for v in versions),
                         api_pb2.PodListResponse(pods=pods).SerializeToString())
        self.assertEqual(field1([versions[0].encoded(None)]),
                         api_pb2.PodWatchResponse(pod=pods[0]).SerializeToString())
        self.assertEqual(field1([]), api_pb2.PodListResponse().SerializeToString())

    def test_encoded_once(self):
        """A version is converted and serialised once, however often it is sent."""
        version = PodVersion(pod("a"))
        self.assertIs(version.encoded(None), version.encoded(None))
        self.assertIs(version.message, version.message)


class FieldMaskTests(SynchronousTestCase):
    def test_absent(self):
        """Without the metadata key there is no mask."""
        self.assertIsNone(fieldmask.from_metadata((("other", "x"),)))
        self.assertIsNone(fieldmask.from_metadata(None))

    def test_paths_joined(self):
        """Several values of the key are joined; spaces around paths are ignored."""
        mask = fieldmask.from_metadata(((fieldmask.METADATA_KEY, "status.phase"),
                                        (fieldmask.METADATA_KEY, " metadata.labels ")))
        self.assertEqual(list(mask.paths), ["status.phase", "metadata.labels"])
        restricted = fieldmask.restrict(mask, to_message(FULL_POD, Pod))
        self.assertEqual(from_message(restricted),
                         {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Running"}})

    def test_invalid(self):
        """An unknown path is INVALID_ARGUMENT with a message naming the key."""
        e = self.assertRaises(PodsError, fieldmask.from_metadata,
                              ((fieldmask.METADATA_KEY, "status.pod_ips"),))
        self.assertEqual(e.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn(fieldmask.METADATA_KEY, e.message)


class WatchQueueTests(SynchronousTestCase):
    def test_overflow_ends(self):
        """A queue full to its limit ends with RESOURCE_EXHAUSTED and drops its items."""
        queue = WatchQueue(limit=2)
        self.assertTrue(queue.offer(1))
        self.assertTrue(queue.offer(2))
        self.assertFalse(queue.offer(3))
        self.assertEqual(len(queue), 0)
        e = self.assertRaises(PodsError, queue.take)
        self.assertEqual(e.code, grpc.StatusCode.RESOURCE_EXHAUSTED)

    def test_end_wakes_taker(self):
        """``end`` from another thread wakes a thread blocked in ``take``."""
        queue = WatchQueue()
        result = []

        def take():
            try:
                queue.take()
            except PodsError as e:
                result.append(e.code)
        thread = threading.Thread(target=take)
        thread.start()
        queue.end(PodsError(grpc.StatusCode.CANCELLED, "gone"))
        thread.join(5)
        self.assertEqual(result, [grpc.StatusCode.CANCELLED])


class NodePodsTests(SynchronousTestCase):
    def setUp(self):
        self.feed = PodFeed()
        self.pods = NodePods(self.feed.informer, "node-a", Clock(), max_watchers=2)

    def test_overflowed_watcher_unregistered(self):
        """A watcher that fell behind is dropped from the reactor side at once."""
        self.pods.start()
        queue = WatchQueue(limit=1)
        self.pods.watch(queue)
        self.feed.put(pod("a"))
        self.feed.put(pod("a", phase="Running"))
        self.assertEqual(self.pods.watchers, {})

    def test_watcher_limit(self):
        """Beyond ``max_watchers`` a watch is RESOURCE_EXHAUSTED."""
        self.pods.start()
        self.pods.watch(WatchQueue())
        self.pods.watch(WatchQueue())
        e = self.assertRaises(PodsError, self.pods.watch, WatchQueue())
        self.assertEqual(e.code, grpc.StatusCode.RESOURCE_EXHAUSTED)

    def test_stop_ends_watchers(self):
        """Stopping ends every watch with UNAVAILABLE and refuses later calls."""
        self.pods.start()
        queue = WatchQueue()
        self.pods.watch(queue)
        self.pods.stop()
        self.assertEqual(self.assertRaises(PodsError, queue.take).code,
                         grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(self.assertRaises(PodsError, self.pods.list).code,
                         grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(self.feed.informer.handlers, [])
