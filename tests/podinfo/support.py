"""
Shared pieces of the pods API tests: pods, a Pod cache fed by hand (no store at all), and
a real grpcio client over the real socket whose calls run in threads — the server's
reactor is the test's reactor, so a blocking call on it would deadlock.
"""

from __future__ import annotations

import shutil
import tempfile

import grpc
import orjson
from twisted.internet import reactor
from twisted.internet.threads import deferToThread

from platformd.cache.watchcache import KindCache
from platformd.podinfo.fieldmask import METADATA_KEY
from platformd.protos.platform.nodeagent.pods.v1alpha1 import api_pb2, api_pb2_grpc
from platformd.registry import core
from platformd.storage.interface import DELETE, PUT, Event, KeyValue


def pod(name: str, node: str = "node-a", uid: str | None = None, phase: str = "Pending",
        **status) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}",
                     "creationTimestamp": "2024-05-01T10:00:00Z", "labels": {"app": name}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx:1.27"}]},
        "status": {"phase": phase, **status},
    }


class PodFeed:
    """Writes pods into a Pod ``KindCache`` as the storage watch would."""

    def __init__(self):
        self.cache = KindCache(core.POD, reactor)
        self.revision = 0

    def put(self, obj: dict) -> None:
        self.revision += 1
        key = core.POD.storage_key(obj["metadata"]["namespace"], obj["metadata"]["name"])
        old = self.cache.get(key)
        created = old.create_revision if old else self.revision
        self.cache.apply(Event(PUT, KeyValue(key, orjson.dumps(obj), created, self.revision),
                               None))

    def delete(self, name: str) -> None:
        self.revision += 1
        key = core.POD.storage_key("default", name)
        old = self.cache.get(key)
        self.cache.apply(Event(DELETE, KeyValue(key, old.raw, old.create_revision,
                                                self.revision), None))


def socket_dir(testcase) -> str:
    """A short directory for a socket (trial's temp paths exceed the 108-byte limit)."""
    path = tempfile.mkdtemp(prefix="pods-test-")
    testcase.addCleanup(shutil.rmtree, path, True)
    return path


def _metadata(mask):
    return ((METADATA_KEY, mask),) if mask is not None else None


class Client:
    """A grpcio client of the pods socket; every call returns a Deferred."""

    def __init__(self, testcase, path: str):
        self.channel = grpc.insecure_channel(f"unix:{path}")
        self.stub = api_pb2_grpc.PodsStub(self.channel)
        testcase.addCleanup(self.channel.close)

    def list(self, mask=None):
        return deferToThread(self.stub.ListPods, api_pb2.PodListRequest(),
                             metadata=_metadata(mask), timeout=10)

    def get(self, uid: str, mask=None):
        return deferToThread(self.stub.GetPod, api_pb2.PodGetRequest(podUID=uid),
                             metadata=_metadata(mask), timeout=10)

    def watch(self, mask=None) -> "Watch":
        return Watch(self.stub.WatchPods(api_pb2.PodWatchRequest(), metadata=_metadata(mask),
                                         timeout=30))


class Watch:
    """One WatchPods stream; ``next()`` is a Deferred of the next response."""

    def __init__(self, call):
        self.call = call

    def next(self):
        return deferToThread(next, self.call)

    def take(self, count: int):
        def read():
            return [next(self.call) for _ in range(count)]
        return deferToThread(read)

    def cancel(self):
        self.call.cancel()


def code_of(failure) -> grpc.StatusCode:
    failure.trap(grpc.RpcError)
    return failure.value.code()
