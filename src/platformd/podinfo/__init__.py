"""
The node-local pod info API (spec 4.10, issue 6): gRPC service ``Pods`` on a UNIX socket,
answering from the watch cache with the pods bound to this node.

Two sides, one hand-off.  The reactor side (``nodepods.NodePods``) follows the Pod kind's
cache and owns every piece of shared state; the gRPC side (``servicer.PodsServicer``)
runs on grpcio's own thread pool and reaches that state only through
``blockingCallFromThread`` (reads) and per-watcher bounded queues filled by the reactor
(``watchqueue.WatchQueue``).  ``service.PodsService`` ties both to twistd's lifecycle.
See docs/pods-api.md.
"""
