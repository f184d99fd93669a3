"""
Service cluster IPs and node ports across two replicas over a real etcd cluster: the
allocation bitmaps are stored objects changed by compare-and-swap, so two servers racing
never hand out one address twice; a requested address wanted by both goes to one; what
one releases the other can take; a third replica started later repairs nothing away.
"""

from __future__ import annotations

import base64

import orjson
from twisted.internet import reactor
from twisted.internet.defer import gatherResults, inlineCallbacks
from twisted.internet.task import deferLater

from platformd.protos.etcd.api.etcdserverpb import rpc_pb2
from platformd.util.servicenetwork import ServiceNetwork
from tests.e2e.replicas import race_for_addresses
from tests.etcd.test_replicas import ReplicasTestCase
from tests.storage.test_etcd import raw_kv

SERVICES = "/api/v1/namespaces/default/services"


def service(name: str, **spec) -> dict:
    spec.setdefault("ports", [{"port": 80}])
    return {"metadata": {"name": name}, "spec": spec}


class AllocationAcrossReplicasTests(ReplicasTestCase):
    timeout = 120

    @inlineCallbacks
    def test_racing_replicas_never_share_an_address(self):
        """
        A /27 (30 addresses, one the platform Service's) and 24 NodePort services created
        at once, half through each replica: every address and node port distinct.
        """
        a, b = yield self.replicas(2, "--service-cluster-ip-range", "10.20.0.0/27",
                                   "--service-node-port-range", "30000-30039")
        yield race_for_addresses(self, a, b)

    @inlineCallbacks
    def test_many_at_once_on_one_replica(self):
        """60 creates at once through one replica (a /26 holds 62): changes of a bitmap
        wait their turn and are written together, none runs out of retries."""
        a, _b = yield self.replicas(2, "--service-cluster-ip-range", "10.40.0.0/26")
        answers = yield gatherResults([a.post(SERVICES, service(f"m{n}"))
                                       for n in range(60)])
        self.assertEqual([r.code for r in answers], [201] * 60,
                         [r.body for r in answers if r.code != 201][:1])
        self.assertEqual(len({r.json()["spec"]["clusterIP"] for r in answers}), 60)

    @inlineCallbacks
    def test_racing_creates_agree_with_the_bitmaps(self):
        """
        Services written with their address and port in one transaction, raced by the
        two replicas: 40 rounds of a pair asking for one node port at once, one through
        each (each replica's bitmaps idle, so each create carries them: the loser's
        commit fails on the winner's bitmap, it decides again and is refused, 422 in
        upstream's words), then 40 at once with nothing asked for (most of them
        written behind a bitmap write in flight), then 10 of those changed back to
        ClusterIP at once (their node ports cleared in their updates' transactions).
        Every address and port given is given once, and the bitmaps in etcd hold exactly what the Services hold
        (nothing leaked by a create refused or decided again, nothing written twice).
        """
        a, b = yield self.replicas(2, "--service-cluster-ip-range", "10.50.0.0/25",
                                   "--service-node-port-range", "30000-30099")
        for n in range(40):
            pair = yield gatherResults([
                replica.post(SERVICES, service(f"{name}{n}", type="NodePort",
                                               ports=[{"port": 80, "nodePort": 30000 + n}]))
                for replica, name in ((a, "a"), (b, "b"))])
            self.assertEqual(sorted(r.code for r in pair), [201, 422], [r.body for r in pair])
            [refused] = [r for r in pair if r.code == 422]
            self.assertIn(f"spec.ports[0].nodePort: Invalid value: {30000 + n}: provided "
                          "port is already allocated", refused.json()["message"])
        burst = yield gatherResults([(a if n % 2 else b).post(
            SERVICES, service(f"c{n}", type="NodePort")) for n in range(40)])
        self.assertEqual([r.code for r in burst], [201] * 40,
                         [r.body for r in burst if r.code != 201][:1])
        # Updates carry theirs too: ten give their node ports back, at once.
        back = yield gatherResults([(a if n % 2 else b).patch(
            f"{SERVICES}/c{n}", {"spec": {"type": "ClusterIP", "ports": [{"port": 80}]}},
            content_type="application/merge-patch+json") for n in range(10)])
        self.assertEqual([r.code for r in back], [200] * 10,
                         [r.body for r in back if r.code != 200][:1])
        listed = yield b.get("/api/v1/services")
        specs = [item["spec"] for item in listed.json()["items"]]
        ips = [spec["clusterIP"] for spec in specs]
        ports = [p["nodePort"] for spec in specs for p in spec["ports"] if "nodePort" in p]
        self.assertEqual((len(ips), len(set(ips)), len(ports), len(set(ports))),
                         (81, 81, 70, 70))
        network = ServiceNetwork.parse("10.50.0.0/25", "30000-30099")
        ip_range, port_range = network.ranges[0], network.node_ports
        self.assertEqual({ip_range.address(o) for o in self.stored_offsets("serviceips")},
                         set(ips))
        self.assertEqual({port_range.base + o
                          for o in self.stored_offsets("servicenodeports")}, set(ports))

    def stored_offsets(self, name: str) -> set:
        """The offsets set in the ``RangeAllocation`` ``name`` as stored in etcd."""
        return self.stored_range(name)[0]

    def stored_range(self, name: str, revision: int = 0) -> tuple:
        """The offsets set in the ``RangeAllocation`` ``name`` as stored in etcd at
        ``revision`` (0: now), and the revision that stored it."""
        [stored] = self.etcd_range(f"ranges/{name}", revision)
        number = int.from_bytes(base64.b64decode(orjson.loads(stored.value)["data"]), "big")
        return {bit for bit in range(number.bit_length()) if number >> bit & 1}, \
            stored.mod_revision

    def etcd_range(self, key: str, revision: int = 0) -> list:
        """The etcd versions of ``key`` (below the servers' prefix) at ``revision``."""
        channel, kv, _watch = raw_kv(self.cluster.urls)
        self.addCleanup(channel.close)
        prefix = self.server_args[self.server_args.index("--etcd-prefix") + 1]
        return list(kv.Range(rpc_pb2.RangeRequest(key=f"{prefix}/{key}".encode(),
                                                  revision=revision)).kvs)

    @inlineCallbacks
    def test_a_delete_gives_back_in_its_own_revision(self):
        """
        A NodePort Service's removal clears its address and node port in the removal's
        etcd transaction: the bitmaps as stored at the revision that removed the
        Service no longer hold them, and one revision before, with the Service still
        there, they do (upstream's ``afterDelete`` writes them after, a leak if the
        server dies between).
        """
        a, _b = yield self.replicas(2, "--service-cluster-ip-range", "10.60.0.0/28",
                                    "--service-node-port-range", "30000-30009")
        r = yield a.post(SERVICES, service("gone", type="NodePort"))
        self.assertEqual(r.code, 201, r.body)
        spec = r.json()["spec"]
        network = ServiceNetwork.parse("10.60.0.0/28", "30000-30009")
        ip = network.ranges[0].offset_of(spec["clusterIP"])
        port = network.node_ports.offset_of(spec["ports"][0]["nodePort"])
        r = yield a.delete(SERVICES + "/gone")
        self.assertEqual(r.code, 200, r.body)
        ips, removed = self.stored_range("serviceips")
        ports, ports_revision = self.stored_range("servicenodeports")
        self.assertEqual((ports_revision, ip in ips, port in ports), (removed, False, False))
        self.assertEqual(self.etcd_range("services/default/gone", removed), [])
        self.assertEqual(len(self.etcd_range("services/default/gone", removed - 1)), 1)
        self.assertIn(ip, self.stored_range("serviceips", removed - 1)[0])
        self.assertIn(port, self.stored_range("servicenodeports", removed - 1)[0])

    @inlineCallbacks
    def test_racing_delete_and_create_of_one_address(self):
        """
        Twenty rounds of a Service deleted through one replica while the other creates
        one asking for its address: the create is 201 (after the removal) or 422 (before
        it, in upstream's words), never a second holder; the address is free again
        for the next try, and in the end the bitmap holds exactly the Services'
        addresses.
        """
        a, b = yield self.replicas(2, "--service-cluster-ip-range", "10.70.0.0/26")
        for n in range(20):
            ip = f"10.70.0.{n + 10}"
            r = yield a.post(SERVICES, service(f"old{n}", clusterIP=ip))
            self.assertEqual(r.code, 201, r.body)
            gone, made = yield gatherResults([
                a.delete(f"{SERVICES}/old{n}"),
                b.post(SERVICES, service(f"new{n}", clusterIP=ip))])
            self.assertEqual(gone.code, 200, gone.body)
            self.assertIn(made.code, (201, 422), made.body)
            if made.code == 422:
                self.assertIn(f"failed to allocate IP {ip}: provided IP is already allocated",
                              made.json()["message"])
                r = yield b.post(SERVICES, service(f"new{n}", clusterIP=ip))
                self.assertEqual(r.code, 201, r.body)
        listed = yield b.get(SERVICES)
        ips = [item["spec"]["clusterIP"] for item in listed.json()["items"]]
        self.assertEqual(len(ips), len(set(ips)))
        ip_range = ServiceNetwork.parse("10.70.0.0/26").ranges[0]
        self.assertEqual({ip_range.address(o) for o in self.stored_offsets("serviceips")},
                         set(ips) | {"10.70.0.1"})

    @inlineCallbacks
    def test_one_requested_address_goes_to_one(self):
        a, b = yield self.replicas()
        answers = yield gatherResults([
            a.post(SERVICES, service("left", clusterIP="10.0.0.77")),
            b.post(SERVICES, service("right", clusterIP="10.0.0.77"))])
        self.assertEqual(sorted(r.code for r in answers), [201, 422])
        [refused] = [r for r in answers if r.code == 422]
        self.assertIn("failed to allocate IP 10.0.0.77: provided IP is already allocated",
                      refused.json()["message"])

    @inlineCallbacks
    def test_released_on_one_taken_on_the_other(self):
        a, b = yield self.replicas()
        r = yield a.post(SERVICES, service("first", clusterIP="10.0.0.88"))
        self.assertEqual(r.code, 201, r.body)
        r = yield b.post(SERVICES, service("second", clusterIP="10.0.0.88"))
        self.assertEqual(r.code, 422, r.body)
        r = yield a.delete(SERVICES + "/first")
        self.assertEqual(r.code, 200, r.body)
        r = yield b.post(SERVICES, service("second", clusterIP="10.0.0.88"))
        self.assertEqual(r.code, 201, r.body)

    @inlineCallbacks
    def test_a_replica_started_later_keeps_what_is_in_use(self):
        """A third replica's repair at start keeps every address in use."""
        a, _b = yield self.replicas(2, "--service-cluster-ip-range", "10.30.0.0/28")
        taken = set()
        for n in range(6):
            r = yield a.post(SERVICES, service(f"t{n}"))
            self.assertEqual(r.code, 201, r.body)
            taken.add(r.json()["spec"]["clusterIP"])
        c = yield self.another()
        fresh = set()
        for n in range(7):
            r = yield c.post(SERVICES, service(f"f{n}"))
            self.assertEqual(r.code, 201, r.body)
            fresh.add(r.json()["spec"]["clusterIP"])
        self.assertFalse(fresh & (taken | {"10.30.0.1"}))
        r = yield c.post(SERVICES, service("full"))
        self.assertEqual(r.code, 500, r.body)


