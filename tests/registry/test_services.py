"""
Service, Endpoints and EndpointSlice end to end on the in-memory server: defaulting,
validation in upstream's words, cluster IP and node port allocation (requested,
refused, released on delete and on type change, nothing on a dry run), the repair of
the bitmaps at start, the server's own Service, tables, field selectors, patches and
Protobuf.
"""

from __future__ import annotations

import base64
import ipaddress
import json

from twisted.internet.defer import gatherResults
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs.protobufcodec import PROTOBUF
from platformd.registry import core
from platformd.registry.serviceallocation import Allocators, SERVICE_IPS_KEY
from platformd.storage.memory import MemoryStorage
from platformd.util.servicenetwork import IPRange, PortRange, ServiceNetwork
from tests.stub import StubServer

SERVICES = "/api/v1/namespaces/default/services"
ENDPOINTS = "/api/v1/namespaces/default/endpoints"
SLICES = "/apis/discovery.platform.io/v1/namespaces/default/endpointslices"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


def service(name: str, **spec) -> dict:
    spec.setdefault("ports", [{"port": 80}])
    return {"metadata": {"name": name}, "spec": spec}


class ServiceCase(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.storage = MemoryStorage(self.clock)
        self.stub = self.boot()
        self.admin = self.stub.client()

    def boot(self) -> StubServer:
        stub = StubServer(clock=self.clock, storage=self.storage)
        self.addCleanup(stub.stop)
        return stub

    def create(self, body: dict, query: str = "", code: int = 201) -> dict:
        r = self.admin.post(SERVICES + query, body)
        self.assertEqual(r.code, code, r.body)
        return r.json()

    def message(self, body: dict, query: str = "") -> str:
        r = self.admin.post(SERVICES + query, body)
        self.assertEqual(r.code, 422, r.body)
        return r.json()["message"]

    def allocations(self) -> list:
        """The bitmaps as the server holds them (written behind to storage: memory
        storage is this server's alone)."""
        return [bytes(b.bits) for b in self.stub.components.allocators.bitmaps]


class DefaultingTests(ServiceCase):
    def test_defaults_and_address(self):
        """Upstream's defaults; an address of 10.0.0.0/24, the family and policy."""
        spec = self.create(service("web", ports=[{"port": 80, "targetPort": 8080},
                                                 {"port": 81, "name": "b"}][:1],
                                   selector={"app": "web"}))["spec"]
        self.assertEqual(spec["ports"], [{"protocol": "TCP", "port": 80, "targetPort": 8080}])
        self.assertEqual((spec["type"], spec["sessionAffinity"], spec["ipFamilies"],
                          spec["ipFamilyPolicy"], spec["internalTrafficPolicy"]),
                         ("ClusterIP", "None", ["IPv4"], "SingleStack", "Cluster"))
        self.assertEqual(spec["clusterIPs"], [spec["clusterIP"]])
        self.assertTrue(spec["clusterIP"].startswith("10.0.0."))
        self.assertNotIn(spec["clusterIP"], ("10.0.0.0", "10.0.0.1", "10.0.0.255"))

    def test_target_port_defaults_to_port_and_named_ports(self):
        spec = self.create(service("named", ports=[
            {"name": "http", "port": 80}, {"name": "grpc", "port": 90, "targetPort": "grpc"}]
        ))["spec"]
        self.assertEqual([p["targetPort"] for p in spec["ports"]], [80, "grpc"])

    def test_client_ip_affinity_default_timeout(self):
        spec = self.create(service("sticky", sessionAffinity="ClientIP"))["spec"]
        self.assertEqual(spec["sessionAffinityConfig"], {"clientIP": {"timeoutSeconds": 10800}})

    def test_status_is_an_empty_load_balancer(self):
        self.assertEqual(self.create(service("st"))["status"], {"loadBalancer": {}})

    def test_node_port_and_load_balancer_defaults(self):
        spec = self.create(service("lb", type="LoadBalancer"))["spec"]
        self.assertEqual((spec["externalTrafficPolicy"], spec["allocateLoadBalancerNodePorts"]),
                         ("Cluster", True))
        self.assertTrue(30000 <= spec["ports"][0]["nodePort"] <= 32767)

    def test_headless(self):
        spec = self.create(service("hl", clusterIP="None", selector={"a": "b"}))["spec"]
        self.assertEqual((spec["clusterIP"], spec["clusterIPs"], spec["ipFamilies"]),
                         ("None", ["None"], ["IPv4"]))

    def test_external_name(self):
        spec = self.create(service("ext", type="ExternalName",
                                   externalName="db.example.com"))["spec"]
        self.assertNotIn("clusterIP", spec)
        self.assertNotIn("ipFamilies", spec)


class ValidationTests(ServiceCase):
    def test_upstream_messages(self):
        for body, message in (
                ({"metadata": {"name": "a"}, "spec": {}},
                 'Service "a" is invalid: spec.ports: Required value'),
                (service("a", ports=[{"port": 80, "protocol": "HTTP"}]),
                 'Service "a" is invalid: spec.ports[0].protocol: Unsupported value: "HTTP": '
                 'supported values: "SCTP", "TCP", "UDP"'),
                (service("a", ports=[{"port": 0}]),
                 'Service "a" is invalid: [spec.ports[0].port: Invalid value: 0: must be '
                 'between 1 and 65535, inclusive, spec.ports[0].targetPort: Invalid value: 0: '
                 'must be between 1 and 65535, inclusive]'),
                (service("a", ports=[{"port": 80}, {"port": 81}]),
                 'Service "a" is invalid: [spec.ports[0].name: Required value, '
                 'spec.ports[1].name: Required value]'),
                (service("a", ports=[{"port": 80, "nodePort": 30001}]),
                 "Service \"a\" is invalid: spec.ports[0].nodePort: Forbidden: may not be "
                 "used when `type` is 'ClusterIP'"),
                (service("a", type="Bogus"),
                 'Service "a" is invalid: spec.type: Unsupported value: "Bogus": supported '
                 'values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"'),
                (service("a", type="ExternalName"),
                 'Service "a" is invalid: spec.externalName: Required value'),
                (service("a", clusterIP="nonsense"),
                 'Service "a" is invalid: spec.clusterIPs[0]: Invalid value: "nonsense": must '
                 'be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'),
                (service("1abc"),
                 'Service "1abc" is invalid: metadata.name: Invalid value: "1abc": a DNS-1035 '
                 "label must consist of lower case alphanumeric characters or '-', start "
                 "with an alphabetic character, and end with an alphanumeric character (e.g. "
                 "'my-name',  or 'abc-123', regex used for validation is "
                 "'[a-z]([-a-z0-9]*[a-z0-9])?')"),
                (service("a", ipFamilyPolicy="RequireDualStack"),
                 'Service "a" is invalid: spec.ipFamilyPolicy: Invalid value: '
                 '"RequireDualStack": this cluster is not configured for dual-stack services'),
                (service("a", ports=[{"port": 80, "targetPort": "Bad_Name"}]),
                 'Service "a" is invalid: spec.ports[0].targetPort: Invalid value: "Bad_Name": '
                 'must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)'),
        ):
            self.assertEqual(self.message(body), message)

    def test_requested_address_already_allocated(self):
        self.create(service("first", clusterIP="10.0.0.50"))
        self.assertEqual(
            self.message(service("second", clusterIP="10.0.0.50")),
            'Service "second" is invalid: spec.clusterIPs: Invalid value: ["10.0.0.50"]: '
            "failed to allocate IP 10.0.0.50: provided IP is already allocated")

    def test_requested_address_out_of_range(self):
        self.assertEqual(
            self.message(service("far", clusterIP="192.168.1.1")),
            'Service "far" is invalid: spec.clusterIPs: Invalid value: ["192.168.1.1"]: '
            "failed to allocate IP 192.168.1.1: the provided IP (192.168.1.1) is not in the "
            "valid range. The range of valid IPs is 10.0.0.0/24")

    def test_node_port_refusals(self):
        self.create(service("np1", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
        self.assertEqual(
            self.message(service("np2", type="NodePort",
                                 ports=[{"port": 80, "nodePort": 30080}])),
            'Service "np2" is invalid: spec.ports[0].nodePort: Invalid value: 30080: '
            "provided port is already allocated")
        self.assertEqual(
            self.message(service("np3", type="NodePort", ports=[{"port": 80, "nodePort": 80}])),
            'Service "np3" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided '
            "port is not in the valid range. The range of valid ports is 30000-32767")

    def test_refused_create_releases_what_it_allocated(self):
        """An invalid service (a bad selector) gives its address back."""
        before = self.allocations()
        r = self.admin.post(SERVICES, service("bad", clusterIP="10.0.0.60", type="NodePort",
                                              selector={"a": "b c"}))
        self.assertEqual(r.code, 422, r.body)
        self.assertEqual(self.allocations(), before)
        self.create(service("good", clusterIP="10.0.0.60"))

    def test_cluster_ip_may_not_change(self):
        self.create(service("fixed", clusterIP="10.0.0.70"))
        r = self.admin.patch(SERVICES + "/fixed", {"spec": {"clusterIP": "10.0.0.71",
                                                            "clusterIPs": ["10.0.0.71"]}},
                             content_type="application/merge-patch+json")
        self.assertEqual(r.code, 422, r.body)
        self.assertIn('spec.clusterIPs[0]: Invalid value: ["10.0.0.71"]: may not change once '
                      "set", r.json()["message"])


class AllocationTests(ServiceCase):
    def test_addresses_are_distinct(self):
        ips = {self.create(service(f"s{n}"))["spec"]["clusterIP"] for n in range(40)}
        self.assertEqual(len(ips), 40)
        self.assertNotIn("10.0.0.1", ips)

    def test_dry_run_allocates_nothing(self):
        """Spec 4.8.6: the answer shows an address and a port, nothing is reserved."""
        before = self.allocations()
        spec = self.create(service("dry", type="NodePort"), "?dryRun=All")["spec"]
        self.assertEqual(spec["clusterIP"], "10.0.0.0")
        self.assertEqual(spec["ports"][0]["nodePort"], 30001)
        spec = self.create(service("dry2", clusterIP="10.0.0.80", type="NodePort",
                                   ports=[{"port": 80, "nodePort": 30090}]),
                           "?dryRun=All")["spec"]
        self.assertEqual((spec["clusterIP"], spec["ports"][0]["nodePort"]),
                         ("10.0.0.80", 30090))
        self.assertEqual(self.allocations(), before)
        self.assertEqual(self.admin.get(SERVICES + "/dry").code, 404)
        self.create(service("real", clusterIP="10.0.0.80", type="NodePort",
                            ports=[{"port": 80, "nodePort": 30090}]))

    def test_dry_run_update_allocates_nothing(self):
        self.create(service("grow"))
        before = self.allocations()
        r = self.admin.patch(SERVICES + "/grow?dryRun=All", {"spec": {"type": "NodePort"}},
                             content_type="application/merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertTrue(r.json()["spec"]["ports"][0]["nodePort"])
        self.assertEqual(self.allocations(), before)
        self.assertNotIn("nodePort", self.admin.get(SERVICES + "/grow").json()["spec"]["ports"][0])

    def test_delete_releases(self):
        self.create(service("gone", clusterIP="10.0.0.90", type="NodePort",
                            ports=[{"port": 80, "nodePort": 30100}]))
        self.assertEqual(self.admin.delete(SERVICES + "/gone").code, 200)
        self.create(service("again", clusterIP="10.0.0.90", type="NodePort",
                            ports=[{"port": 80, "nodePort": 30100}]))

    def test_delete_collection_and_namespace_deletion_release(self):
        self.create(service("c1", clusterIP="10.0.0.101"))
        self.assertEqual(self.admin.delete(SERVICES).code, 200)
        self.create(service("c2", clusterIP="10.0.0.101"))
        self.assertEqual(self.admin.post("/api/v1/namespaces",
                                         {"metadata": {"name": "gone"}}).code, 201)
        r = self.admin.post("/api/v1/namespaces/gone/services",
                            service("n1", clusterIP="10.0.0.102"))
        self.assertEqual(r.code, 201, r.body)
        self.admin.delete("/api/v1/namespaces/gone")
        self.stub.advance(5)
        self.assertEqual(self.admin.get("/api/v1/namespaces/gone").code, 404)
        self.create(service("n2", clusterIP="10.0.0.102"))

    def test_delete_removes_the_services_endpoints(self):
        self.create(service("withep"))
        r = self.admin.post(ENDPOINTS, {"metadata": {"name": "withep"}, "subsets": [
            {"addresses": [{"ip": "192.0.2.5"}], "ports": [{"port": 80}]}]})
        self.assertEqual(r.code, 201, r.body)
        self.admin.delete(SERVICES + "/withep")
        self.assertEqual(self.admin.get(ENDPOINTS + "/withep").code, 404)

    def test_type_change_releases_node_ports_and_addresses(self):
        self.create(service("flip", clusterIP="10.0.0.95", type="NodePort",
                            ports=[{"port": 80, "nodePort": 30200}]))
        r = self.admin.patch(SERVICES + "/flip", {"spec": {"type": "ClusterIP"}},
                             content_type="application/merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertNotIn("nodePort", r.json()["spec"]["ports"][0])
        self.create(service("takes-port", type="NodePort", ports=[{"port": 80,
                                                                    "nodePort": 30200}]))
        r = self.admin.patch(SERVICES + "/flip", {"spec": {"type": "ExternalName",
                                                           "externalName": "x.example.com"}},
                             content_type="application/merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertNotIn("clusterIP", r.json()["spec"])
        self.create(service("takes-ip", clusterIP="10.0.0.95"))

    def test_update_keeps_allocated_values(self):
        """A PUT that leaves out clusterIP and nodePort keeps them (patchAllocatedValues)."""
        created = self.create(service("keep", type="NodePort"))
        body = {"metadata": {"name": "keep"}, "spec": {"type": "NodePort",
                                                       "ports": [{"port": 80}]}}
        r = self.admin.put(SERVICES + "/keep", body)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["spec"]["clusterIP"], created["spec"]["clusterIP"])
        self.assertEqual(r.json()["spec"]["ports"][0]["nodePort"],
                         created["spec"]["ports"][0]["nodePort"])

    def test_written_behind(self):
        """The server's own storage gets the bitmaps a second later, and at stop."""
        stored = self.storage._current[SERVICE_IPS_KEY].value
        ip = self.create(service("wb"))["spec"]["clusterIP"]
        self.assertEqual(self.storage._current[SERVICE_IPS_KEY].value, stored)
        self.stub.advance(1)
        value = json.loads(self.storage._current[SERVICE_IPS_KEY].value)
        bits = int.from_bytes(base64.b64decode(value["data"]), "big")
        offset = int(ipaddress.ip_address(ip)) - int(ipaddress.ip_address("10.0.0.1"))
        self.assertTrue(bits >> offset & 1)
        self.assertEqual(value["range"], "10.0.0.0/24")

    def test_repair_at_start(self):
        """A restart over a lost bitmap rebuilds it: no address in use is handed out."""
        taken = {self.create(service(f"t{n}"))["spec"]["clusterIP"] for n in range(30)}
        self.stub.stop()
        del self.storage._current[SERVICE_IPS_KEY]
        self.stub = self.boot()
        self.admin = self.stub.client()
        fresh = {self.create(service(f"f{n}"))["spec"]["clusterIP"] for n in range(60)}
        self.assertFalse(fresh & taken)
        self.assertFalse(fresh & {"10.0.0.1"})

    def test_full_range(self):
        stub = StubServer()
        self.addCleanup(stub.stop)
        stub.components.allocators.network  # noqa: B018 -- the default range
        admin = stub.client()
        codes = [admin.post(SERVICES, service(f"x{n}")).code for n in range(254)]
        self.assertEqual(codes[:253], [201] * 253)
        r = admin.post(SERVICES, service("over"))
        self.assertEqual(r.code, 500)
        self.assertEqual(r.json()["message"], "Internal error occurred: failed to allocate a "
                                              "serviceIP: range is full")


class PlatformServiceTests(ServiceCase):
    def test_the_servers_own_service(self):
        r = self.admin.get(SERVICES + "/platform")
        self.assertEqual(r.code, 200, r.body)
        spec = r.json()["spec"]
        self.assertEqual(spec["clusterIP"], "10.0.0.1")
        self.assertEqual(spec["ports"], [{"name": "https", "protocol": "TCP", "port": 443,
                                          "targetPort": 6443}])

    def test_endpoints_and_slice_point_at_the_server(self):
        stub = StubServer(master=lambda: ("192.0.2.10", 6443))
        self.addCleanup(stub.stop)
        admin = stub.client()
        ep = admin.get(ENDPOINTS + "/platform").json()
        self.assertEqual(ep["subsets"], [{"addresses": [{"ip": "192.0.2.10"}], "ports": [
            {"name": "https", "port": 6443, "protocol": "TCP"}]}])
        eps = admin.get(SLICES + "/platform").json()
        self.assertEqual((eps["addressType"], eps["endpoints"][0]["addresses"],
                          eps["metadata"]["labels"]["platform.io/service-name"]),
                         ("IPv4", ["192.0.2.10"], "platform"))
        # Deleted, it comes back at the next round.
        admin.delete(SERVICES + "/platform")
        stub.advance(11)
        self.assertEqual(admin.get(SERVICES + "/platform").json()["spec"]["clusterIP"],
                         "10.0.0.1")
        self.assertEqual(admin.get(ENDPOINTS + "/platform").code, 200)


class ConventionTests(ServiceCase):
    def test_table(self):
        self.create(service("web", clusterIP="10.0.0.20", selector={"app": "web", "b": "c"},
                            ports=[{"port": 80, "targetPort": 8080}]))
        self.create(service("np", clusterIP="10.0.0.21", type="NodePort",
                            ports=[{"port": 80, "nodePort": 30300}]))
        table = self.admin.get(SERVICES, headers=TABLE).json()
        self.assertEqual([(c["name"], c["priority"]) for c in table["columnDefinitions"]],
                         [("Name", 0), ("Type", 0), ("Cluster-IP", 0), ("External-IP", 0),
                          ("Port(s)", 0), ("Age", 0), ("Selector", 1)])
        rows = {row["cells"][0]: row["cells"][:5] + row["cells"][6:] for row in table["rows"]}
        self.assertEqual(rows["web"], ["web", "ClusterIP", "10.0.0.20", "<none>", "80/TCP",
                                       "app=web,b=c"])
        self.assertEqual(rows["np"], ["np", "NodePort", "10.0.0.21", "<none>", "80:30300/TCP",
                                      "<none>"])

    def test_field_selectors(self):
        self.create(service("np", type="NodePort"))
        names = [i["metadata"]["name"] for i in
                 self.admin.get(SERVICES + "?fieldSelector=spec.type%3DNodePort").json()["items"]]
        self.assertEqual(names, ["np"])
        names = [i["metadata"]["name"] for i in self.admin.get(
            SERVICES + "?fieldSelector=spec.clusterIP%3D10.0.0.1").json()["items"]]
        self.assertEqual(names, ["platform"])
        self.assertEqual(self.admin.get(SERVICES + "?fieldSelector=spec.ports%3D1").code, 400)

    def test_strategic_merge_of_ports(self):
        self.create(service("sm", ports=[{"name": "a", "port": 80}]))
        r = self.admin.patch(SERVICES + "/sm", {"spec": {"ports": [{"name": "b", "port": 81}]}},
                             content_type="application/strategic-merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual([p["port"] for p in r.json()["spec"]["ports"]], [81, 80])

    def test_apply(self):
        body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "applied"},
                "spec": {"ports": [{"port": 80}], "selector": {"a": "b"}}}
        r = self.admin.patch(SERVICES + "/applied?fieldManager=me", body,
                             content_type="application/apply-patch+yaml")
        self.assertEqual(r.code, 201, r.body)
        fields = r.json()["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
        self.assertNotIn("f:clusterIP", fields)
        self.assertEqual(fields["f:selector"], {})  # +mapType=atomic

    def test_protobuf(self):
        self.create(service("pb", ports=[{"name": "web", "port": 80, "targetPort": "web"}]))
        r = self.admin.get(SERVICES + "/pb", headers={"Accept": PROTOBUF})
        self.assertEqual(r.code, 200)
        r2 = self.admin.request("PUT", SERVICES + "/pb", r.body, content_type=PROTOBUF)
        self.assertEqual(r2.code, 200, r2.body)
        self.assertEqual(r2.json()["spec"]["ports"][0]["targetPort"], "web")

    def test_discovery(self):
        core_list = self.admin.get("/api/v1").json()
        by_name = {r["name"]: r for r in core_list["resources"]}
        self.assertEqual(by_name["services"]["shortNames"], ["svc"])
        self.assertIn("services/status", by_name)
        self.assertEqual(by_name["endpoints"]["shortNames"], ["ep"])
        group = self.admin.get("/apis/discovery.platform.io/v1").json()
        self.assertEqual([r["name"] for r in group["resources"]], ["endpointslices"])


class EndpointsTests(ServiceCase):
    def test_validation(self):
        for body, message in (
                ({"metadata": {"name": "e"}, "subsets": [{"ports": [{"port": 80}]}]},
                 'Endpoints "e" is invalid: subsets[0]: Required value: must specify '
                 '`addresses` or `notReadyAddresses`'),
                ({"metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "127.0.0.1"}]}]},
                 'Endpoints "e" is invalid: subsets[0].addresses[0].ip: Invalid value: '
                 '"127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)'),
        ):
            r = self.admin.post(ENDPOINTS, body)
            self.assertEqual((r.code, r.json()["message"]), (422, message))

    def test_deprecation_warning(self):
        """Upstream's warning on every request (the group renamed)."""
        for r in (self.admin.get(ENDPOINTS), self.admin.get(ENDPOINTS + "/missing")):
            self.assertEqual(r.header("Warning"), '299 - "v1 Endpoints is deprecated in '
                                                  'v1.33+; use discovery.platform.io/v1 '
                                                  'EndpointSlice"')
        self.assertIsNone(self.admin.get(SERVICES).header("Warning"))

    def test_defaults_and_table(self):
        r = self.admin.post(ENDPOINTS, {"metadata": {"name": "e"}, "subsets": [
            {"addresses": [{"ip": "192.0.2.1"}, {"ip": "192.0.2.2"}],
             "ports": [{"port": 80}]}]})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["subsets"][0]["ports"], [{"port": 80, "protocol": "TCP"}])
        rows = self.admin.get(ENDPOINTS, headers=TABLE).json()["rows"]
        self.assertIn(["e", "192.0.2.1:80,192.0.2.2:80"],
                      [row["cells"][:2] for row in rows])


class EndpointSliceTests(ServiceCase):
    def test_validation(self):
        for body, message in (
                ({"metadata": {"name": "s"}, "endpoints": []},
                 'EndpointSlice.discovery.platform.io "s" is invalid: addressType: Required '
                 'value'),
                ({"metadata": {"name": "s"}, "addressType": "IPv4",
                  "endpoints": [{"addresses": ["2001:db8::1"]}]},
                 'EndpointSlice.discovery.platform.io "s" is invalid: endpoints[0].addresses: '
                 'Invalid value: "2001:db8::1": must be an IPv4 address'),
                ({"metadata": {"name": "s"}, "addressType": "IPv4", "endpoints": [{}]},
                 'EndpointSlice.discovery.platform.io "s" is invalid: endpoints[0].addresses: '
                 'Required value: must contain at least 1 address'),
        ):
            r = self.admin.post(SLICES, body)
            self.assertEqual((r.code, r.json()["message"]), (422, message))

    def test_create_table_generation_and_immutable_type(self):
        r = self.admin.post(SLICES, {
            "metadata": {"name": "s", "labels": {"platform.io/service-name": "web"}},
            "addressType": "IPv4", "endpoints": [{"addresses": ["192.0.2.1"]}],
            "ports": [{"port": 80}]})
        self.assertEqual(r.code, 201, r.body)
        created = r.json()
        self.assertEqual(created["metadata"]["generation"], 1)
        self.assertEqual(created["ports"], [{"name": "", "protocol": "TCP", "port": 80}])
        self.assertEqual(created["endpoints"][0]["conditions"], {})
        rows = self.admin.get(SLICES, headers=TABLE).json()["rows"]
        self.assertIn(["s", "IPv4", "80", "192.0.2.1"], [row["cells"][:4] for row in rows])
        r = self.admin.patch(SLICES + "/s", {"endpoints": [{"addresses": ["192.0.2.2"]}]},
                             content_type="application/merge-patch+json")
        self.assertEqual(r.json()["metadata"]["generation"], 2)
        r = self.admin.patch(SLICES + "/s", {"addressType": "IPv6"},
                             content_type="application/merge-patch+json")
        self.assertEqual(r.code, 422)
        self.assertIn("addressType: Invalid value: \"IPv6\": field is immutable",
                      r.json()["message"])

    def test_protobuf(self):
        self.admin.post(SLICES, {"metadata": {"name": "p"}, "addressType": "IPv4",
                                 "endpoints": [{"addresses": ["192.0.2.1"],
                                                "conditions": {"ready": True}}]})
        r = self.admin.get(SLICES + "/p", headers={"Accept": PROTOBUF})
        self.assertEqual(r.code, 200)
        self.assertIn(b"192.0.2.1", r.body)


class NetworkFlagTests(SynchronousTestCase):
    def test_parse(self):
        network = ServiceNetwork.parse("10.96.0.0/12,fd00::/108", "30000+100")
        self.assertEqual([r.family for r in network.ranges], ["IPv4", "IPv6"])
        self.assertEqual(network.node_ports, PortRange(30000, 100))
        self.assertEqual(IPRange(network.ranges[0].network).first, "10.96.0.1")
        for ranges, ports, message in (
                ("10.0.0.0/8", "30000-32767", "specified --service-cluster-ip-range is too "
                                              "large; for 32-bit addresses, the mask must "
                                              "be >= 12"),
                ("10.0.0.0/24,10.1.0.0/24", "30000-32767",
                 "--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be "
                 "of different IP family"),
                ("10.0.0.0/24", "abc", "--service-node-port-range: unable to parse port "
                                       "range: abc")):
            with self.assertRaises(ValueError) as caught:
                ServiceNetwork.parse(ranges, ports)
            self.assertEqual(str(caught.exception), message)

    def test_dual_stack(self):
        stub = StubServer(service_network=ServiceNetwork.parse("10.0.0.0/24,fd00::/112"))
        self.addCleanup(stub.stop)
        admin = stub.client()
        r = admin.post(SERVICES, service("ds", ipFamilyPolicy="PreferDualStack"))
        self.assertEqual(r.code, 201, r.body)
        spec = r.json()["spec"]
        self.assertEqual(spec["ipFamilies"], ["IPv4", "IPv6"])
        self.assertEqual(len(spec["clusterIPs"]), 2)
        self.assertTrue(spec["clusterIPs"][1].startswith("fd00::"))
        # Downgraded to single-stack: the secondary address goes back; upgraded again,
        # one is allocated anew.
        r = admin.patch(SERVICES + "/ds", {"spec": {"ipFamilyPolicy": "SingleStack"}},
                        content_type="application/merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((r.json()["spec"]["ipFamilies"], len(r.json()["spec"]["clusterIPs"])),
                         (["IPv4"], 1))
        secondary = spec["clusterIPs"][1]
        r = admin.post(SERVICES, service("six", ipFamilies=["IPv6"], clusterIP=secondary))
        self.assertEqual(r.code, 201, r.body)
        r = admin.patch(SERVICES + "/ds", {"spec": {"ipFamilyPolicy": "RequireDualStack"}},
                        content_type="application/merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["spec"]["ipFamilies"], ["IPv4", "IPv6"])
        self.assertNotEqual(r.json()["spec"]["clusterIPs"][1], secondary)
        r = admin.post(SERVICES, service("v6only", ipFamilies=["IPv6"]))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["spec"]["ipFamilies"], ["IPv6"])
        self.assertTrue(r.json()["spec"]["clusterIP"].startswith("fd00::"))
        assert core.SERVICE.kind == "Service"


class CompareAndSwapTests(SynchronousTestCase):
    """Two allocators over one storage without a clock (as two replicas over etcd):
    every change a compare-and-swap write, the loser deciding again."""

    def setUp(self):
        self.storage = MemoryStorage(Clock())
        network = ServiceNetwork.parse("10.9.0.0/27", "30000-30009")
        self.a, self.b = Allocators(self.storage, network), Allocators(self.storage, network)
        self.successResultOf(self.a.repair([], {}))

    def test_interleaved_allocations_are_distinct(self):
        objects = [{"metadata": {"name": f"s{n}"},
                    "spec": {"type": "NodePort", "ports": [{"port": 80}]}} for n in range(10)]
        self.successResultOf(gatherResults([
            (self.a if n % 2 else self.b).allocate_create(obj, False)
            for n, obj in enumerate(objects)]))
        self.assertEqual(len({o["spec"]["clusterIP"] for o in objects}), 10)
        self.assertEqual(len({o["spec"]["ports"][0]["nodePort"] for o in objects}), 10)
        full = {"metadata": {"name": "x"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}
        failure = self.failureResultOf(self.b.allocate_create(full, False))
        self.assertIn("failed to allocate a nodePort: range is full", failure.value.message)

    def test_a_stale_refusal_is_decided_again(self):
        """B saw 10.9.0.5 taken; A released it since: B's request reads again and wins."""
        obj = {"metadata": {"name": "a"}, "spec": {
            "clusterIP": "10.9.0.5", "clusterIPs": ["10.9.0.5"], "ports": [{"port": 80}]}}
        self.successResultOf(self.a.allocate_create(obj, False))
        self.successResultOf(self.b.repair([], {}))  # B's copy now holds 10.9.0.5
        self.successResultOf(self.a.release(obj))
        again = {"metadata": {"name": "b"}, "spec": {
            "clusterIP": "10.9.0.5", "clusterIPs": ["10.9.0.5"], "ports": [{"port": 80}]}}
        self.successResultOf(self.b.allocate_create(again, False))
