"""
The audit log records the object the handler's codec decoded, never the raw body parsed
a second way: a YAML alias bomb from a user with no permissions is a small event, and a
body nested past the codec's limit is the codec's 400 at every audit level, with no
traceback in the log (docs/security.md, "The audit log").
"""

from __future__ import annotations

import os
import resource

from twisted.internet.defer import inlineCallbacks
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import TestCase

from tests.audit.harness import admin, read_events, start_audited, wait_events
from tests.e2e.harness import token_client

LEVELS = ("None", "Metadata", "Request", "RequestResponse")
#: Each namespace is audited at the level it is named after.
POLICY = "apiVersion: audit.platform.io/v1\nkind: Policy\nrules:\n" + "".join(
    f"- level: {level}\n  namespaces: [{level.lower()}]\n" for level in LEVELS)
YAML = {"Content-Type": "application/yaml"}
#: What an attack's audit event may weigh (the events of these requests are ~1 kB).
EVENT_BYTES = 4096
#: How much the process's peak RSS may grow over one attack (the old second parse of
#: ``BOMB`` grew it by ~90 MB).
RSS_GROWTH_KB = 30 * 1024


def alias_bomb(levels: int) -> bytes:
    """YAML whose every level aliases the one before ten times: 10**levels strings."""
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines).encode() + b"\n"


#: 350 bytes; the old second parse wrote it out as a 47 MB event.
BOMB = alias_bomb(7)


def configmaps(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps"


def peak_rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class AuditAttackTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def setUp(self):
        data_dir = os.path.abspath(self.mktemp())
        os.makedirs(data_dir)
        tokens = os.path.join(data_dir, "tokens.csv")
        with open(tokens, "w") as f:
            f.write("jane-token,jane,u-jane\n")
        self.server = yield start_audited(self, POLICY, "--token-auth-file", tokens)
        self.admin = admin(self, self.server)
        self.jane = token_client(self, self.server, "jane-token")
        self.problems = []

        def observe(event):
            if event.get("log_failure") is not None or \
                    event.get("log_level") in (LogLevel.error, LogLevel.critical):
                self.problems.append(event)
        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)

    @inlineCallbacks
    def complete_event(self, audit_id: str) -> dict:
        """The request's ResponseComplete event, checked to be small on disk."""
        (event,) = yield wait_events(self.server.audit_log,
                                     lambda e: e["auditID"] == audit_id
                                     and e["stage"] == "ResponseComplete", 1)
        with open(self.server.audit_log, "rb") as f:
            lines = [line for line in f if audit_id.encode() in line]
        self.assertTrue(lines)
        self.assertLess(max(len(line) for line in lines), EVENT_BYTES)
        return event

    @inlineCallbacks
    def test_alias_bomb_without_permissions(self):
        """The bomb from a user who may not create: 403 before the body is read, and an
        event without requestObject."""
        for level in ("Request", "RequestResponse"):
            namespace = level.lower()
            before = peak_rss_kb()
            r = yield self.jane.post(configmaps(namespace), BOMB,
                                     headers={**YAML, "Audit-ID": f"bomb-{namespace}"})
            self.assertEqual((r.code, r.json()["reason"], r.json()["message"]), (
                403, "Forbidden",
                f'configmaps is forbidden: User "jane" cannot create resource "configmaps" '
                f'in API group "" in the namespace "{namespace}"'))
            event = yield self.complete_event(f"bomb-{namespace}")
            self.assertEqual((event["level"], event["responseStatus"]["code"]), (level, 403))
            self.assertNotIn("requestObject", event)
            self.assertNotIn("name", event["objectRef"])
            self.assertLess(peak_rss_kb() - before, RSS_GROWTH_KB)
        self.assertEqual(self.problems, [])

    @inlineCallbacks
    def test_alias_bomb_refused_by_the_codec(self):
        """From a user who may create and apply, the codec refuses the bomb (go-yaml's
        excessive aliasing, 400) and the event carries no requestObject."""
        for method, path, content_type in (
                ("POST", configmaps("requestresponse"), "application/yaml"),
                ("PATCH", configmaps("requestresponse") + "/a?fieldManager=t",
                 "application/apply-patch+yaml")):
            audit_id = f"bomb-{method}"
            r = yield self.admin.request(method, path, BOMB, content_type,
                                         headers={"Audit-ID": audit_id})
            self.assertEqual((r.code, r.json()["reason"]), (400, "BadRequest"))
            self.assertIn("yaml: document contains excessive aliasing", r.json()["message"])
            event = yield self.complete_event(audit_id)
            self.assertNotIn("requestObject", event)
        self.assertEqual(self.problems, [])

    @inlineCallbacks
    def test_deep_yaml_at_every_level(self):
        """A body nested 900 deep (past the codec's limit, within libyaml's own 1,000) is
        the codec's 400 whatever the level: under any audit policy it was a 500 and a
        traceback (the second, pure-Python parse overflowed the stack).  No error
        reaches the log."""
        deep = b"[" * 900 + b"]" * 900
        for level in LEVELS:
            namespace = level.lower()
            r = yield self.admin.post(configmaps(namespace), deep,
                                      headers={**YAML, "Audit-ID": f"deep-{namespace}"})
            self.assertEqual((r.code, r.json()["reason"], r.json()["message"]), (
                400, "BadRequest", 'ConfigMap in version "v1" cannot be handled as a '
                                   "ConfigMap: nested deeper than the limit of 100 levels"))
            if level != "None":
                event = yield self.complete_event(f"deep-{namespace}")
                self.assertEqual((event["level"], event["responseStatus"]["code"]), (level, 400))
                self.assertNotIn("requestObject", event)
        self.assertEqual([e for e in read_events(self.server.audit_log)
                          if e["auditID"] == "deep-none"], [])
        self.assertEqual(self.problems, [])
