"""
Events (issue 32) end to end on the in-memory server: core ``v1`` and
``events.platform.io/v1`` as one storage (each version reads what the other wrote, one
name space, watches of either version), upstream's ValidateEventCreate/Update per
version (messages pinned from pkg/apis/core/validation/events.go), the field selectors
of EventToSelectableFields, printEvent's columns, Protobuf, and ``--event-ttl`` expiry on
a ``Clock`` (after a restart too).
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs import protobufcodec
from platformd.protos.platform.api.core.v1 import generated_pb2 as core
from platformd.protos.platform.api.events.v1 import generated_pb2 as eventsv1
from platformd.protos.platform.apimachinery.pkg.runtime import generated_pb2 as runtime
from platformd.storage.memory import MemoryStorage

from tests.stub import StubServer

CORE = "/api/v1/namespaces/default/events"
NEW = "/apis/events.platform.io/v1/namespaces/default/events"
TABLE = "application/json;as=Table;g=meta.platform.io;v=v1"


def core_event(name="e1", involved="p", namespace="default", **extra):
    body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": involved, "namespace": namespace,
                               "apiVersion": "v1", "uid": "u-1"},
            "reason": "Started", "message": "Started container", "type": "Normal",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "1970-01-01T00:00:00Z", "lastTimestamp": "1970-01-01T00:00:00Z",
            "count": 1}
    body.update(extra)
    return body


def new_event(name="n1", **extra):
    body = {"apiVersion": "events.platform.io/v1", "kind": "Event", "metadata": {"name": name},
            "eventTime": "1970-01-01T00:00:00.000000Z", "reportingController": "example.com/ctl",
            "reportingInstance": "ctl-1", "action": "Scheduling", "reason": "Scheduled",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
            "note": "placed", "type": "Normal"}
    body.update(extra)
    return body


class Base(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.client = self.stub.client()


class VersionsTests(Base):
    def test_discovery(self):
        [resource] = [r for r in self.client.get("/api/v1").json()["resources"]
                      if r["name"] == "events"]
        self.assertEqual((resource["kind"], resource["namespaced"], resource["shortNames"]),
                         ("Event", True, ["ev"]))
        [resource] = self.client.get("/apis/events.platform.io/v1").json()["resources"]
        self.assertEqual((resource["name"], resource["kind"]), ("events", "Event"))

    def test_core_shape(self):
        """Go's JSON of v1.Event: unset times null, source and the reporting fields shown."""
        r = self.client.post(CORE, {"metadata": {"name": "bare"},
                                    "involvedObject": {"namespace": "default"}})
        self.assertEqual(r.code, 201, r.body)
        body = r.json()
        for field in ("firstTimestamp", "lastTimestamp", "eventTime"):
            self.assertIsNone(body[field])
        self.assertEqual((body["source"], body["reportingComponent"],
                          body["reportingInstance"]), ({}, "", ""))

    def test_core_read_as_new(self):
        self.assertEqual(self.client.post(CORE, core_event()).code, 201)
        got = self.client.get(f"{NEW}/e1").json()
        self.assertEqual(got["apiVersion"], "events.platform.io/v1")
        self.assertEqual(got["regarding"]["name"], "p")
        self.assertEqual(got["note"], "Started container")
        self.assertEqual(got["deprecatedSource"], {"component": "kubelet", "host": "node-1"})
        self.assertEqual(got["deprecatedCount"], 1)
        self.assertEqual(got["deprecatedFirstTimestamp"], "1970-01-01T00:00:00Z")
        self.assertIsNone(got["eventTime"])
        for gone in ("involvedObject", "message", "source", "count", "reportingComponent"):
            self.assertNotIn(gone, got)

    def test_new_read_as_core(self):
        r = self.client.post(NEW, new_event())
        self.assertEqual(r.code, 201, r.body)
        got = self.client.get(f"{CORE}/n1").json()
        self.assertEqual(got["apiVersion"], "v1")
        self.assertEqual(got["involvedObject"], {"kind": "Pod", "namespace": "default",
                                                 "name": "p"})
        self.assertEqual((got["message"], got["reportingComponent"], got["reportingInstance"]),
                         ("placed", "example.com/ctl", "ctl-1"))
        self.assertEqual(got["eventTime"], "1970-01-01T00:00:00.000000Z")
        self.assertEqual(got["metadata"]["resourceVersion"],
                         r.json()["metadata"]["resourceVersion"])

    def test_one_name_space(self):
        self.assertEqual(self.client.post(CORE, core_event("same")).code, 201)
        r = self.client.post(NEW, new_event("same"))
        self.assertEqual(r.code, 409)
        self.assertEqual(r.json()["reason"], "AlreadyExists")
        self.assertEqual(len(self.client.get(NEW).json()["items"]), 1)
        self.assertEqual(self.client.delete(f"{NEW}/same").code, 200)
        self.assertEqual(self.client.get(f"{CORE}/same").code, 404)

    def test_update_through_new_version(self):
        self.client.post(NEW, new_event())
        current = self.client.get(f"{NEW}/n1").json()
        current["series"] = {"count": 2, "lastObservedTime": "1970-01-01T00:00:10.000000Z"}
        r = self.client.put(f"{NEW}/n1", current)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(self.client.get(f"{CORE}/n1").json()["series"]["count"], 2)

    def test_watch_across_versions(self):
        watch = self.client.watch(f"{NEW}?watch=1")
        self.client.post(CORE, core_event("w1"))
        self.client.delete(f"{CORE}/w1")
        self.stub.flush()
        self.assertEqual(watch.types(), ["ADDED", "DELETED"])
        self.assertEqual(watch.events[0]["object"]["apiVersion"], "events.platform.io/v1")
        self.assertEqual(watch.events[0]["object"]["note"], "Started container")
        core_watch = self.client.watch(f"{CORE}?watch=1")
        self.client.post(NEW, new_event("w2"))
        self.stub.flush()
        self.assertEqual(core_watch.events[-1]["object"]["message"], "placed")
        self.assertEqual(watch.events[-1]["object"]["note"], "placed")
        watch.close()
        core_watch.close()

    def test_protobuf_both_versions(self):
        self.client.post(CORE, core_event())
        for path, message, api_version in ((CORE, core.Event, "v1"),
                                           (NEW, eventsv1.Event, "events.platform.io/v1")):
            r = self.client.get(f"{path}/e1", headers={"Accept": protobufcodec.PROTOBUF})
            self.assertEqual(r.code, 200)
            unknown = runtime.Unknown.FromString(r.body[4:])
            self.assertEqual(unknown.typeMeta.apiVersion, api_version)
            event = message.FromString(unknown.raw)
            self.assertEqual(event.reason, "Started")
        # A Protobuf body (client-go's event recorder sends one) through each version.
        codec = protobufcodec.ProtobufCodec()
        r = self.client.post(CORE, codec.encode(core_event("pb")),
                             content_type=protobufcodec.PROTOBUF)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["involvedObject"]["name"], "p")
        self.assertIsNone(r.json()["eventTime"])
        r = self.client.post(NEW, codec.encode(new_event("pb2")),
                             content_type=protobufcodec.PROTOBUF)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["eventTime"], "1970-01-01T00:00:00.000000Z")
        self.assertEqual(self.client.get(f"{CORE}/pb2").json()["reportingComponent"],
                         "example.com/ctl")
        # core v1 field numbers: involvedObject=2, reason=3; events/v1: reason=7
        raw = core.Event(reason="x").SerializeToString()
        self.assertEqual(raw, b"\x1a\x01x")
        self.assertEqual(eventsv1.Event(reason="x").SerializeToString(), b"\x3a\x01x")


