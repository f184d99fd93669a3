"""
The API server's own Service (upstream's ``pkg/controlplane/controller/
kubernetesservice`` and its endpoint reconciler): the Service ``platform`` in the
``default`` namespace (upstream: ``kubernetes``), its cluster IP the first address of
the service range, port 443 (``https``) to the server's port; and, when the server has
an address other pods can reach, its Endpoints and EndpointSlice (both named
``platform``) pointing at that address and port.

Kept at start (before the server is ready) and every ``INTERVAL`` seconds: what is
missing is created, what differs is put back (upstream's ``reconcile``), what is as it
should be is left alone (no write).  A write that fails is logged and tried again at
the next round.

Replicas over one etcd (``leases``): upstream's lease endpoint reconciler.  Each
replica renews its lease (``/registry/masterleases/<ip>:<port>``, its address, port and
renewal time) at each round; the endpoints are every replica whose lease is younger
than ``LEASE_TTL``, so every replica computes the same object and none undoes
another's write; a replica that stops deletes its lease (gone after ``LEASE_TTL``
otherwise).  Addresses sharing a port are one subset (several subsets when replicas
listen on different ports); the EndpointSlice lists every address with the lowest port.
"""

from __future__ import annotations

from typing import Callable, Optional

import orjson
from twisted.internet.defer import inlineCallbacks, returnValue
from twisted.logger import Logger

from platformd import errors
from platformd.context import internal
from platformd.registry.kinds import netaddr
from platformd.registry.kinds.endpointslice import MANAGED_BY_LABEL, SERVICE_NAME_LABEL
from platformd.storage.interface import KeyNotFoundError
from platformd.util.ratelog import RateLimitedLog

log = Logger()

NAME = "platform"
NAMESPACE = "default"
#: Upstream's ``DefaultEndpointReconcilerInterval``.
INTERVAL = 10.0
SERVICE_PORT = 443
PORT_NAME = "https"
#: What upstream's reconciler labels its slice with (``controller``'s managed-by value).
MANAGED_BY = "endpoint-reconciler.platform.io"
#: Where replicas' leases live (upstream's ``/masterleases/``) and how long one holds
#: (upstream's master lease TTL).
LEASES = "/registry/masterleases/"
LEASE_TTL = 15.0


