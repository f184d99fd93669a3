"""
The daemon's service tree (docs/architecture.md, "Startup"): building without sockets or threads,
the boot order, ``Sequence``'s waiting start and reverse stop, listening through an
endpoint description, and ``StartupError`` reaching the operator only at the edge.
"""

import io
import os
import socket
import subprocess
import sys
import threading

from twisted.application import service
from twisted.internet import reactor
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.endpoints import serverFromString
from twisted.internet.protocol import Factory
from twisted.trial.unittest import SynchronousTestCase, TestCase

import platformd
from platformd.process import startup
from platformd.process.lifecycle import Sequence, Step
from platformd.edge.listening import ListenerService, listen_description
from platformd.options import Options
from platformd.service import PlatformService, daemon, make_service
from platformd.process.startup import Edge, StartupError


def options(*args):
    parsed = Options()
    parsed.parseOptions(list(args))
    return parsed


class TreeTests(SynchronousTestCase):
    def test_building_opens_no_socket_and_starts_nothing(self):
        """
        Building the daemon reads and makes its files (the data directory, the PKI) but
        listens on nothing, starts no thread and does not boot: that is twistd's
        ``privilegedStartService``/``startService``.
        """
        data = os.path.abspath(self.mktemp())
        threads = threading.active_count()
        built = daemon(options("--data-dir", data, "--secure-port", "0"), reactor)
        self.assertTrue(os.path.exists(os.path.join(data, "pki", "ca.crt")))
        self.assertIsNone(built.port)
        self.assertFalse(built.running)
        self.assertFalse(built.ready)
        self.assertEqual(threading.active_count(), threads)

    def test_tree(self):
        """
        Every part is a child Twisted starts (watchdog, listener, boot sequence, the
        graceful termination); the boot starts storage → cache → ... → ready.
        """
        built = daemon(options("--data-dir", self.mktemp(),
                               "--feature-gates", "PodsAPI=true"), reactor)
        self.assertEqual([s.name for s in built],
                         ["watchdog", "https", "listening", "boot", "serving"])
        self.assertEqual([s.name for s in built.boot],
                         ["storage", "customresource-preload", "cache", "rbac-index", "expiry",
                          "event-ttl", "namespace-controller", "serviceaccount-controller",
                          "customresource-controller", "disruption-controller",
                          "clusterrole-aggregation", "config-reload", "pods-socket",
                          "service-allocation-repair", "builtin-namespaces", "platform-service",
                          "rbac-bootstrap", "ready"])

    def test_events_are_bulk_writes(self):
        """
        Events' writes go through the bulk lane (``bulklane.py``): in the SQLite store by
        their storage prefix, in the requests to both their resources.
        """
        built = daemon(options("--data-dir", self.mktemp()), reactor)
        lane = built.storage.lane
        self.assertEqual(lane.prefixes, ("/registry/events/",))
        bulk = built.components.api.bulk
        self.assertIs(bulk.lane, lane)
        self.assertEqual(bulk.resources, {("", "events"), ("events.platform.io", "events")})

    def test_the_daemons_tree_handles_signals(self):
        """What twistd runs also handles SIGHUP, its own step."""
        edge = make_service(options("--data-dir", self.mktemp()), reactor)
        self.assertEqual([s.name for s in edge.daemon],
                         ["watchdog", "signals", "https", "listening", "boot", "serving"])

    def test_startup_error_not_system_exit(self):
        """Library code raises StartupError (a malformed token file)."""
        data = os.path.abspath(self.mktemp())
        os.makedirs(data)
        tokens = os.path.join(data, "tokens.csv")
        with open(tokens, "w") as f:
            f.write("short\n")
        e = self.assertRaises(StartupError, daemon,
                              options("--data-dir", data, "--token-auth-file", tokens), reactor)
        self.assertIn("line 1", str(e))

    def test_data_dir_not_creatable(self):
        """A data directory that cannot be made is a StartupError naming it."""
        parent = self.mktemp()
        with open(parent, "w"):
            pass
        e = self.assertRaises(StartupError, daemon,
                              options("--data-dir", os.path.join(parent, "d")), reactor)
        self.assertIn("cannot create --data-dir", str(e))


#: Run in a fresh interpreter: the daemon with default flags started on an ephemeral port
#: until it is ready (storage, cache, RBAC bootstrap, listening); prints which of the
#: optional features' heavy packages got imported.
_IMPORTED = """
import sys
from twisted.internet import reactor
from platformd.options import Options
from platformd.service import daemon
options = Options()
options.parseOptions(["--data-dir", sys.argv[1], "--secure-port", "0"])
built = daemon(options, reactor)
def started():
    built.privilegedStartService()
    built.startService()
    built.booted.addCallback(lambda _: print(built.ready, sorted(
        name for name in ("grpc", "opentelemetry", "joserfc", "cel_expr_python",
                          "google.protobuf", "cbor2") if name in sys.modules)))
    built.booted.addBoth(lambda _: built.stopService()).addBoth(lambda _: reactor.stop())
reactor.callWhenRunning(started)
reactor.run()
"""


