"""
A Service's addresses and ports written with the Service, in one storage transaction
(``IStorage.commit``), over a storage other servers share (issue 32): one revision holds
both; another server's change of a bitmap meanwhile has the commit made again, or the
create decided again when it took what was reserved here; a requested address taken
meanwhile is still upstream's 422; nothing reserved outlives a failed create.  Over
``MemoryStorage`` marked shared, two allocators (or two in-memory servers) stand for two
replicas over etcd.
"""

from __future__ import annotations

import orjson
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.registry.interfaces import DecideAgain
from platformd.registry.serviceallocation import (
    NODE_PORTS_KEY, SERVICE_IPS_KEY, Allocators,
)
from platformd.storage.memory import MemoryStorage
from platformd.storage.mvcc import Create
from platformd.util.servicenetwork import ServiceNetwork
from tests.stub import StubServer

SERVICES = "/api/v1/namespaces/default/services"
KEY = "/registry/services/default/"


class SharedMemoryStorage(MemoryStorage):
    """``MemoryStorage`` as a storage replicas share (etcd's ``shared``): the services'
    allocations are compare-and-swapped, not held by one server."""

    shared = True


class FirstFree:
    """An ``rng`` whose every draw is 0: a dynamic allocation takes the first free
    offset of the upper band, so two servers with stale copies choose alike."""

    def randrange(self, _stop: int) -> int:
        return 0


def service(name: str, **spec) -> dict:
    spec.setdefault("ports", [{"port": 80}])
    spec.setdefault("type", "ClusterIP")
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


class CarriedTests(SynchronousTestCase):
    """``Transaction.write`` between two allocators over one shared storage."""

    def setUp(self):
        self.storage = SharedMemoryStorage(Clock())
        network = ServiceNetwork.parse("10.9.0.0/27", "30000-30009")
        self.a, self.b = Allocators(self.storage, network), Allocators(self.storage, network)
        self.successResultOf(self.a.repair([], {}))
        self.successResultOf(self.b.repair([], {}))

    def begin(self, allocators: Allocators, obj: dict):
        return self.successResultOf(allocators.allocate_create(obj, False, carried=True))

    def stored_ips(self) -> bytes:
        return self.successResultOf(self.storage.get(SERVICE_IPS_KEY)).value

    def test_one_commit_holds_the_service_and_its_bitmaps(self):
        """The Service, its address and its node port at one revision, the Service's
        event first; nothing is written before."""
        obj = service("s", type="NodePort")
        before = self.storage.revision
        txn = self.begin(self.a, obj)
        self.assertEqual(self.storage.revision, before)
        kv = self.successResultOf(txn.write(self.storage,
                                            Create(KEY + "s", orjson.dumps(obj))))
        self.assertEqual(self.storage.revision, before + 1)
        self.assertEqual([(e.kv.key, e.revision) for e in self.storage._log[-3:]],
                         [(KEY + "s", kv.mod_revision), (SERVICE_IPS_KEY, kv.mod_revision),
                          (NODE_PORTS_KEY, kv.mod_revision)])
        self.successResultOf(txn.finish(True))
        self.assertEqual(self.a.ips["IPv4"][1].reserved, set())
        # B, its copy of the bitmap behind, reserves the address; its commit finds it
        # taken, and decided again on the bitmap it now holds, it is refused.
        ip = obj["spec"]["clusterIP"]
        late = self.begin(self.b, service("t", clusterIP=ip, clusterIPs=[ip]))
        self.failureResultOf(late.write(self.storage, Create(KEY + "t", b"{}")), DecideAgain)
        self.successResultOf(late.finish(False))
        failure = self.failureResultOf(self.b.allocate_create(
            service("t", clusterIP=ip, clusterIPs=[ip]), False, carried=True))
        self.assertIn("provided IP is already allocated", failure.value.message)

    def test_a_reservation_is_taken_here(self):
        """Two creates under way on one server never reserve one offset."""
        self.a.ips["IPv4"][1].rng = FirstFree()
        one, two = service("one"), service("two")
        self.begin(self.a, one)
        self.begin(self.a, two)
        self.assertNotEqual(one["spec"]["clusterIP"], two["spec"]["clusterIP"])
        same = service("same", clusterIP=one["spec"]["clusterIP"],
                       clusterIPs=[one["spec"]["clusterIP"]])
        failure = self.failureResultOf(self.a.allocate_create(same, False, carried=True))
        self.assertIn("provided IP is already allocated", failure.value.message)

    def test_another_servers_change_has_the_commit_made_again(self):
        """B allocates another address while A's create is decided: A's commit fails on
        the bitmap's revision and is made again on B's bitmap, without deciding again."""
        obj = service("a", clusterIP="10.9.0.20", clusterIPs=["10.9.0.20"])
        txn = self.begin(self.a, obj)
        self.successResultOf(self.b.allocate_create(
            service("b", clusterIP="10.9.0.21", clusterIPs=["10.9.0.21"]), False))
        self.successResultOf(txn.write(self.storage, Create(KEY + "a", orjson.dumps(obj))))
        stored = self.a.ips["IPv4"][1]
        self.successResultOf(stored.load())
        self.assertTrue(stored.has(19) and stored.has(20))

    def test_an_offset_taken_meanwhile_is_decided_again(self):
        """B takes the address A reserved: A's create fails with DecideAgain, writes
        nothing, and its reservation goes; decided again, A gets another address."""
        for allocators in (self.a, self.b):
            allocators.ips["IPv4"][1].rng = FirstFree()
        obj = service("a")
        txn = self.begin(self.a, obj)
        other = service("b")
        self.successResultOf(self.b.allocate_create(other, False))
        self.assertEqual(obj["spec"]["clusterIP"], other["spec"]["clusterIP"])
        revision = self.storage.revision
        failure = self.failureResultOf(txn.write(self.storage, Create(KEY + "a", b"{}")))
        failure.trap(DecideAgain)
        self.assertEqual(self.storage.revision, revision)
        self.successResultOf(txn.finish(False))
        self.assertEqual(self.a.ips["IPv4"][1].reserved, set())
        again = service("a")
        txn = self.begin(self.a, again)
        self.assertNotEqual(again["spec"]["clusterIP"], other["spec"]["clusterIP"])
        self.successResultOf(txn.write(self.storage, Create(KEY + "a", b"{}")))

    def test_a_failed_create_leaves_nothing(self):
        """The Service key taken: 409's KeyExistsError, no bitmap written, the
        reservation gone once the transaction is finished."""
        self.successResultOf(self.storage.create(KEY + "x", b"{}"))
        ips = self.stored_ips()
        obj = service("x", clusterIP="10.9.0.9", clusterIPs=["10.9.0.9"])
        txn = self.begin(self.a, obj)
        self.failureResultOf(txn.write(self.storage, Create(KEY + "x", b"{}")))
        self.successResultOf(txn.finish(False))
        self.assertEqual(self.stored_ips(), ips)
        self.begin(self.b, service("y", clusterIP="10.9.0.9", clusterIPs=["10.9.0.9"]))
        self.begin(self.a, service("z", clusterIP="10.9.0.9", clusterIPs=["10.9.0.9"]))


