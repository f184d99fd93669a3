"""``--event-ttl`` over etcd (issue 32): the same test as over SQLite, the events under
the test's own prefix in the shared cluster, restart included."""

from __future__ import annotations

from tests.e2e import test_events_leases
from tests.etcd.test_acceptance import OverEtcd


class EventTTLTestsOverEtcd(OverEtcd, test_events_leases.EventTTLTests):
    pass
