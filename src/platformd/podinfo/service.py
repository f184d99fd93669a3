"""
``PodsService``: the pods socket in twistd's lifecycle, a child of ``PlatformService``
when the feature gate ``PodsAPI`` is on.

privilegedStartService binds the socket (before twistd drops privileges, and so that a
bad path is a ``StartupError``: one clear line at startup, like a taken HTTPS port) and
starts grpcio on its own thread pool.
Calls are refused with FAILED_PRECONDITION until the service has started and ``synced``
has fired — the daemon starts it only once the watch cache has loaded (and gives no
``synced``); tests hold it back.  stopService ends every watch,
stops grpcio with a short grace and waits for it in a thread, never on the reactor, and
gives up waiting after ``STOP_TIMEOUT`` so twistd's stop never hangs.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import grpc
from twisted.application import service
from twisted.internet.defer import Deferred, succeed
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from platformd.informing import IInformer
from platformd.podinfo import unixsocket
from platformd.podinfo.nodepods import NodePods
from platformd.podinfo.servicer import PodsServicer
from platformd.podinfo.watchqueue import DEFAULT_LIMIT
from platformd.process.startup import StartupError

if TYPE_CHECKING:
    from platformd.tracing.provider import Tracing

log = Logger()

#: grpcio's worker threads.  Each open WatchPods stream holds one for its lifetime, so
#: watchers are capped below this and the rest stay free for ListPods and GetPod.
WORKERS = 160
RESERVED_FOR_UNARY = 16
#: Seconds in-flight unary calls get to finish when stopping; then they are cancelled.
STOP_GRACE = 2.0
#: Seconds stopService waits for grpcio before it gives up and lets twistd go on.
STOP_TIMEOUT = 5.0


class PodsService(service.Service):
    name = "pods-socket"

    def __init__(self, reactor, pods: IInformer, socket_path: str, node_name: str,
                 synced: Deferred | None = None, queue_limit: int = DEFAULT_LIMIT,
                 tracing: Tracing | None = None):
        if sys.platform == "win32":
            raise StartupError("the pods socket (feature gate PodsAPI) is not supported "
                               "on Windows")
        self.reactor = reactor
        self.socket_path = os.path.abspath(socket_path)
        self.pods = NodePods(pods, node_name, reactor, WORKERS - RESERVED_FOR_UNARY)
        self.servicer = PodsServicer(reactor, self.pods, queue_limit)
        #: None: synced as soon as started (the daemon starts it after the cache loads).
        self.synced = synced if synced is not None else succeed(None)
        self.executor: ThreadPoolExecutor | None = None
        self.server = None
        #: The daemon's ``tracing.provider.Tracing`` when ``--tracing-config-file`` is
        #: given: each call is a span (``tracing/grpcserver.py``).
        self.tracing = tracing

    def privilegedStartService(self):
        super().privilegedStartService()
        try:
            unixsocket.prepare(self.socket_path)
        except unixsocket.SocketPathError as e:
            raise StartupError(f"--pods-socket: {e}") from None
        self.executor = ThreadPoolExecutor(WORKERS, thread_name_prefix="pods-grpc")
        interceptors: list = []
        if self.tracing is not None:
            from platformd.tracing.grpcserver import TracingInterceptor
            interceptors.append(TracingInterceptor(self.tracing))
        server = grpc.server(self.executor, handlers=[self.servicer.handler()],
                             interceptors=interceptors, maximum_concurrent_rpcs=WORKERS)
        # The socket is created by the bind: no moment with looser permissions.
        old_umask = os.umask(0o177)
        try:
            server.add_insecure_port(f"unix:{self.socket_path}")
        except RuntimeError as e:
            self.executor.shutdown(wait=False)
            raise StartupError(
                f"--pods-socket: cannot listen on {self.socket_path}: {e}") from None
        finally:
            os.umask(old_umask)
        os.chmod(self.socket_path, unixsocket.SOCKET_MODE)
        server.start()
        self.server = server
        log.info("pods API serving on unix:{path} for node {node}",
                 path=self.socket_path, node=self.pods.node_name)

    def startService(self):
        super().startService()
        self.synced.addCallback(lambda _: self.pods.start())

    def stopService(self):
        super().stopService()
        self.pods.stop()
        server, executor, self.server = self.server, self.executor, None
        if server is None:
            return None
        stopped = server.stop(STOP_GRACE)

        def wait():
            if not stopped.wait(STOP_TIMEOUT):
                log.warn("grpcio did not stop within {timeout}s", timeout=STOP_TIMEOUT)
            executor.shutdown(wait=False)
            try:
                os.unlink(self.socket_path)
            except FileNotFoundError:
                pass

        return deferToThreadPool(self.reactor, self.reactor.getThreadPool(), wait)
