"""
What a user allowed to write may not write: a namespace's phase out of step with its
deletion (item 12), objects over upstream's sizes (item 10).  Each over a real socket,
against the whole Status upstream answers.
"""

from __future__ import annotations

import base64
import re

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


MIB = 1024 * 1024
CONFIGMAPS = f"{NAMESPACES}/default/configmaps"
SECRETS = f"{NAMESPACES}/default/secrets"


class ObjectSizeTests(ServerTestCase):
    """
    Item 10: ConfigMap and Secret data at most 1 MiB (``ValidateConfigMap``,
    ``ValidateSecret``), and no object larger than etcd stores (``etcd3/txn.py``).
    """

    TOO_LONG = f"Too long: may not be more than {MIB} bytes"

    @inlineCallbacks
    def test_configmap_data_over_1mib(self):
        """
        The values of ``data`` (UTF-8 bytes) and ``binaryData`` (decoded bytes) count
        together, keys not at all; 1 MiB is allowed, one byte more is 422 on the whole
        object (field ``[]``), on create and on update.
        """
        binary = base64.b64encode(b"\0" * (MIB // 2)).decode()
        exact = {"metadata": {"name": "exact"},
                 "data": {"k": "\u00e9" * (MIB // 4 - 5), "long-key" * 30: "0123456789"},
                 "binaryData": {"b": binary}}
        r = yield self.client.post(CONFIGMAPS, exact)
        self.assertEqual(r.code, 201, r.body[:300])
        refusal = invalid("ConfigMap", "exact", "FieldValueTooLong", "[]", self.TOO_LONG)
        over = dict(exact, data={**exact["data"], "one": "1"})
        r = yield self.client.put(f"{CONFIGMAPS}/exact", over)
        self.assertEqual((r.code, r.json()), (422, refusal))
        r = yield self.client.post(CONFIGMAPS, {"metadata": {"name": "big"},
                                                "data": {"k": "x" * (MIB + 10)}})
        self.assertEqual(r.json(), invalid("ConfigMap", "big", "FieldValueTooLong", "[]",
                                           self.TOO_LONG))
        r = yield self.client.get(f"{CONFIGMAPS}/big")
        self.assertEqual(r.code, 404)

    @inlineCallbacks
    def test_secret_data_over_1mib(self):
        """
        A Secret's decoded ``data`` (``stringData`` folded in) counts: 1 MiB is allowed,
        one byte more is 422 on ``data``.
        """
        half = base64.b64encode(b"\1" * (MIB // 2)).decode()
        r = yield self.client.post(SECRETS, {"metadata": {"name": "exact"},
                                             "data": {"a": half, "b": half}})
        self.assertEqual(r.code, 201, r.body[:300])
        for name, body in (("over", {"data": {"a": half, "b": half}, "stringData": {"c": "!"}}),
                           ("big", {"data": {"a": base64.b64encode(b"x" * (MIB + 10)).decode()}})):
            r = yield self.client.post(SECRETS, {"metadata": {"name": name}, **body})
            self.assertEqual((r.code, r.json()), (422, invalid(
                "Secret", name, "FieldValueTooLong", "data", self.TOO_LONG)))

    @inlineCallbacks
    def test_object_over_etcd_limits(self):
        """
        A Pod etcd would refuse is refused as upstream's handler answers etcd's or
        clientv3's error: 500, no reason; over 1.5 MiB etcd's
        ``request is too large``, over 2 MiB clientv3's ``trying to send message larger
        than max``.  Nothing is stored.
        """
        def pod(name, size):
            return {"metadata": {"name": name}, "spec": {"containers": [
                {"name": "c", "image": "busybox", "args": ["x" * size]}]}}

        r = yield self.client.post(f"{NAMESPACES}/default/pods", pod("big", 1_600_000))
        self.assertEqual((r.code, r.json()), (500, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "etcdserver: request is too large", "code": 500}))
        r = yield self.client.post(f"{NAMESPACES}/default/pods", pod("huge", 2 * MIB))
        self.assertEqual(r.code, 500)
        message = r.json()["message"]
        sent = re.fullmatch(r"rpc error: code = ResourceExhausted desc = trying to send "
                            r"message larger than max \((\d+) vs\. 2097152\)", message)
        self.assertTrue(sent, message)
        self.assertTrue(2 * MIB < int(sent.group(1)) < 2 * MIB + 4096, message)
        for name in ("big", "huge"):
            r = yield self.client.get(f"{NAMESPACES}/default/pods/{name}")
            self.assertEqual(r.code, 404)