class ValidationTests(Base):
    def test_involved_namespace_must_match(self):
        r = self.client.post(CORE, core_event(namespace="other"))
        self.assertEqual(r.code, 422)
        self.assertEqual(r.json()["message"],
                         'Event "e1" is invalid: involvedObject.namespace: Invalid value: '
                         '"other": does not match event.namespace')

    def test_cluster_scoped_object_in_default(self):
        """An event about a cluster-scoped object may live in default."""
        r = self.client.post(CORE, core_event(namespace=""))
        self.assertEqual(r.code, 201, r.body)
        self.client.post("/api/v1/namespaces", {"metadata": {"name": "ns1"}})
        r = self.client.post("/api/v1/namespaces/ns1/events", core_event("x", namespace=""))
        self.assertEqual(r.code, 422)

    def test_event_time_needs_reporting_fields(self):
        r = self.client.post(CORE, {"metadata": {"name": "t"}, "eventTime":
                                    "1970-01-01T00:00:00.000000Z",
                                    "involvedObject": {"namespace": "default"}})
        self.assertEqual(r.code, 422)
        self.assertEqual([(c["field"], c["message"]) for c in r.json()["details"]["causes"]], [
            ("reportingController", "Required value"),
            ("reportingController", "Invalid value: \"\": name part must be non-empty"),
            ("reportingController", "Invalid value: \"\": name part must consist of "
             "alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
             "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
            ("reportingInstance", "Required value"),
            ("action", "Required value"),
            ("reason", "Required value")])

    def test_limits(self):
        r = self.client.post(NEW, new_event(note="x" * 1025, action="a" * 129))
        self.assertEqual(r.code, 422)
        self.assertEqual([(c["field"], c["message"]) for c in r.json()["details"]["causes"]], [
            ("action", 'Invalid value: "": can have at most 128 characters'),
            ("message", 'Invalid value: "": can have at most 1024 characters')])

    def test_strict_rules_only_through_new_version(self):
        body = new_event(type="Odd", deprecatedCount=3,
                         deprecatedSource={"component": "c"},
                         series={"count": 1})
        r = self.client.post(NEW, body)
        self.assertEqual(r.code, 422)
        self.assertEqual([(c["field"], c["message"]) for c in r.json()["details"]["causes"]], [
            ("series.count", 'Invalid value: "": should be at least 2'),
            ("series.lastObservedTime", "Required value"),
            ("type", 'Invalid value: "": has invalid value: Odd'),
            ("count", 'Invalid value: "": needs to be unset'),
            ("source", 'Invalid value: "": needs to be unset')])
        # The same event through core v1: legacy rules only.
        stored = {"metadata": {"name": "n1"}, "eventTime": body["eventTime"],
                  "reportingComponent": "example.com/ctl", "reportingInstance": "ctl-1",
                  "action": "a", "reason": "r", "type": "Odd", "count": 3,
                  "involvedObject": {"namespace": "default"}, "series": {"count": 1}}
        self.assertEqual(self.client.post(CORE, stored).code, 201)

    def test_strict_update_immutable(self):
        self.client.post(NEW, new_event())
        current = self.client.get(f"{NEW}/n1").json()
        current["note"] = "changed"
        current["reason"] = "Other"
        r = self.client.put(f"{NEW}/n1", current)
        self.assertEqual(r.code, 422)
        self.assertEqual([(c["field"], c["message"]) for c in r.json()["details"]["causes"]], [
            ("reason", 'Invalid value: "Other": field is immutable'),
            ("message", 'Invalid value: "changed": field is immutable'),
            ("reason", 'Invalid value: "Other": field is immutable')])
        # Through core v1 the same change is allowed (legacy validation only).
        core_current = self.client.get(f"{CORE}/n1").json()
        core_current["message"] = "changed"
        self.assertEqual(self.client.put(f"{CORE}/n1", core_current).code, 200)

    def test_name_rules(self):
        r = self.client.post(NEW, new_event("Upper"))
        self.assertEqual(r.code, 422)  # NameIsDNSSubdomain through events/v1
        self.assertEqual(self.client.post(CORE, core_event("Upper.Case")).code, 201)

    def test_put_creates(self):
        r = self.client.put(f"{CORE}/put", core_event("put"))
        self.assertEqual(r.code, 201, r.body)
        body = self.client.get(f"{CORE}/put").json()
        del body["metadata"]["resourceVersion"]
        body["count"] = 2
        self.assertEqual(self.client.put(f"{CORE}/put", body).code, 200)  # unconditional


class GoTimeTests(SynchronousTestCase):
    def test_written_form_as_parsing_gives(self):
        """A time already in the written form comes back as parsing and writing it
        gives it, and those parsing would change (years before 1000, hour 24, a leap
        second, an offset, fractions) are still parsed."""
        import re
        from platformd.registry.kinds import event
        texts = ("2026-01-01T00:00:00Z", "1999-12-31T23:59:59Z", "2026-02-30T00:00:00Z",
                 "2026-13-01T00:00:00Z", "0999-01-01T00:00:00Z", "2026-01-01T24:00:00Z",
                 "2026-01-01T23:59:60Z", "2026-01-01T01:00:00+01:00",
                 "2026-01-01T00:00:00.5Z", "2026-01-01T00:00:00", "\u0662026-01-01T00:00:00Z",
                 "nonsense", "", None)
        fast = [event.go_time(text) for text in texts]
        self.patch(event, "_WRITTEN", re.compile(r"(?!)"))  # every text parsed
        self.assertEqual(fast, [event.go_time(text) for text in texts])
        self.assertEqual(fast[:4], list(texts[:4]))
        self.assertEqual(fast[7], "2026-01-01T00:00:00Z")


class SelectorTests(Base):
    def setUp(self):
        super().setUp()
        self.client.post(CORE, core_event("a", involved="p1"))
        self.client.post(CORE, core_event("b", involved="p2", type="Warning",
                                          reason="BackOff"))
        self.client.post(NEW, new_event("c"))

    def names(self, path, selector):
        r = self.client.get(f"{path}?fieldSelector={selector}")
        self.assertEqual(r.code, 200, r.body)
        return [i["metadata"]["name"] for i in r.json()["items"]]

    def test_core_labels(self):
        self.assertEqual(self.names(CORE, "involvedObject.name%3Dp1"), ["a"])
        self.assertEqual(self.names(CORE, "involvedObject.kind%3DPod,type%3DWarning"), ["b"])
        self.assertEqual(self.names(CORE, "reason%3DBackOff"), ["b"])
        self.assertEqual(self.names(CORE, "source%3Dkubelet"), ["a", "b"])
        self.assertEqual(self.names(CORE, "reportingComponent%3Dexample.com/ctl"), ["c"])
        self.assertEqual(self.names(CORE, "involvedObject.uid%3Du-1,metadata.name%21%3Da"),
                         ["b"])
        self.assertEqual(self.names(CORE, "involvedObject.apiVersion%3Dv1,"
                                          "involvedObject.namespace%3Ddefault,"
                                          "involvedObject.fieldPath%3D,"
                                          "involvedObject.resourceVersion%3D"), ["a", "b"])

    def test_unsupported_label(self):
        r = self.client.get(f"{CORE}?fieldSelector=message%3Dx")
        self.assertEqual(r.code, 400)
        self.assertEqual(r.json()["message"], "field label not supported: message")

    def test_new_version_labels(self):
        self.assertEqual(self.names(NEW, "regarding.name%3Dp1"), ["a"])
        self.assertEqual(self.names(NEW, "reportingController%3Dexample.com/ctl"), ["c"])
        self.assertEqual(self.names(NEW, "source%3Dkubelet"), ["a", "b"])


class TableTests(Base):
    def test_columns(self):
        self.client.post(CORE, core_event())
        self.stub.advance(125)
        table = self.client.get(CORE, headers={"Accept": TABLE}).json()
        self.assertEqual([(c["name"], c["priority"]) for c in table["columnDefinitions"]], [
            ("Last Seen", 0), ("Type", 0), ("Reason", 0), ("Object", 0), ("Subobject", 1),
            ("Source", 1), ("Message", 0), ("First Seen", 1), ("Count", 1), ("Name", 1)])
        self.assertEqual(table["rows"][0]["cells"], [
            "2m5s", "Normal", "Started", "pod/p", "", "kubelet, node-1", "Started container",
            "2m5s", 1, "e1"])

    def test_new_style_event(self):
        self.client.post(NEW, new_event())
        self.stub.advance(30)
        for path in (CORE, NEW):
            row = self.client.get(path, headers={"Accept": TABLE}).json()["rows"][0]["cells"]
            self.assertEqual(row, ["30s", "Normal", "Scheduled", "pod/p", "",
                                   "example.com/ctl, ctl-1", "placed", "30s", 1, "n1"])


class ExpiryTests(SynchronousTestCase):
    def make(self, clock, storage, ttl=3600.0):
        stub = StubServer(clock=clock, storage=storage, event_ttl=ttl)
        return stub, stub.client()

    def test_expire_after_ttl_from_last_write(self):
        clock = Clock()
        stub, client = self.make(clock, MemoryStorage(clock), ttl=100)
        self.addCleanup(stub.stop)
        client.post(CORE, core_event("a"))
        stub.advance(60)
        client.post(CORE, core_event("b"))
        watch = client.watch(f"{CORE}?watch=1&resourceVersion=0")
        stub.advance(41)  # a is 101 s old
        self.assertEqual([i["metadata"]["name"] for i in client.get(CORE).json()["items"]],
                         ["b"])
        self.assertEqual(watch.types()[-1], "DELETED")
        self.assertEqual(watch.events[-1]["object"]["metadata"]["name"], "a")
        # A write renews the lease: b updated at 101 s lives until 201 s.
        body = client.get(f"{CORE}/b").json()
        body["count"] = 2
        self.assertEqual(client.put(f"{CORE}/b", body).code, 200)
        stub.advance(90)
        self.assertEqual(client.get(f"{CORE}/b").code, 200)
        stub.advance(15)
        self.assertEqual(client.get(f"{CORE}/b").code, 404)
        self.assertEqual(stub.components.event_expiry.expired, 2)
        watch.close()

    def test_other_kinds_untouched(self):
        clock = Clock()
        stub, client = self.make(clock, MemoryStorage(clock), ttl=10)
        self.addCleanup(stub.stop)
        client.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}})
        client.post(CORE, core_event("a"))
        stub.advance(20)
        self.assertEqual(client.get("/api/v1/namespaces/default/configmaps/c").code, 200)
        self.assertEqual(client.get(f"{CORE}/a").code, 404)

    def test_restart_safe(self):
        """Events stored before a restart expire at their time after it."""
        clock = Clock()
        storage = MemoryStorage(clock)
        stub, client = self.make(clock, storage, ttl=100)
        client.post(CORE, core_event("old"))
        stub.advance(50)
        client.post(CORE, core_event("young"))
        stub.stop()
        stub, client = self.make(clock, storage, ttl=100)
        self.addCleanup(stub.stop)
        self.assertEqual(len(client.get(CORE).json()["items"]), 2)
        stub.advance(51)  # old: written at 0 s, now 101 s
        self.assertEqual([i["metadata"]["name"] for i in client.get(CORE).json()["items"]],
                         ["young"])
        stub.advance(50)
        self.assertEqual(client.get(CORE).json()["items"], [])

    def test_batched(self):
        clock = Clock()
        stub, client = self.make(clock, MemoryStorage(clock), ttl=5)
        self.addCleanup(stub.stop)
        expiry = stub.components.event_expiry
        expiry.batch = 3
        for i in range(7):
            client.post(CORE, core_event(f"e{i}"))
        stub.advance(5)
        self.assertEqual(expiry.expired, 3)
        stub.advance(1)
        self.assertEqual(expiry.expired, 6)
        stub.advance(1)
        self.assertEqual(expiry.expired, 7)
