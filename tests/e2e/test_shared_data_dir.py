"""
Two servers over one ``--data-dir`` with ``--shared-data-dir`` (one SQLite database,
``docs/storage.md``), as ``--workers`` runs them:

- ``<Suite>OverSharedDataDir``: the HTTP suites that cross servers most (writes, lists,
  watches and their scope, deletes) through a ``BalancedClient`` sending each request
  (watches included) to the other server in turn: a write on one, the read that checks
  it on the other, a watch from a version the other returned.  The tests that reach
  into one server's own objects are left to the one-server run, as over etcd.
- Service allocation: the bitmaps are changed by compare-and-swap, so the two servers
  racing never hand out one address or port twice.
"""

from __future__ import annotations

import os

from twisted.internet.defer import gatherResults, inlineCallbacks

from tests.e2e import test_deletes, test_lists, test_watch_clients, test_watch_scope, test_writes
from tests.e2e.harness import Client, ServerTestCase, start_server
from tests.e2e.replicas import (
    ONE_SERVER, SERVICES, BalancedClient, race_for_addresses, subclass,
)


class OverSharedDataDir:
    """
    Mixed into a ``ServerTestCase`` suite: another server (``other``) started first on
    the data directory ``server`` is then started on (one database, one PKI), and the
    suite's client a ``BalancedClient`` over both, its first request to ``server``.
    ``server`` wrote ``admin.kubeconfig`` last, with its port, so the suites' kubectl
    and Python clients talk to it too, and a test that looks into ``server`` looks into
    the one they talk to.
    """

    storage_args = ("--shared-data-dir",)

    @inlineCallbacks
    def setUp(self):
        self.server_data_dir = os.path.abspath(self.mktemp())
        self.other = yield start_server(self, *self.server_args,
                                        data_dir=self.server_data_dir)
        yield super().setUp()
        self.client = BalancedClient(self, self.server.pki_dir,
                                     [self.server.port_number, self.other.port_number])


for _module in (test_deletes, test_lists, test_watch_clients, test_watch_scope, test_writes):
    subclass(globals(), _module, OverSharedDataDir, "OverSharedDataDir", ServerTestCase,
             ONE_SERVER)


class ServiceAllocationTests(OverSharedDataDir, ServerTestCase):
    server_args = ("--service-cluster-ip-range", "10.20.0.0/27",
                   "--service-node-port-range", "30000-30039")

    @inlineCallbacks
    def test_racing_servers_never_share_an_address(self):
        """
        A /27 (30 addresses, one the platform Service's) and 24 NodePort services created
        at once, half through each server: every address and node port distinct.
        """
        pki = self.server.pki_dir
        yield race_for_addresses(self, Client(self, pki, self.server.port_number),
                                 Client(self, pki, self.other.port_number))

    @inlineCallbacks
    def test_one_requested_address_goes_to_one(self):
        """The same address asked of both servers at once: one gets it, the other a 422."""
        one = Client(self, self.server.pki_dir, self.server.port_number)
        two = Client(self, self.server.pki_dir, self.other.port_number)
        answers = yield gatherResults([
            client.post(SERVICES, {"metadata": {"name": name}, "spec": {
                "clusterIP": "10.20.0.17", "ports": [{"port": 80}]}})
            for client, name in ((one, "left"), (two, "right"))])
        self.assertEqual(sorted(r.code for r in answers), [201, 422])
        [refused] = [r for r in answers if r.code == 422]
        self.assertIn("failed to allocate IP 10.20.0.17: provided IP is already allocated",
                      refused.json()["message"])
