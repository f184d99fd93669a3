"""A real KMS v1 plugin for the tests: a grpcio server on a UNIX socket."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from concurrent import futures

import grpc

from platformd.protos.platform.kms.apis.v1beta1 import api_pb2, api_pb2_grpc


class V1Plugin(api_pb2_grpc.KeyManagementServiceServicer):
    """
    A toy KMS: 'seals' by XOR with 0x5a behind a b"sealed:" tag; counts its calls.  Each
    call waits ``delay`` seconds (or until ``released`` is set: a test's cleanup ends a
    hang); the calls named in ``failing`` fail.
    """

    def __init__(self):
        self.version = "v1beta1"
        self.delay = 0.0
        self.failing: set = set()
        self.released = threading.Event()
        self.calls = {"Version": 0, "Encrypt": 0, "Decrypt": 0}
        self._lock = threading.Lock()

    def _count(self, name, context):
        with self._lock:
            self.calls[name] += 1
        self.released.wait(self.delay)
        if name in self.failing:
            context.abort(grpc.StatusCode.INTERNAL, f"{name} refused")

    def Version(self, request, context):
        self._count("Version", context)
        assert request.version == "v1beta1"
        return api_pb2.VersionResponse(version=self.version, runtime_name="toy",
                                       runtime_version="0.1.0")

    def Encrypt(self, request, context):
        self._count("Encrypt", context)
        assert request.version == "v1beta1"
        return api_pb2.EncryptResponse(cipher=b"sealed:" + bytes(b ^ 0x5A for b in request.plain))

    def Decrypt(self, request, context):
        self._count("Decrypt", context)
        if not request.cipher.startswith(b"sealed:"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not sealed by me")
        return api_pb2.DecryptResponse(plain=bytes(b ^ 0x5A for b in request.cipher[7:]))


def serve(test, servicer, add) -> str:
    """Start ``servicer`` (``add``: its ``add_..._to_server``) on a UNIX socket; its endpoint.
    The server stops at the end of ``test``."""
    directory = tempfile.mkdtemp(prefix="kms", dir="/tmp")  # short: UNIX socket path
    test.addCleanup(shutil.rmtree, directory, True)
    socket = os.path.join(directory, "kms.sock")
    server = grpc.server(futures.ThreadPoolExecutor(4))
    add(servicer, server)
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    test.addCleanup(lambda: server.stop(None).wait())
    test.plugin_server = server
    return f"unix://{socket}"


def serve_v1(test, plugin: V1Plugin) -> str:
    return serve(test, plugin, api_pb2_grpc.add_KeyManagementServiceServicer_to_server)