class StartupCostTests(SynchronousTestCase):
    def test_optional_features_not_imported(self):
        """
        Without their flags, a started server imports none of JWT issuers' joserfc,
        tracing's OpenTelemetry, gRPC clients' grpcio (konnectivity, etcd, KMS), CEL's
        cel-expr-python, the protobuf runtime (Protobuf's messages, etcd's) nor cbor2:
        ~65 ms of every start and ~10 MiB of its memory (docs/performance.md).
        """
        # The platformd under test (the installed one under tox, a checkout's src/ else).
        root = os.path.dirname(os.path.dirname(os.path.abspath(platformd.__file__)))
        out = subprocess.run(
            [sys.executable, "-c", _IMPORTED, os.path.abspath(self.mktemp())],
            capture_output=True, text=True, check=True, timeout=60,
            env={**os.environ, "PYTHONPATH": root})
        self.assertEqual(out.stdout.strip().splitlines()[-1], "True []")


class SequenceTests(SynchronousTestCase):
    def sequence(self, log, results):
        seq = Sequence()
        for name in results:
            Step(name, lambda n=name: (log.append(("start", n)), results[n])[1],
                 lambda n=name: log.append(("stop", n))).setServiceParent(seq)
        return seq

    def test_waits_for_each_start(self):
        """The next child starts only once the previous child's Deferred has fired."""
        log, gate = [], Deferred()
        seq = self.sequence(log, {"a": None, "b": gate, "c": succeed(None)})
        started = seq.startService()
        self.assertEqual(log, [("start", "a"), ("start", "b")])
        self.assertNoResult(started)
        gate.callback(None)
        self.assertEqual(log[-1], ("start", "c"))
        self.successResultOf(started)

    def test_on_step_names_each_child_as_it_starts(self):
        log, gate = [], Deferred()
        seq = self.sequence(log, {"a": None, "b": gate, "c": None})
        seq.on_step = lambda name: log.append(("step", name))
        seq.startService()
        self.assertEqual(log, [("step", "a"), ("start", "a"), ("step", "b"), ("start", "b")])
        gate.callback(None)
        self.assertEqual(log[-2:], [("step", "c"), ("start", "c")])

    def test_stops_in_reverse(self):
        """Stopping goes last-started first."""
        log = []
        seq = self.sequence(log, {"a": None, "b": None, "c": None})
        seq.startService()
        del log[:]
        self.successResultOf(seq.stopService())
        self.assertEqual(log, [("stop", "c"), ("stop", "b"), ("stop", "a")])

    def test_failure_stops_the_sequence(self):
        """A failed start fails the sequence; later children never start; stop stops
        what started."""
        log = []
        seq = self.sequence(log, {"a": None, "b": fail(ValueError("no")), "c": None})
        self.failureResultOf(seq.startService(), ValueError)
        self.assertNotIn(("start", "c"), log)
        self.successResultOf(seq.stopService())
        self.assertEqual(log[-2:], [("stop", "b"), ("stop", "a")])

    def test_stop_while_starting(self):
        """Stopped while a child is starting, the children after it never start."""
        log, gate = [], Deferred()
        seq = self.sequence(log, {"a": gate, "b": None})
        started = seq.startService()
        seq.stopService()
        gate.callback(None)
        self.successResultOf(started)
        self.assertEqual(log, [("start", "a"), ("stop", "a")])


class ListeningTests(TestCase):
    def test_descriptions(self):
        """--bind-address and --secure-port as a tcp endpoint description."""
        self.assertEqual(listen_description({"bind-address": "127.0.0.1", "secure-port": 6443}),
                         "tcp:6443:interface=127.0.0.1:backlog=1024")
        self.assertEqual(listen_description({"bind-address": "::1", "secure-port": 0}),
                         r"tcp:0:interface=\:\:1:backlog=1024")
        self.assertEqual(listen_description({"bind-address": "", "secure-port": 1}),
                         "tcp:1:backlog=1024")

    def test_port_in_use(self):
        """A port in use is a StartupError at once, naming the address."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            listener = ListenerService(
                reactor, serverFromString(reactor, f"tcp:{port}:interface=127.0.0.1"),
                Factory, address=f"127.0.0.1:{port}")
            e = self.assertRaises(StartupError, listener.privilegedStartService)
        self.assertIn(f"cannot listen on 127.0.0.1:{port}", str(e))
        self.failureResultOf(listener.listening(), StartupError)

    def test_listens_and_stops(self):
        """Any endpoint: listening gives the port; stopping stops listening."""
        listener = ListenerService(reactor, serverFromString(reactor, "tcp:0:interface=127.0.0.1"),
                                   Factory, address="127.0.0.1:0")
        listener.privilegedStartService()
        self.assertEqual(self.successResultOf(listener.listening()), listener.port)
        self.assertTrue(listener.port.getHost().port)
        listener.startService()
        return listener.stopService()


class EdgeTests(SynchronousTestCase):
    def setUp(self):
        self.stderr = io.StringIO()
        self.patch(sys, "__stderr__", self.stderr)

    def test_privileged_start_error(self):
        """At the edge a StartupError is one line and SystemExit(1)."""
        class Failing(service.Service):
            def privilegedStartService(self):
                raise StartupError("no good")

        edge = Edge(Failing(), reactor)
        e = self.assertRaises(SystemExit, edge.privilegedStartService)
        self.assertEqual(e.code, 1)
        self.assertEqual(self.stderr.getvalue(), "platformd: no good\n")

    def test_make_service(self):
        """make_service, what twistd runs, is the daemon inside the edge."""
        edge = make_service(options("--data-dir", self.mktemp()), reactor)
        self.assertIsInstance(edge, Edge)
        self.assertIsInstance(edge.daemon, PlatformService)

    def test_report(self):
        startup.report("one line")
        self.assertEqual(self.stderr.getvalue(), "platformd: one line\n")
