"""
JSON field order as upstream writes it: Go's encoding/json writes a struct's fields in
declaration order (TypeMeta's ``kind``, ``apiVersion``; ObjectMeta's, in
``apimachinery/pkg/apis/meta/v1/types.go``; each kind's, in ``api/core/v1/types.go`` and
``api/rbac/v1/types.go``) and a map's keys sorted, whatever order the client sent.
"""

import json

from twisted.internet.defer import inlineCallbacks

from tests.e2e.harness import ServerTestCase

PODS = "/api/v1/namespaces/default/pods"
RB = "/apis/rbac.authorization.platform.io/v1/namespaces/default/rolebindings"

#: A pod whose every object lists its fields in an order upstream would not write.
SCRAMBLED_POD = {
    "spec": {
        "schedulerName": "default-scheduler",
        "containers": [{"ports": [{"protocol": "TCP", "containerPort": 80, "hostPort": 8080,
                                   "name": "http"}],
                        "env": [{"value": "1", "name": "A"}],
                        "image": "nginx:1.25", "name": "web"}],
        "nodeName": "n1",
    },
    "metadata": {"labels": {"b": "2", "a": "1"}, "annotations": {"z": "", "y": ""},
                 "namespace": "default", "name": "p"},
    "apiVersion": "v1",
    "kind": "Pod",
}


def upstream_pod(meta: dict) -> bytes:
    """
    The pod as upstream's encoding/json writes it; server-set values from ``meta``
    (the field set, ``fieldsV1``, is the managed-fields code's, not the subject here).
    """
    entry = meta["managedFields"][0]
    fields = json.dumps(entry["fieldsV1"], separators=(",", ":"))
    return (
        '{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default",'
        f'"uid":"{meta["uid"]}","resourceVersion":"{meta["resourceVersion"]}",'
        f'"creationTimestamp":"{meta["creationTimestamp"]}",'
        '"labels":{"a":"1","b":"2"},"annotations":{"y":"","z":""},'
        '"managedFields":[{"manager":"unknown","operation":"Update","apiVersion":"v1",'
        f'"time":"{entry["time"]}","fieldsType":"FieldsV1","fieldsV1":{fields}}}]}},'
        '"spec":{"containers":[{"name":"web","image":"nginx:1.25",'
        '"ports":[{"name":"http","hostPort":8080,"containerPort":80,"protocol":"TCP"}],'
        '"env":[{"name":"A","value":"1"}],'
        '"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File",'
        '"imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always",'
        '"terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",'
        '"serviceAccountName":"default","serviceAccount":"default","nodeName":"n1",'
        '"schedulerName":"default-scheduler"},'
        '"status":{"phase":"Pending","qosClass":"BestEffort"}}'
    ).encode()


class FieldOrderTests(ServerTestCase):
    @inlineCallbacks
    def test_pod_bytes(self):
        """Create's answer, GET and LIST items carry the pod in upstream's field order."""
        created = yield self.client.post(PODS, SCRAMBLED_POD)
        self.assertEqual(created.code, 201, created.body)
        meta = created.json()["metadata"]
        expected = upstream_pod(meta)
        self.assertEqual(created.body.rstrip(b"\n"), expected)
        got = yield self.client.get(f"{PODS}/p")
        self.assertEqual(got.body.rstrip(b"\n"), expected)
        listed = yield self.client.get(PODS)
        self.assertIn(b'"items":[' + expected + b"]}", listed.body)

    @inlineCallbacks
    def test_rolebinding_subjects_before_roleref(self):
        """RoleBinding: subjects, then roleRef (rbac/v1 types.go); Subject and RoleRef too."""
        r = yield self.client.post(RB, {
            "roleRef": {"name": "view", "kind": "ClusterRole"},
            "subjects": [{"name": "alice", "kind": "User"}],
            "metadata": {"name": "rb"}})
        self.assertEqual(r.code, 201, r.body)
        tail = (b'"subjects":[{"kind":"User","apiGroup":"rbac.authorization.platform.io",'
                b'"name":"alice"}],"roleRef":{"apiGroup":"rbac.authorization.platform.io",'
                b'"kind":"ClusterRole","name":"view"}}')
        self.assertTrue(r.body.rstrip(b"\n").endswith(tail), r.body)
        self.assertTrue(r.body.startswith(
            b'{"kind":"RoleBinding","apiVersion":"rbac.authorization.platform.io/v1",'
            b'"metadata":{"name":"rb","namespace":"default","uid":'), r.body)

    @inlineCallbacks
    def test_update_keeps_order(self):
        """A PUT and a merge patch answer, and store, in upstream's order too."""
        created = yield self.client.post(PODS, SCRAMBLED_POD)
        body = dict(created.json())
        body = {"status": body["status"], "spec": body["spec"], "metadata": body["metadata"]}
        body["metadata"] = dict(reversed(list(body["metadata"].items())))
        body["metadata"]["labels"] = {"c": "3", "a": "1"}
        put = yield self.client.put(f"{PODS}/p", body)
        self.assertEqual(put.code, 200, put.body)
        patched = yield self.client.patch(f"{PODS}/p", {"metadata": {"labels": {"b": "2"}}})
        for response in (put, patched):
            meta = json.loads(response.body, object_pairs_hook=lambda pairs: pairs)[2][1]
            self.assertEqual([k for k, _ in meta], [
                "name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels",
                "annotations", "managedFields"])
        got = yield self.client.get(f"{PODS}/p")
        self.assertEqual(got.body, patched.body)
        self.assertIn(b'"labels":{"a":"1","b":"2","c":"3"}', got.body)

    @inlineCallbacks
    def test_pretty_and_list_meta(self):
        """Pretty output keeps the order; a list is kind, apiVersion, metadata, items."""
        yield self.client.post(PODS, SCRAMBLED_POD)
        r = yield self.client.get(f"{PODS}?pretty=true&limit=1")
        self.assertTrue(r.body.startswith(
            b'{\n  "kind": "PodList",\n  "apiVersion": "v1",\n  "metadata": {\n'
            b'    "resourceVersion": "'), r.body)
        self.assertIn(b'"items": [\n    {\n      "kind": "Pod",\n      "apiVersion": "v1",\n'
                      b'      "metadata": {\n        "name": "p",\n', r.body)
