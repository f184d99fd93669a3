"""
The audit log end to end: a real server (TLS, SQLite, the writer thread, the file)
writes upstream's events for each request its policy audits.
"""

from __future__ import annotations

import os
import re

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from tests.audit.harness import admin, read_events, start_audited, wait_events
from tests.e2e.harness import open_watch, token_client

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MICROTIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

POLICY = """
apiVersion: audit.platform.io/v1
kind: Policy
omitStages: ["Panic"]
rules:
- level: None
  users: ["quiet"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["configmaps"]
- level: Request
  resources:
  - group: ""
    resources: ["secrets"]
- level: Metadata
  omitStages: ["RequestReceived"]
  nonResourceURLs: ["/version", "/openapi/*"]
- level: Metadata
"""
ADMIN = {"username": "admin", "groups": ["system:masters", "system:authenticated"]}


def by_id(audit_id):
    return lambda e: e["auditID"] == audit_id


def normalized(event: dict) -> dict:
    """The event with its timestamps checked and replaced by "T"."""
    out = dict(event)
    for field in ("requestReceivedTimestamp", "stageTimestamp"):
        assert MICROTIME.match(out[field]), out[field]
        out[field] = "T"
    return out


class LogTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def setUp(self):
        tokens = "jane-token,jane,u-jane,\"devs\"\nquiet-token,quiet,u-quiet\n"
        data_dir = os.path.abspath(self.mktemp())
        os.makedirs(data_dir)
        with open(os.path.join(data_dir, "tokens.csv"), "w") as f:
            f.write(tokens)
        self.server = yield start_audited(
            self, POLICY, "--token-auth-file", os.path.join(data_dir, "tokens.csv"))
        self.log = self.server.audit_log
        self.admin = admin(self, self.server)

    def events(self, audit_id, count):
        return wait_events(self.log, by_id(audit_id), count)

    @inlineCallbacks
    def test_create(self):
        """RequestReceived then ResponseComplete, the Audit-ID honoured, both objects at
        RequestResponse, the object's name in objectRef, the authorization annotations."""
        r = yield self.admin.post(CONFIGMAPS, {"metadata": {"name": "a"}, "data": {"k": "v"}},
                                  headers={"Audit-ID": "create-1", "User-Agent": "tests/1.0",
                                           "X-Forwarded-For": "10.0.0.1, bogus, 10.0.0.2"})
        self.assertEqual((r.code, r.header("audit-id")), (201, "create-1"))
        received, complete = yield self.events("create-1", 2)
        common = {"kind": "Event", "apiVersion": "audit.platform.io/v1",
                  "level": "RequestResponse", "auditID": "create-1",
                  "requestURI": CONFIGMAPS, "verb": "create", "user": ADMIN,
                  "sourceIPs": ["10.0.0.1", "10.0.0.2", "127.0.0.1"],
                  "userAgent": "tests/1.0",
                  "requestReceivedTimestamp": "T", "stageTimestamp": "T"}
        self.assertEqual(normalized(received), {
            **common, "stage": "RequestReceived",
            "objectRef": {"resource": "configmaps", "namespace": "default",
                          "apiVersion": "v1"}})
        self.assertEqual(received["stageTimestamp"], received["requestReceivedTimestamp"])
        self.assertEqual(list(received), [
            "kind", "apiVersion", "level", "auditID", "stage", "requestURI", "verb", "user",
            "sourceIPs", "userAgent", "objectRef", "requestReceivedTimestamp",
            "stageTimestamp"])
        created = r.json()
        self.assertEqual(normalized(complete), {
            **common, "stage": "ResponseComplete",
            "objectRef": {"resource": "configmaps", "namespace": "default", "name": "a",
                          "apiVersion": "v1"},
            "responseStatus": {"metadata": {}, "code": 201},
            "requestObject": {"metadata": {"name": "a"}, "data": {"k": "v"}},
            "responseObject": created,
            "annotations": {"authorization.platform.io/decision": "allow",
                            "authorization.platform.io/reason": ""}})
        self.assertEqual(list(complete)[-5:], ["requestObject", "responseObject",
                                               "requestReceivedTimestamp", "stageTimestamp",
                                               "annotations"])
        self.assertGreaterEqual(complete["stageTimestamp"], complete["requestReceivedTimestamp"])

    @inlineCallbacks
    def test_get_list_update_delete(self):
        r = yield self.admin.post(CONFIGMAPS, {"metadata": {"name": "b"}})
        self.assertEqual(r.code, 201)
        version = r.json()["metadata"]["resourceVersion"]
        r = yield self.admin.get(f"{CONFIGMAPS}/b", headers={"Audit-ID": "get-1"})
        (_, got) = yield self.events("get-1", 2)
        self.assertEqual((got["verb"], got["objectRef"]["name"], got["responseObject"]),
                         ("get", "b", r.json()))
        self.assertNotIn("requestObject", got)
        r = yield self.admin.get(f"{CONFIGMAPS}?limit=5", headers={"Audit-ID": "list-1"})
        (_, listed) = yield self.events("list-1", 2)
        self.assertEqual((listed["verb"], listed["requestURI"], listed["objectRef"],
                          listed["responseObject"]["kind"]),
                         ("list", f"{CONFIGMAPS}?limit=5",
                          {"resource": "configmaps", "namespace": "default",
                           "apiVersion": "v1"}, "ConfigMapList"))
        r = yield self.admin.put(f"{CONFIGMAPS}/b", {
            "metadata": {"name": "b", "resourceVersion": version}, "data": {"x": "y"}},
            headers={"Audit-ID": "update-1"})
        self.assertEqual(r.code, 200, r.body)
        (_, updated) = yield self.events("update-1", 2)
        self.assertEqual((updated["verb"], updated["objectRef"]["resourceVersion"],
                          updated["responseStatus"]), ("update", version,
                                                       {"metadata": {}, "code": 200}))
        r = yield self.admin.delete(f"{CONFIGMAPS}/b", headers={"Audit-ID": "delete-1"})
        self.assertEqual(r.code, 200)
        (_, deleted) = yield self.events("delete-1", 2)
        self.assertEqual((deleted["verb"], deleted["objectRef"]["name"],
                          deleted["responseStatus"]["code"]), ("delete", "b", 200))
        r = yield self.admin.get(f"{CONFIGMAPS}/b", headers={"Audit-ID": "missing-1"})
        (_, missing) = yield self.events("missing-1", 2)
        self.assertEqual(missing["responseStatus"], {
            "metadata": {}, "status": "Failure", "message": 'configmaps "b" not found',
            "reason": "NotFound", "details": {"name": "b", "kind": "configmaps"},
            "code": 404})
        self.assertEqual(missing["responseObject"], r.json())

    @inlineCallbacks
    def test_request_objects(self):
        """
        requestObject is what the handler decoded, when upstream's handlers log it: a
        create's object (an ignored unknown field dropped, nothing the store adds), a
        patch as sent, an apply configuration as JSON (its alias expanded), the
        DeleteOptions; none for a body refused by authorization or by the codec, and
        then no name from the body in objectRef either.
        """
        jane = token_client(self, self.server, "jane-token")
        path = f"{CONFIGMAPS}/ro"
        apply = (b"apiVersion: v1\nkind: ConfigMap\ndata: &d {c: d}\n"
                 b"metadata: {name: ro, labels: *d}\n")
        steps = (
            ("create", 201, self.admin.post, f"{CONFIGMAPS}?fieldValidation=Ignore",
             {"metadata": {"name": "ro"}, "bogus": 1}, {}),
            ("patch", 200, self.admin.patch, path, {"data": {"a": "b"}}, {}),
            ("apply", 200, self.admin.patch, f"{path}?fieldManager=t", apply,
             {"content_type": "application/apply-patch+yaml"}),
            ("delete", 200, self.admin.delete, path, {"gracePeriodSeconds": 0}, {}),
            ("denied", 403, jane.post, CONFIGMAPS, {"metadata": {"name": "denied"}}, {}),
            ("refused", 400, self.admin.post, CONFIGMAPS, b'{"metadata": {"name": "x"}', {}))
        logged = {}
        for name, code, send, url, body, kw in steps:
            r = yield send(url, body, headers={"Audit-ID": f"ro-{name}"}, **kw)
            self.assertEqual(r.code, code, (name, r.body))
            (_, logged[name]) = yield self.events(f"ro-{name}", 2)
        self.assertEqual({name: e.get("requestObject") for name, e in logged.items()}, {
            "create": {"metadata": {"name": "ro"}},
            "patch": {"data": {"a": "b"}},
            "apply": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"c": "d"},
                      "metadata": {"name": "ro", "labels": {"c": "d"}}},
            "delete": {"gracePeriodSeconds": 0},
            "denied": None, "refused": None})
        self.assertEqual([logged[name]["objectRef"].get("name")
                          for name in ("create", "denied", "refused")], ["ro", None, None])

    @inlineCallbacks
    def test_watch(self):
        """A watch is long-running: ResponseStarted when it starts, ResponseComplete when
        the client goes away."""
        response, stream = yield open_watch(self.admin, "/api/v1/namespaces?watch=1")
        self.assertEqual(response.code, 200)
        audit_id = response.headers.getRawHeaders("audit-id")[0]
        received, started = yield self.events(audit_id, 2)
        self.assertEqual((received["stage"], started["stage"], started["verb"],
                          started["level"], started["responseStatus"]),
                         ("RequestReceived", "ResponseStarted", "watch", "Metadata",
                          {"metadata": {}, "code": 200}))
        yield stream.wait_for(1)
        response._transport.loseConnection()
        events = yield self.events(audit_id, 3)
        self.assertEqual((events[2]["stage"], events[2]["responseStatus"]),
                         ("ResponseComplete", {"metadata": {}, "code": 200}))
        self.assertNotIn("responseObject", events[2])

    @inlineCallbacks
    def test_levels(self):
        """Request: the request object, not the response's; Metadata: neither; None (a
        user's rule) and a non-resource rule omitting RequestReceived."""
        r = yield self.admin.post("/api/v1/namespaces/default/secrets",
                                  {"metadata": {"name": "s"}, "stringData": {"k": "v"}},
                                  headers={"Audit-ID": "secret-1"})
        self.assertEqual(r.code, 201)
        (_, secret) = yield self.events("secret-1", 2)
        self.assertEqual((secret["level"], secret["requestObject"]["stringData"]),
                         ("Request", {"k": "v"}))
        self.assertNotIn("responseObject", secret)
        r = yield self.admin.post("/api/v1/namespaces", {"metadata": {"name": "lv"}},
                                  headers={"Audit-ID": "ns-1"})
        (_, namespace) = yield self.events("ns-1", 2)
        self.assertEqual((namespace["level"], namespace["objectRef"]),
                         ("Metadata", {"resource": "namespaces", "name": "lv",
                                       "apiVersion": "v1"}))
        self.assertFalse({"requestObject", "responseObject"} & set(namespace))
        quiet = token_client(self, self.server, "quiet-token")
        r = yield quiet.get("/api/v1/namespaces/default", headers={"Audit-ID": "quiet-1"})
        self.assertEqual(r.code, 403)
        r = yield self.admin.get("/version", headers={"Audit-ID": "version-1"})
        self.assertEqual(r.code, 200)
        (version,) = yield self.events("version-1", 1)
        self.assertEqual((version["stage"], version["verb"], version["requestURI"]),
                         ("ResponseComplete", "get", "/version"))
        self.assertNotIn("objectRef", version)
        self.assertEqual([e for e in read_events(self.log) if e["auditID"] == "quiet-1"], [])
        r = yield self.admin.get("/metrics")
        lines = r.body.decode().splitlines()
        self.assertIn('apiserver_audit_level_total{level="None"} 1', lines)
        self.assertTrue(any(line.startswith("apiserver_audit_event_total ") for line in lines))

    @inlineCallbacks
    def test_denied(self):
        """A 403: the decision and the authorizer's reason, the Status in responseStatus."""
        jane = token_client(self, self.server, "jane-token")
        r = yield jane.get("/api/v1/namespaces/default/configmaps/x",
                           headers={"Audit-ID": "denied-1"})
        self.assertEqual(r.code, 403)
        (_, denied) = yield self.events("denied-1", 2)
        self.assertEqual(denied["user"], {"username": "jane", "uid": "u-jane",
                                          "groups": ["devs", "system:authenticated"]})
        self.assertEqual(denied["annotations"], {
            "authorization.platform.io/decision": "forbid",
            "authorization.platform.io/reason": ""})
        self.assertEqual(denied["responseStatus"], {
            "metadata": {}, "status": "Failure", "message": r.json()["message"],
            "reason": "Forbidden", "details": {"name": "x", "kind": "configmaps"},
            "code": 403})

    @inlineCallbacks
    def test_unauthenticated(self):
        """A refused token: one ResponseStarted event, no user, the methods tried."""
        stranger = token_client(self, self.server, "wrong")
        r = yield stranger.get("/api/v1/namespaces", headers={"Audit-ID": "refused-1"})
        self.assertEqual(r.code, 401)
        (refused,) = yield self.events("refused-1", 1)
        self.assertEqual((refused["stage"], refused["user"], refused["responseStatus"]),
                         ("ResponseStarted", {},
                          {"metadata": {},
                           "message": "Authentication failed, attempted: bearer",
                           "code": 401}))

    @inlineCallbacks
    def test_unauthenticated_methods_from_the_first_header(self):
        """
        The methods tried are read as upstream's getAuthMethods reads them, from the
        first Authorization header (Go's Header.Get): Basic credentials ahead of a
        bearer token are "basic" (the token is not read either: 401).
        """
        stranger = token_client(self, self.server, "wrong")
        for basic, attempted in (("Basic dTpw", "basic"), ("Basic bm9jb2xvbg==", None),
                                 ("basic dTpw", "basic")):
            r = yield stranger.get("/api/v1/namespaces", headers={
                "Audit-ID": f"first-{basic}", "Authorization": basic})
            self.assertEqual(r.code, 401)
            (refused,) = yield self.events(f"first-{basic}", 1)
            self.assertEqual(refused["responseStatus"]["message"], (
                f"Authentication failed, attempted: {attempted}" if attempted else
                "Authentication failed, no credentials provided"))

    @inlineCallbacks
    def test_impersonation(self):
        r = yield self.admin.get("/api/v1/namespaces/default",
                                 headers={"Audit-ID": "as-1", "Impersonate-User": "jane",
                                          "Impersonate-Group": "devs"})
        self.assertEqual(r.code, 403)
        received, complete = yield self.events("as-1", 2)
        self.assertNotIn("impersonatedUser", received)
        self.assertEqual((complete["user"], complete["impersonatedUser"]),
                         (ADMIN, {"username": "jane",
                                  "groups": ["devs", "system:authenticated"]}))


