"""
A ValidatingAdmissionPolicy's audit annotations end to end: a real server with an audit
log records the policy's ``<policy>/<key>`` annotations and, for a binding with the
``Audit`` action, upstream's ``validation_failure`` annotation, in the request's event.
"""

from __future__ import annotations

import json

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.audit.harness import admin, start_audited, wait_events

GROUP = "/apis/admissionregistration.platform.io/v1"
POLICY = """
apiVersion: audit.platform.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""


class PolicyAuditTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def test_annotations_in_the_audit_event(self):
        server = yield start_audited(self, POLICY)
        client = admin(self, server)
        r = yield client.post(f"{GROUP}/validatingadmissionpolicies", {
            "metadata": {"name": "keys"},
            "spec": {"matchConstraints": {"resourceRules": [{
                "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"]}]},
                "validations": [{"expression": "size(object.data) < 2",
                                 "message": "too many keys"}],
                "auditAnnotations": [{"key": "count",
                                      "valueExpression": "string(size(object.data))"}]}})
        self.assertEqual(r.code, 201, r.body)
        r = yield client.post(f"{GROUP}/validatingadmissionpolicybindings", {
            "metadata": {"name": "keys-audit"},
            "spec": {"policyName": "keys", "validationActions": ["Audit"]}})
        self.assertEqual(r.code, 201, r.body)
        r = yield client.post("/api/v1/namespaces/default/configmaps",
                              {"metadata": {"name": "two"}, "data": {"a": "1", "b": "2"}},
                              headers={"Audit-ID": "vap-1"})
        self.assertEqual(r.code, 201, r.body)
        [event] = yield wait_events(server.audit_log, lambda e: e["auditID"] == "vap-1", 1)
        annotations = event["annotations"]
        self.assertEqual(annotations["keys/count"], "2")
        self.assertEqual(json.loads(annotations[
            "validation.policy.admission.platform.io/validation_failure"]), [{
                "message": "too many keys", "policy": "keys", "binding": "keys-audit",
                "expressionIndex": 0, "validationActions": ["Audit"]}])