class PlatformServiceController:
    """``PlatformServiceController(clock, stores, kinds, cluster_ip, master)``: ``kinds``
    the Service, Endpoints and EndpointSlice kinds; ``cluster_ip`` the Service's address;
    ``master()`` gives ``(address, port)`` the server is reached at (address None: no
    endpoints)."""

    def __init__(self, clock, stores, kinds, cluster_ip: str,
                 master: Callable[[], tuple], interval: float = INTERVAL, leases=None):
        self.clock = clock
        #: The storage replicas share (their leases live there), or None: this server
        #: is the only one.
        self.leases = leases
        self._leased: Optional[str] = None
        self._failures = RateLimitedLog(log, clock=clock)
        service_kind, endpoints_kind, slice_kind = kinds
        self.services = stores[service_kind.gvr]
        self.endpoints = stores[endpoints_kind.gvr]
        self.slices = stores[slice_kind.gvr]
        self.cluster_ip = cluster_ip
        self.master = master
        self.interval = interval
        self._call = None
        self._stopped = False

    def start(self):
        self._stopped = False
        d = self.sync()
        d.addErrback(self._failed)
        d.addCallback(lambda _: self._schedule())
        return d

    def _failed(self, failure) -> None:
        """A round that failed (a write refused, the storage unavailable): logged at
        most once a minute, tried again at the next round; quiet once stopping."""
        if not self._stopped:
            self._failures.warn(f"keeping the platform service failed: "
                                f"{failure.getErrorMessage()}", key=str(failure.type))

    def stop(self):
        self._stopped = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        if self.leases is None or self._leased is None:
            return None
        key, self._leased = self._leased, None
        d = self.leases.delete(key)
        d.addErrback(lambda f: f.trap(KeyNotFoundError))
        d.addErrback(lambda f: log.warn("deleting this server's master lease failed: {why}",
                                        why=f.getErrorMessage()))
        return d

    def _schedule(self) -> None:
        if not self._stopped:
            self._call = self.clock.callLater(self.interval, self._tick)

    def _tick(self) -> None:
        self._call = None
        d = self.sync()
        d.addErrback(self._failed)
        d.addCallback(lambda _: self._schedule())

    @inlineCallbacks
    def sync(self):
        address, port = self.master()
        yield self._service(port)
        if address is None:
            return
        masters = [(address, port)]
        if self.leases is not None:
            masters = yield self._renew(address, port)
        yield self._endpoints(masters)
        yield self._slice(masters)

    @inlineCallbacks
    def _renew(self, address: str, port: int):
        """This replica's lease renewed; ``[(address, port)]`` of every live one."""
        now = self.clock.seconds()
        key = f"{LEASES}{address}:{port}"
        value = orjson.dumps({"ip": address, "port": port, "renewTime": now})
        try:
            yield self.leases.update(key, value, None)
        except KeyNotFoundError:
            yield self.leases.create(key, value)
        self._leased = key
        found = yield self.leases.range(LEASES)
        live = set()
        for kv in found.kvs:
            try:
                lease = orjson.loads(kv.value)
                if now - float(lease["renewTime"]) < LEASE_TTL:
                    live.add((str(lease["ip"]), int(lease["port"])))
            except (ValueError, KeyError, TypeError):
                continue
        live.add((address, port))
        # Upstream's RepackSubsets keeps addresses in their text's order.
        returnValue(sorted(live, key=lambda m: (m[1], m[0])))

    # -- the Service ------------------------------------------------------------------------

    def _wanted_ports(self, port: int) -> list:
        return [{"name": PORT_NAME, "protocol": "TCP", "port": SERVICE_PORT,
                 "targetPort": port}]

    @inlineCallbacks
    def _service(self, port: int):
        wanted = self._wanted_ports(port)
        try:
            current = self.services.get(NAMESPACE, NAME).obj
        except errors.StatusError:
            current = None
        if current is None:
            try:
                yield self.services.create(internal(), {
                    "metadata": {"name": NAME, "labels": {"provider": "platform",
                                                          "component": "apiserver"}},
                    "spec": {"ports": wanted, "clusterIP": self.cluster_ip,
                             "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None",
                             "type": "ClusterIP"}}, NAMESPACE)
            except errors.StatusError as e:
                if e.reason != "AlreadyExists":
                    raise
            return
        spec = current.get("spec") or {}
        # Upstream's getMasterServiceUpdateIfNeeded: the ports and the type only.
        ports = [{k: p.get(k) for k in ("name", "protocol", "port", "targetPort")}
                 for p in spec.get("ports") or ()]
        if ports == wanted and spec.get("type") == "ClusterIP":
            return

        def reset(obj):
            obj = dict(obj)
            obj["spec"] = dict(obj.get("spec") or {}, ports=wanted, type="ClusterIP")
            return obj
        log.warn("resetting the platform service's ports and type")
        yield self.services.update(internal(), NAMESPACE, NAME, reset)

    # -- Endpoints and EndpointSlice ---------------------------------------------------------

    @inlineCallbacks
    def _ensure(self, store, body: dict, same: Callable[[dict], bool]):
        try:
            current = store.get(NAMESPACE, NAME).obj
        except errors.StatusError:
            current = None
        if current is not None and same(current):
            return
        if current is None:
            try:
                yield store.create(internal(), body, NAMESPACE)
                return
            except errors.StatusError as e:
                if e.reason != "AlreadyExists":
                    raise

        def replace(obj):
            out = dict(body)
            out["metadata"] = dict((obj or {}).get("metadata") or {},
                                   labels=body["metadata"].get("labels"))
            out["metadata"].pop("resourceVersion", None)
            return out
        yield store.update(internal(), NAMESPACE, NAME, replace)

    def _endpoints(self, masters: list):
        by_port: dict = {}
        for address, port in masters:
            by_port.setdefault(port, []).append({"ip": address})
        subsets = [{"addresses": addresses,
                    "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}
                   for port, addresses in by_port.items()]
        return self._ensure(self.endpoints, {
            "metadata": {"name": NAME, "labels": {
                "endpointslice.platform.io/skip-mirror": "true"}},
            "subsets": subsets}, lambda obj: obj.get("subsets") == subsets)

    def _slice(self, masters: list):
        port = masters[0][1]
        ip = netaddr.parse_ip(masters[0][0])
        address_type = "IPv6" if ip is not None and ip.version == 6 else "IPv4"
        addresses = sorted({a for a, _ in masters})
        endpoints = [{"addresses": [address], "conditions": {"ready": True}}
                     for address in addresses]
        ports = [{"name": PORT_NAME, "protocol": "TCP", "port": port}]
        labels = {SERVICE_NAME_LABEL: NAME, MANAGED_BY_LABEL: MANAGED_BY}
        return self._ensure(self.slices, {
            "metadata": {"name": NAME, "labels": labels},
            "addressType": address_type, "endpoints": endpoints, "ports": ports},
            lambda obj: (obj.get("addressType") == address_type
                         and obj.get("endpoints") == endpoints
                         and obj.get("ports") == ports
                         and (obj["metadata"].get("labels") or {}) == labels))


def advertise_address(bind: str, given: Optional[str] = None) -> Optional[str]:
    """
    The address the server's endpoints name: ``--advertise-address`` when given, else
    the bind address unless it is unspecified or loopback, else the host's default
    interface address (upstream's ``ResolveBindAddress``), or None when there is none.
    """
    if given:
        return given
    ip = netaddr.parse_ip(bind)
    if ip is not None and not ip.is_unspecified and not ip.is_loopback:
        return str(ip)
    import socket
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((probe, 9))  # no packet is sent: picks the route's source
                found = netaddr.parse_ip(s.getsockname()[0])
        except OSError:
            continue
        if found is not None and not found.is_loopback and not found.is_unspecified \
                and not found.is_link_local:
            return str(found)
    return None