class PlatformServiceAcrossReplicasTests(ReplicasTestCase):
    timeout = 120

    @inlineCallbacks
    def test_replicas_share_the_endpoints(self):
        """Each replica's lease puts it in the platform Endpoints; both compute the same
        object, so neither undoes the other's write."""
        a, b = yield self.replicas(2, "--advertise-address", "192.0.2.40")
        ports = sorted(s.port_number for s in self.servers)
        r = yield a.get("/api/v1/namespaces/default/endpoints/platform")
        subsets = r.json()["subsets"]
        self.assertEqual([s["ports"][0]["port"] for s in subsets], ports)
        self.assertEqual({a["ip"] for s in subsets for a in s["addresses"]}, {"192.0.2.40"})
        rv = r.json()["metadata"]["resourceVersion"]
        # A round later (10 s) nothing was rewritten.
        yield deferLater(reactor, 11, lambda: None)
        r = yield b.get("/api/v1/namespaces/default/endpoints/platform")
        self.assertEqual(r.json()["metadata"]["resourceVersion"], rv)
        r = yield b.get("/apis/discovery.platform.io/v1/namespaces/default/endpointslices/"
                        "platform")
        self.assertEqual(r.json()["endpoints"][0]["addresses"], ["192.0.2.40"])
        self.assertEqual(r.json()["ports"][0]["port"], ports[0])
