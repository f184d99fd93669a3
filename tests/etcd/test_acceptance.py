"""
The HTTP acceptance suites of ``tests/e2e`` again, with etcd underneath (issue 17).

- ``<Suite>OverEtcd``: each test's server stores its objects in the process's shared
  three-member cluster under a prefix of its own (``--storage-backend etcd3``), and every
  check (statuses, messages, resource versions, paging, watches and their scope,
  patches, deletes with finalizers, kubectl and the Python client) must hold as it does
  over SQLite.
- ``<Suite>OverTwoReplicas``: the suites that speak only HTTP, through two replicas over
  one prefix behind a balancer that sends each request (watches included) to the other
  replica in turn, as a load balancer in front of N servers may: a write on one, the
  read that checks it on the other, a watch from a version the other replica returned.

The suites are subclassed here, not imported (trial would run the SQLite originals a
second time); ``harness.start_server`` puts the test case's ``storage_args`` first.
"""

from __future__ import annotations

import grpc
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread

from platformd.protos.etcd.api.etcdserverpb import rpc_pb2, rpc_pb2_grpc
from tests.e2e import (
    test_clients, test_deletes, test_lists, test_protobuf, test_resources, test_watch_clients,
    test_watch_scope, test_writes,
)
from tests.e2e.harness import ServerTestCase, start_beside
from tests.e2e.replicas import ONE_SERVER, BalancedClient, subclass
from tests.etcd.cluster import fresh_prefix, shared_cluster


class OverEtcd:
    """
    Mixed into a suite: its servers over the shared cluster, under a prefix of the
    test's own (every server a test starts shares it, as they would share a data
    directory).
    """

    @property
    def etcd_prefix(self) -> str:
        if "_etcd_prefix" not in self.__dict__:
            self._etcd_prefix = fresh_prefix()
        return self._etcd_prefix

    @property
    def storage_args(self) -> tuple:
        return ("--storage-backend", "etcd3",
                "--etcd-servers", ",".join(shared_cluster().urls),
                "--etcd-prefix", self.etcd_prefix, "--etcd-compaction-interval", "0")


class OverTwoReplicas(OverEtcd):
    """
    Mixed into a ``ServerTestCase`` suite: a second replica over the test's prefix,
    sharing the first one's PKI (as replicas behind one balancer must, ``docs/etcd.md``), and the
    suite's client a ``BalancedClient`` over both.
    """

    @inlineCallbacks
    def setUp(self):
        yield super().setUp()
        first = self.server
        second = yield start_beside(self, first, *self.server_args)
        self.client = BalancedClient(self, first.pki_dir,
                                     [first.port_number, second.port_number])


for _module in (test_clients, test_deletes, test_lists, test_protobuf, test_resources,
                test_watch_clients, test_watch_scope, test_writes):
    subclass(globals(), _module, OverEtcd, "OverEtcd")
for _module in (test_deletes, test_lists, test_protobuf, test_resources, test_watch_clients,
                test_watch_scope, test_writes):
    subclass(globals(), _module, OverTwoReplicas, "OverTwoReplicas", ServerTestCase,
             ONE_SERVER)


def _etcd_keys(url: str, prefix: str) -> list:
    """The keys under ``prefix`` in the cluster, read directly (blocking)."""
    with grpc.insecure_channel(url.removeprefix("http://")) as channel:
        key = prefix.encode()
        reply = rpc_pb2_grpc.KVStub(channel).Range(
            rpc_pb2.RangeRequest(key=key, range_end=key[:-1] + bytes([key[-1] + 1]),
                                 keys_only=True), timeout=10)
    return [kv.key.decode() for kv in reply.kvs]


class SeamTests(OverEtcd, ServerTestCase):
    @inlineCallbacks
    def test_objects_stored_in_etcd(self):
        """The suites above really run over etcd: an object created is a key there."""
        r = yield self.client.post("/api/v1/namespaces", {"metadata": {"name": "seam"}})
        self.assertEqual(r.code, 201, r.body)
        keys = yield deferToThread(_etcd_keys, shared_cluster().urls[0], self.etcd_prefix + "/")
        self.assertIn(self.etcd_prefix + "/namespaces/seam", keys)