class ReplicaTests(SynchronousTestCase):
    """Two in-memory servers over one shared storage, through the API."""

    def setUp(self):
        self.clock = Clock()
        self.storage = SharedMemoryStorage(self.clock)
        self.a, self.b = self.boot(), self.boot()

    def boot(self) -> StubServer:
        stub = StubServer(clock=self.clock, storage=self.storage)
        self.addCleanup(stub.stop)
        return stub

    def post(self, stub: StubServer, body: dict, code: int):
        r = stub.client().post(SERVICES, body)
        self.assertEqual(r.code, code, r.body)
        return r.json()

    def test_create_decided_again_on_a_stale_copy(self):
        """B's copy of the bitmap is behind A's create: B's dynamic choice collides, its
        create is decided again and gets the next address; a request for A's address
        is 422 in upstream's words; the bitmap holds exactly the Services' addresses."""
        for stub in (self.a, self.b):
            stub.components.allocators.ips["IPv4"][1].rng = FirstFree()
        first = self.post(self.a, service("first"), 201)["spec"]["clusterIP"]
        second = self.post(self.b, service("second"), 201)["spec"]["clusterIP"]
        self.assertNotEqual(first, second)
        refused = self.post(self.a, service("third", clusterIP=second,
                                            clusterIPs=[second]), 422)
        self.assertEqual(refused["message"],
                         f'Service "third" is invalid: spec.clusterIPs: Invalid value: '
                         f'["{second}"]: failed to allocate IP {second}: provided IP is '
                         f'already allocated')
        exists = self.post(self.b, service("first"), 409)
        self.assertEqual(exists["reason"], "AlreadyExists")
        bitmap = self.a.components.allocators.ips["IPv4"][1]
        self.successResultOf(bitmap.load())
        listed = self.a.client().get("/api/v1/services").json()["items"]
        ips = {item["spec"]["clusterIP"] for item in listed}
        ip_range = self.a.components.allocators.ips["IPv4"][0]
        self.assertEqual({o for o in range(bitmap.size) if bitmap.has(o)},
                         {ip_range.offset_of(ip) for ip in ips})
        for stub in (self.a, self.b):
            self.assertEqual(stub.components.allocators.ips["IPv4"][1].reserved, set())

    def test_refused_and_dry_run_creates_take_nothing(self):
        """A create refused by validation, and a dry run, write nothing and leave
        nothing reserved."""
        revision = self.storage.revision
        r = self.a.client().post(SERVICES + "?dryRun=All", service("dry", type="NodePort"))
        self.assertEqual(r.code, 201, r.body)
        invalid = service("bad", type="NodePort", ports=[{"port": 80, "protocol": "ICMP"}])
        self.post(self.a, invalid, 422)
        self.assertEqual(self.storage.revision, revision)
        allocators = self.a.components.allocators
        self.assertEqual([b.reserved for b in allocators.bitmaps], [set(), set()])

    def test_apply_creates_through_the_transaction(self):
        """A Service created by server-side apply (the update loop's create) is written
        with its address in one commit too."""
        body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "applied"},
                "spec": {"ports": [{"port": 80}], "selector": {"a": "b"}}}
        before = self.storage.revision
        r = self.b.client().patch(SERVICES + "/applied?fieldManager=me", body,
                                  content_type="application/apply-patch+yaml")
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(self.storage.revision, before + 1)
        self.assertEqual([e.kv.key for e in self.storage._log[-2:]],
                         [KEY + "applied", SERVICE_IPS_KEY])


    def patch(self, stub: StubServer, name: str, patch: dict, code: int = 200) -> dict:
        r = stub.client().patch(f"{SERVICES}/{name}", patch,
                                content_type="application/merge-patch+json")
        self.assertEqual(r.code, code, r.body)
        return r.json()

    def test_type_changes_carry_their_node_ports(self):
        """ClusterIP → NodePort takes its node port in the update's commit, NodePort →
        ClusterIP gives it back in the update's commit: one revision each; the port
        given back is free for the other server at once."""
        self.post(self.a, service("grow"), 201)
        before = self.storage.revision
        port = self.patch(self.a, "grow", {"spec": {"type": "NodePort"}})[
            "spec"]["ports"][0]["nodePort"]
        self.assertEqual(self.storage.revision, before + 1)
        self.assertEqual([e.kv.key for e in self.storage._log[-2:]],
                         [KEY + "grow", NODE_PORTS_KEY])
        back = {"spec": {"type": "ClusterIP", "ports": [{"port": 80}]}}
        self.patch(self.a, "grow", back)
        self.assertEqual(self.storage.revision, before + 2)
        self.assertEqual([e.kv.key for e in self.storage._log[-2:]],
                         [KEY + "grow", NODE_PORTS_KEY])
        self.post(self.b, service("taker", type="NodePort",
                                  ports=[{"port": 80, "nodePort": port}]), 201)

    def test_update_decided_again_on_a_stale_copy(self):
        """B's copy of the ports' bitmap is behind A's create: B's update asking for
        that port is decided again and refused in upstream's words, and the Service is
        left as it was."""
        self.post(self.b, service("mine"), 201)
        port = self.post(self.a, service("theirs", type="NodePort"), 201)[
            "spec"]["ports"][0]["nodePort"]
        refused = self.patch(self.b, "mine", {"spec": {
            "type": "NodePort", "ports": [{"port": 80, "nodePort": port}]}}, 422)
        self.assertIn(f"spec.ports[0].nodePort: Invalid value: {port}: provided port is "
                      "already allocated", refused["message"])
        self.assertEqual(self.b.client().get(SERVICES + "/mine").json()["spec"]["type"],
                         "ClusterIP")
        for stub in (self.a, self.b):
            self.assertEqual([b.reserved for b in stub.components.allocators.bitmaps],
                             [set(), set()])

    def test_a_delete_gives_back_in_its_own_commit(self):
        """A NodePort Service's removal clears its address and its node port in the
        removal's commit (one revision, the Service's event first), and the other
        server can take both at once; deleting a terminating one's last finalizer
        (the update loop's removal) gives back in its commit too."""
        made = self.post(self.a, service("gone", type="NodePort"), 201)["spec"]
        ip, port = made["clusterIP"], made["ports"][0]["nodePort"]
        before = self.storage.revision
        r = self.a.client().delete(SERVICES + "/gone")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(self.storage.revision, before + 1)
        self.assertEqual([e.kv.key for e in self.storage._log[-3:]],
                         [KEY + "gone", SERVICE_IPS_KEY, NODE_PORTS_KEY])
        self.post(self.b, service("taker", type="NodePort", clusterIP=ip, clusterIPs=[ip],
                                  ports=[{"port": 80, "nodePort": port}]), 201)
        held = service("held")
        held["metadata"]["finalizers"] = ["example.com/hold"]
        ip = self.post(self.b, held, 201)["spec"]["clusterIP"]
        r = self.b.client().delete(SERVICES + "/held")
        self.assertEqual(r.code, 200, r.body)
        before = self.storage.revision
        self.patch(self.b, "held", {"metadata": {"finalizers": None}})
        self.assertEqual(self.storage.revision, before + 1)
        self.assertEqual([e.kv.key for e in self.storage._log[-2:]],
                         [KEY + "held", SERVICE_IPS_KEY])
        self.post(self.a, service("again", clusterIP=ip, clusterIPs=[ip]), 201)

    def test_a_delete_lost_to_another_writer_gives_back_nothing(self):
        """A removal whose Service changed meanwhile (a precondition on the old
        version) writes nothing: the address stays taken."""
        made = self.post(self.a, service("kept"), 201)
        self.patch(self.b, "kept", {"metadata": {"labels": {"a": "b"}}})
        revision = self.storage.revision
        r = self.a.client().delete(SERVICES + "/kept", {
            "preconditions": {"resourceVersion": made["metadata"]["resourceVersion"]}})
        self.assertEqual(r.code, 409, r.body)
        self.assertEqual(self.storage.revision, revision)
        ip = made["spec"]["clusterIP"]
        self.post(self.b, service("other", clusterIP=ip, clusterIPs=[ip]), 422)
