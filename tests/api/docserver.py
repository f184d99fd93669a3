"""
A plain-HTTP server of the discovery and OpenAPI documents only, for tests that point a
real client (kubectl) at them without the rest of the API server.

It serves what the real server serves at those paths: each document encoded once, as
``application/json`` whatever the Accept header asks for (so kubectl falls back from
aggregated discovery to the plain documents), and 404 with a ``Status`` body elsewhere.
Requests it does not serve are recorded, so a test can check what a client would have
sent to the rest of the API (for example the query parameters of a create).

``KubectlTestCase`` runs the real kubectl against it with a private, empty home, so
kubectl's discovery and OpenAPI caches never carry over between runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from klein import Klein
from twisted.internet import defer, reactor, task, threads
from twisted.protocols.policies import WrappingFactory
from twisted.trial import unittest
from twisted.web.server import Site
from werkzeug.exceptions import NotFound

from platformd.api import discovery, openapi
from platformd.registry.catalog import builtin

#: The kubectl installed next to the test interpreter, else the one on PATH.
KUBECTL = (shutil.which("kubectl", path=os.path.dirname(sys.executable))
           or shutil.which("kubectl"))


def _json(request, document) -> bytes:
    request.setHeader(b"Content-Type", b"application/json")
    if document is None:
        request.setResponseCode(404)
        document = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "message": "the server could not find the "
                    "requested resource", "reason": "NotFound", "code": 404}
    return json.dumps(document).encode()


class DocServer:
    """The documents of one catalog, routed as the API server routes them."""

    app = Klein()

    def __init__(self, catalog):
        self.catalog = catalog
        self.v2 = openapi.encode_document(openapi.openapi_v2(catalog, "v0.0.0-test"))
        self.v3 = {path: openapi.encode_document(doc)
                   for path, doc in openapi.openapi_v3_documents(catalog).items()}
        self.v3_index = openapi.openapi_v3_index(catalog)
        #: ``(method, uri)`` of every request answered with 404.
        self.unserved = []

    @app.route("/api")
    def core_versions(self, request):
        host = request.getHost()
        return _json(request, discovery.api_versions(f"{host.host}:{host.port}"))

    @app.route("/api/<version>")
    def core_resources(self, request, version):
        return _json(request, discovery.api_resource_list(self.catalog, "", version))

    @app.route("/apis")
    def groups(self, request):
        return _json(request, discovery.api_group_list(self.catalog))

    @app.route("/apis/<group>")
    def group(self, request, group):
        return _json(request, discovery.api_group(self.catalog, group))

    @app.route("/apis/<group>/<version>")
    def group_resources(self, request, group, version):
        return _json(request, discovery.api_resource_list(self.catalog, group, version))

    @app.route("/openapi/v2")
    def openapi_v2(self, request):
        request.setHeader(b"Content-Type", b"application/json")
        return self.v2

    @app.route("/openapi/v3")
    def openapi_v3_index(self, request):
        return _json(request, self.v3_index)

    @app.route("/openapi/v3/<path:path>")
    def openapi_v3(self, request, path):
        document = self.v3.get(path)
        if document is None:
            return _json(request, None)
        request.setHeader(b"Content-Type", b"application/json")
        request.setHeader(b"ETag", f'"{openapi.openapi_hash(document)}"'.encode())
        return document

    @app.handle_errors(NotFound)
    def not_found(self, request, failure):
        self.unserved.append((request.method.decode(), request.uri.decode()))
        return _json(request, None)


class Listening:
    """A listening DocServer; ``stop()`` also closes the connections clients left open."""

    def __init__(self, server: DocServer, port, factory: WrappingFactory):
        self.server = server
        self.port = port
        self.factory = factory

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port.getHost().port}"

    @defer.inlineCallbacks
    def stop(self):
        yield self.port.stopListening()
        for protocol in list(self.factory.protocols):
            protocol.transport.loseConnection()
        # Trial fails a test that leaves sockets behind; closing takes a reactor turn.
        while self.factory.protocols:
            yield task.deferLater(reactor, 0.01, lambda: None)


def listen(catalog) -> Listening:
    """Serve ``catalog``'s documents on an ephemeral port of 127.0.0.1, in the reactor."""
    server = DocServer(catalog)
    factory = WrappingFactory(Site(server.app.resource()))
    return Listening(server, reactor.listenTCP(0, factory, interface="127.0.0.1"), factory)


class KubectlTestCase(unittest.TestCase):
    """Serves the built-in catalog's documents for the real kubectl during each test."""

    if KUBECTL is None:
        skip = "kubectl is not installed"

    def setUp(self):
        self.listening = listen(builtin())
        self.addCleanup(self.listening.stop)
        self.home = os.path.abspath(self.mktemp())
        os.makedirs(self.home)
        self.kubeconfig = os.path.join(self.home, "config")
        open(self.kubeconfig, "w").close()

    def kubectl(self, *args, files=None):
        """
        Run kubectl against the server in a thread (the reactor must keep serving);
        fires with its CompletedProcess.  ``files`` maps names in the private home to
        their text, for ``-f``.
        """
        for name, text in (files or {}).items():
            with open(os.path.join(self.home, name), "w") as f:
                f.write(text)
        env = {
            "HOME": self.home,
            "XDG_CACHE_HOME": os.path.join(self.home, ".cache"),
            "KUBECONFIG": self.kubeconfig,
            "PATH": os.environ.get("PATH", ""),
        }
        command = [KUBECTL, "--server", self.listening.url, *args]
        return threads.deferToThread(subprocess.run, command, cwd=self.home, env=env,
                                     capture_output=True, text=True, timeout=60)

    def assertSucceeded(self, result) -> str:
        """kubectl's output, after failing the test with its stderr if it failed."""
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout
