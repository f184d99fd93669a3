"""
What a user allowed to write may not write: a namespace's phase out of step with its
deletion (item 12).  Each over a real socket,
against the whole Status upstream answers.
"""

from __future__ import annotations

from twisted.internet.defer import inlineCallbacks

from tests.e2e.harness import ServerTestCase

NAMESPACES = "/api/v1/namespaces"


def invalid(kind: str, name: str, reason: str, field: str, message: str) -> dict:
    """The 422 Status of one field error, as upstream's ``errors.NewInvalid`` makes it."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'{kind} "{name}" is invalid: {field}: {message}',
            "reason": "Invalid",
            "details": {"name": name, "kind": kind,
                        "causes": [{"reason": reason, "message": message, "field": field}]},
            "code": 422}


class NamespaceStatusTests(ServerTestCase):
    """Item 12: ``ValidateNamespaceStatusUpdate``."""

    ACTIVE_ONLY = "may only be 'Active' if `deletionTimestamp` is empty"
    TERMINATING_ONLY = "may only be 'Terminating' if `deletionTimestamp` is not empty"

    def refusal(self, name: str, phase: str, detail: str) -> dict:
        return invalid("Namespace", name, "FieldValueInvalid", "status.Phase",
                       f'Invalid value: "{phase}": {detail}')

    @inlineCallbacks
    def test_live_namespace_cannot_be_marked_terminating(self):
        """
        PUT, merge patch and apply of ``status.phase: Terminating`` on a namespace that is
        not being deleted are 422; creates in it still succeed afterwards.
        """
        path = f"{NAMESPACES}/default/status"
        r = yield self.client.get(path)
        body = r.json()
        body["status"]["phase"] = "Terminating"
        writes = [
            self.client.put(path, body),
            self.client.patch(path, {"status": {"phase": "Terminating"}}),
            self.client.patch(path + "?fieldManager=attacker", {
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"},
                "status": {"phase": "Terminating"}},
                content_type="application/apply-patch+yaml"),
        ]
        for write in writes:
            r = yield write
            self.assertEqual((r.code, r.json()), (422, self.refusal(
                "default", "Terminating", self.ACTIVE_ONLY)))
        r = yield self.client.patch(path, {"status": {"phase": "Bogus"}})
        self.assertEqual(r.json(), self.refusal("default", "Bogus", self.ACTIVE_ONLY))
        r = yield self.client.post(f"{NAMESPACES}/default/configmaps",
                                   {"metadata": {"name": "still-open"}})
        self.assertEqual(r.code, 201, r.body)

    @inlineCallbacks
    def test_missing_phase_is_defaulted_active(self):
        """A status write without a phase is defaulted to Active (SetDefaults_NamespaceStatus)."""
        path = f"{NAMESPACES}/default/status"
        r = yield self.client.patch(path, {"status": {"phase": None}})
        self.assertEqual((r.code, r.json()["status"]), (200, {"phase": "Active"}))
        r = yield self.client.get(path)
        body = r.json()
        del body["status"]
        r = yield self.client.put(path, body)
        self.assertEqual((r.code, r.json()["status"]), (200, {"phase": "Active"}))

    @inlineCallbacks
    def test_terminating_namespace_cannot_be_reactivated(self):
        """A namespace being deleted stays Terminating: its status may not say Active."""
        hold = "example.com/hold"
        r = yield self.client.post(NAMESPACES, {"metadata": {"name": "going",
                                                             "finalizers": [hold]}})
        self.assertEqual(r.code, 201, r.body)
        r = yield self.client.delete(f"{NAMESPACES}/going")
        self.assertEqual(r.json()["status"]["phase"], "Terminating")
        r = yield self.client.patch(f"{NAMESPACES}/going/status", {"status": {"phase": "Active"}})
        self.assertEqual((r.code, r.json()), (422, self.refusal(
            "going", "Active", self.TERMINATING_ONLY)))
        r = yield self.client.patch(f"{NAMESPACES}/going/status", {"status": {"phase": None}})
        self.assertEqual(r.json(), self.refusal("going", "Active", self.TERMINATING_ONLY))
        r = yield self.client.patch(f"{NAMESPACES}/going/status", {"status": {
            "conditions": [{"type": "NamespaceContentRemaining", "status": "False"}]}})
        self.assertEqual(r.code, 200, r.body)
        r = yield self.client.patch(f"{NAMESPACES}/going", {"metadata": {"finalizers": []}})
        self.assertEqual(r.code, 200, r.body)

