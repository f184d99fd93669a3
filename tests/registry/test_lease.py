"""
Lease (``coordination.platform.io/v1``, issue 32) end to end on the in-memory server:
discovery, create/get/list, MicroTime (six fractional digits, UTC), upstream's
ValidateLease messages, AllowCreateOnUpdate and AllowUnconditionalUpdate=false, the
Holder table column, Protobuf with upstream's field numbers and OpenAPI.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs import protobufcodec
from platformd.protos.platform.api.coordination.v1 import generated_pb2 as coordination
from platformd.protos.platform.apimachinery.pkg.runtime import generated_pb2 as runtime

from tests.stub import StubServer

GV = "/apis/coordination.platform.io/v1"
LEASES = f"{GV}/namespaces/default/leases"
TABLE = "application/json;as=Table;g=meta.platform.io;v=v1"


def lease(name="a", **spec):
    return {"apiVersion": "coordination.platform.io/v1", "kind": "Lease",
            "metadata": {"name": name}, "spec": spec}


class LeaseTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.client = self.stub.client()

    def test_discovery(self):
        r = self.client.get(GV)
        self.assertEqual(r.code, 200)
        [resource] = r.json()["resources"]
        self.assertEqual((resource["name"], resource["kind"], resource["namespaced"],
                          resource["singularName"]), ("leases", "Lease", True, "lease"))
        self.assertEqual(resource["verbs"], ["create", "delete", "deletecollection", "get",
                                             "list", "patch", "update", "watch"])
        groups = [g["name"] for g in self.client.get("/apis").json()["groups"]]
        self.assertIn("coordination.platform.io", groups)

    def test_create_get_micro_time(self):
        r = self.client.post(LEASES, lease(holderIdentity="me", leaseDurationSeconds=15,
                                           acquireTime="2026-01-02T03:04:05.123456+01:00",
                                           renewTime="2026-01-02T02:04:06.000001Z"))
        self.assertEqual(r.code, 201, r.body)
        spec = self.client.get(f"{LEASES}/a").json()["spec"]
        self.assertEqual(spec, {"holderIdentity": "me", "leaseDurationSeconds": 15,
                                "acquireTime": "2026-01-02T02:04:05.123456Z",
                                "renewTime": "2026-01-02T02:04:06.000001Z"})

    def test_empty_spec_shown(self):
        r = self.client.post(LEASES, {"metadata": {"name": "bare"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["spec"], {})

    def test_micro_time_needs_six_digits(self):
        """metav1.MicroTime's UnmarshalJSON parses RFC3339Micro: a 400."""
        r = self.client.post(LEASES, lease(renewTime="2026-01-02T03:04:05Z"))
        self.assertEqual(r.code, 400)
        self.assertEqual(r.json()["message"],
                         'Lease in version "v1" cannot be handled as a Lease: parsing time '
                         '"2026-01-02T03:04:05Z" as "2006-01-02T15:04:05.000000Z07:00": '
                         'cannot parse "Z" as ".000000"')

    def test_validation(self):
        r = self.client.post(LEASES, lease(leaseDurationSeconds=0, leaseTransitions=-1,
                                           preferredHolder="b"))
        self.assertEqual(r.code, 422)
        body = r.json()
        self.assertEqual(body["message"],
                         'Lease.coordination.platform.io "a" is invalid: ['
                         'spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0, '
                         'spec.leaseTransitions: Invalid value: -1: must be greater than or '
                         'equal to 0, spec.preferredHolder: Forbidden: may only be specified '
                         'if `strategy` is defined]')

    def test_strategy(self):
        r = self.client.post(LEASES, lease(strategy="Random"))
        self.assertEqual(r.code, 422)
        self.assertEqual(r.json()["details"]["causes"], [{
            "reason": "FieldValueNotSupported", "field": "spec.strategy.strategy",
            "message": 'Unsupported value: "Random": supported values: '
                       '"OldestEmulationVersion"'}])
        r = self.client.post(LEASES, lease(strategy="example.com/mine", preferredHolder="b"))
        self.assertEqual(r.code, 201, r.body)

    def test_put_creates_and_needs_resource_version(self):
        r = self.client.put(f"{LEASES}/p", lease("p", holderIdentity="x"))
        self.assertEqual(r.code, 201, r.body)
        # registry/store.go: AllowUnconditionalUpdate false.
        r = self.client.put(f"{LEASES}/p", lease("p", holderIdentity="y"))
        self.assertEqual(r.code, 422)
        self.assertEqual(r.json()["message"],
                         'leases.coordination.platform.io "p" is invalid: '
                         'metadata.resourceVersion: Invalid value: 0: must be specified for '
                         'an update')
        current = self.client.get(f"{LEASES}/p").json()
        current["spec"]["holderIdentity"] = "y"
        r = self.client.put(f"{LEASES}/p", current)
        self.assertEqual(r.code, 200, r.body)
        stale = dict(current)
        r = self.client.put(f"{LEASES}/p", stale)
        self.assertEqual(r.code, 409)
        r = self.client.patch(f"{LEASES}/p", {"spec": {"holderIdentity": "z"}})
        self.assertEqual(r.code, 200, r.body)

    def test_table(self):
        self.client.post(LEASES, lease(holderIdentity="holder-1"))
        table = self.client.get(LEASES, headers={"Accept": TABLE}).json()
        self.assertEqual([c["name"] for c in table["columnDefinitions"]],
                         ["Name", "Holder", "Age"])
        self.assertEqual(table["rows"][0]["cells"][:2], ["a", "holder-1"])

    def test_protobuf(self):
        self.client.post(LEASES, lease(holderIdentity="me", leaseDurationSeconds=15,
                                       renewTime="2026-01-02T03:04:05.123456Z"))
        r = self.client.get(f"{LEASES}/a", headers={"Accept": protobufcodec.PROTOBUF})
        self.assertEqual(r.code, 200)
        self.assertTrue(r.body.startswith(protobufcodec.MAGIC))
        unknown = runtime.Unknown.FromString(r.body[4:])
        self.assertEqual((unknown.typeMeta.apiVersion, unknown.typeMeta.kind),
                         ("coordination.platform.io/v1", "Lease"))
        message = coordination.Lease.FromString(unknown.raw)
        self.assertEqual(message.spec.holderIdentity, "me")
        self.assertEqual((message.spec.renewTime.seconds, message.spec.renewTime.nanos),
                         (1767323045, 123456000))
        # upstream's numbers: spec=2, holderIdentity=1, leaseDurationSeconds=2, renewTime=4
        self.assertIn(b"\x12", unknown.raw)
        spec = message.spec.SerializeToString()
        self.assertTrue(spec.startswith(b"\x0a\x02me\x10\x0f\x22"), spec)

    def test_openapi(self):
        doc = self.client.get("/openapi/v3/apis/coordination.platform.io/v1").json()
        schemas = doc["components"]["schemas"]
        spec = schemas["io.platform.api.coordination.v1.LeaseSpec"]["properties"]
        self.assertIn("MicroTime", str(spec["renewTime"]))
        self.assertEqual(schemas["io.platform.apimachinery.pkg.apis.meta.v1.MicroTime"]
                         ["format"], "date-time")
