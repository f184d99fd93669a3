"""
The gRPC handlers of ``platform.nodeagent.pods.v1alpha1.Pods``.  They run on grpcio's
thread pool and never touch reactor state: each call makes one ``blockingCallFromThread``
into ``NodePods``, and a WatchPods stream then waits on its own ``WatchQueue``, which
the reactor fills.  A stream's end — a cancelled client, an expired deadline, the server
stopping — unregisters its queue at once (``context.add_callback``).

Handlers return serialised response bytes (``encoding.field1``), so the method handlers
are registered here with a pass-through response serialiser rather than through the
generated ``add_PodsServicer_to_server``.
"""

from __future__ import annotations

import grpc
from twisted.internet.threads import blockingCallFromThread

from platformd.podinfo import fieldmask
from platformd.podinfo.encoding import field1
from platformd.podinfo.errors import PodsError
from platformd.podinfo.nodepods import NodePods
from platformd.podinfo.watchqueue import WatchQueue
from platformd.protos.platform.nodeagent.pods.v1alpha1 import api_pb2

SERVICE_NAME = "platform.nodeagent.pods.v1alpha1.Pods"


class PodsServicer:
    def __init__(self, reactor, pods: NodePods, queue_limit: int):
        self.reactor = reactor
        self.pods = pods
        self.queue_limit = queue_limit

    def handler(self) -> grpc.GenericRpcHandler:
        def passthrough(data: bytes) -> bytes:
            return data
        return grpc.method_handlers_generic_handler(SERVICE_NAME, {
            "ListPods": grpc.unary_unary_rpc_method_handler(
                self.ListPods, api_pb2.PodListRequest.FromString, passthrough),
            "WatchPods": grpc.unary_stream_rpc_method_handler(
                self.WatchPods, api_pb2.PodWatchRequest.FromString, passthrough),
            "GetPod": grpc.unary_unary_rpc_method_handler(
                self.GetPod, api_pb2.PodGetRequest.FromString, passthrough),
        })

    def ListPods(self, request, context) -> bytes:
        try:
            mask = fieldmask.from_metadata(context.invocation_metadata())
            versions = self._call(self.pods.list)
        except PodsError as e:
            context.abort(e.code, e.message)
        return field1(v.encoded(mask) for v in versions)

    def GetPod(self, request, context) -> bytes:
        try:
            mask = fieldmask.from_metadata(context.invocation_metadata())
            version = self._call(self.pods.get, request.podUID)
        except PodsError as e:
            context.abort(e.code, e.message)
        return field1([version.encoded(mask)])

    def WatchPods(self, request, context):
        """The current pods of this node first, then each change (docs/pods-api.md)."""
        queue = WatchQueue(self.queue_limit)
        try:
            mask = fieldmask.from_metadata(context.invocation_metadata())
            current = self._call(self.pods.watch, queue)
        except PodsError as e:
            context.abort(e.code, e.message)

        def ended():
            queue.end(PodsError(grpc.StatusCode.CANCELLED, "the stream ended"))
            self.reactor.callFromThread(self.pods.unwatch, queue)

        if not context.add_callback(ended):
            ended()  # the RPC already ended: no callback will come
            return
        for version in current:
            yield field1([version.encoded(mask)])
        while True:
            try:
                version = queue.take()
            except PodsError as e:
                context.abort(e.code, e.message)
            yield field1([version.encoded(mask)])

    def _call(self, f, *args):
        return blockingCallFromThread(self.reactor, f, *args)