class StrictTests(TestCase):
    """blocking-strict: a RequestReceived event that cannot be written fails the
    request (the log is /dev/full: every write is ENOSPC); blocking goes on."""

    timeout = 60

    @inlineCallbacks
    def test_strict_fails_the_request(self):
        server = yield start_audited(self, "apiVersion: audit.platform.io/v1\n"
                                     "kind: Policy\nrules:\n- level: Metadata\n",
                                     "--audit-log-mode", "blocking-strict",
                                     log_path="/dev/full")
        r = yield admin(self, server).get("/api/v1/namespaces/default")
        self.assertEqual((r.code, r.json()["message"]),
                         (500, "Internal error occurred: failed to store audit event"))
        metrics = server.api.metrics
        self.assertEqual(metrics.audit_rejected.get(), 1)
        self.assertGreaterEqual(metrics.audit_errors.get(("log",)), 1)

    @inlineCallbacks
    def test_blocking_goes_on(self):
        server = yield start_audited(self, "apiVersion: audit.platform.io/v1\n"
                                     "kind: Policy\nrules:\n- level: Metadata\n",
                                     log_path="/dev/full")
        r = yield admin(self, server).get("/api/v1/namespaces/default")
        self.assertEqual(r.code, 200)
        errors = server.api.metrics.audit_errors
        while errors.get(("log",)) < 2:  # both events failed, reported by the writer
            yield deferLater(reactor, 0.02, lambda: None)
        self.assertEqual(server.api.metrics.audit_rejected.get(), 0)


