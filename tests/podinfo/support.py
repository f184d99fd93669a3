"""
Shared pieces of the pods API tests: pods, a Pod informer fed by hand (no store at all), and
a real grpcio client over the real socket whose calls run in threads — the server's
reactor is the test's reactor, so a blocking call on it would deadlock.
"""

from __future__ import annotations

import shutil
import tempfile

import grpc
from twisted.internet.threads import deferToThread

from platformd.cache.informers import FakeInformer
from platformd.podinfo.fieldmask import METADATA_KEY
from platformd.protos.platform.nodeagent.pods.v1alpha1 import api_pb2, api_pb2_grpc


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
    """Writes pods into a Pod ``FakeInformer``, each change at the next revision."""

    def __init__(self):
        self.informer = FakeInformer(resource="pods")

    @property
    def revision(self) -> int:
        return self.informer.revision

    def put(self, obj: dict) -> None:
        self.informer.put(obj)

    def delete(self, name: str) -> None:
        self.informer.delete("default", name)


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