class RotationTests(TestCase):
    """--audit-log-maxsize 1: the log is rotated once it would pass 1 MiB, every line
    whole in one file or the other."""

    timeout = 60

    @inlineCallbacks
    def test_rotates_by_size(self):
        server = yield start_audited(self, POLICY, "--audit-log-maxsize", "1",
                                     "--audit-log-maxbackup", "1")
        client = admin(self, server)
        value = "v" * 150_000
        for n in range(4):  # each create's two events hold the data three times
            r = yield client.post(CONFIGMAPS, {"metadata": {"name": f"big-{n}"},
                                               "data": {"k": value}},
                                  headers={"Audit-ID": f"big-{n}"})
            self.assertEqual(r.code, 201)
        directory = os.path.dirname(server.audit_log)
        events = yield wait_events(directory, lambda e: e["auditID"].startswith("big-"), 8)
        self.assertEqual([e["auditID"] for e in events],
                         [f"big-{n}" for n in range(4) for _ in range(2)])
        backups = [n for n in os.listdir(directory) if n != "audit.log"]
        self.assertEqual(len(backups), 1, backups)  # --audit-log-maxbackup 1
        self.assertTrue(re.match(r"^audit-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}\.log$",
                                 backups[0]), backups[0])
        for name in os.listdir(directory):
            self.assertLessEqual(os.path.getsize(os.path.join(directory, name)), 1 << 20)


class ShutdownTests(TestCase):
    """Stopping the daemon ends the watches and writes every event before it is done."""

    timeout = 60

    @inlineCallbacks
    def test_events_written_before_stop(self):
        server = yield start_audited(self, POLICY)
        client = admin(self, server)
        response, stream = yield open_watch(client, "/api/v1/namespaces?watch=1")
        audit_id = response.headers.getRawHeaders("audit-id")[0]
        yield stream.wait_for(1)
        yield server.stopService()
        self.assertEqual([e["stage"] for e in read_events(server.audit_log)
                          if e["auditID"] == audit_id],
                         ["RequestReceived", "ResponseStarted", "ResponseComplete"])
