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
"""

from __future__ import annotations

from typing import Callable, Optional

from twisted.internet.defer import inlineCallbacks
from twisted.logger import Logger

from platformd import errors
from platformd.context import internal
from platformd.registry.kinds import netaddr
from platformd.registry.kinds.endpointslice import MANAGED_BY_LABEL, SERVICE_NAME_LABEL

log = Logger()

NAME = "platform"
NAMESPACE = "default"
#: Upstream's ``DefaultEndpointReconcilerInterval``.
INTERVAL = 10.0
SERVICE_PORT = 443
PORT_NAME = "https"
#: What upstream's reconciler labels its slice with (``controller``'s managed-by value).
MANAGED_BY = "endpoint-reconciler.platform.io"


class PlatformServiceController:
    """``PlatformServiceController(clock, stores, kinds, cluster_ip, master)``: ``kinds``
    the Service, Endpoints and EndpointSlice kinds; ``cluster_ip`` the Service's address;
    ``master()`` gives ``(address, port)`` the server is reached at (address None: no
    endpoints)."""

    def __init__(self, clock, stores, kinds, cluster_ip: str,
                 master: Callable[[], tuple], interval: float = INTERVAL):
        self.clock = clock
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
        d.addErrback(lambda f: log.failure("keeping the platform service failed", f))
        d.addCallback(lambda _: self._schedule())
        return d

    def stop(self) -> None:
        self._stopped = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def _schedule(self) -> None:
        if not self._stopped:
            self._call = self.clock.callLater(self.interval, self._tick)

    def _tick(self) -> None:
        self._call = None
        d = self.sync()
        d.addErrback(lambda f: log.failure("keeping the platform service failed", f))
        d.addCallback(lambda _: self._schedule())

    @inlineCallbacks
    def sync(self):
        address, port = self.master()
        yield self._service(port)
        if address is not None:
            yield self._endpoints(address, port)
            yield self._slice(address, port)

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

    def _endpoints(self, address: str, port: int):
        subsets = [{"addresses": [{"ip": address}],
                    "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}]
        return self._ensure(self.endpoints, {
            "metadata": {"name": NAME, "labels": {
                "endpointslice.platform.io/skip-mirror": "true"}},
            "subsets": subsets}, lambda obj: obj.get("subsets") == subsets)

    def _slice(self, address: str, port: int):
        ip = netaddr.parse_ip(address)
        address_type = "IPv6" if ip is not None and ip.version == 6 else "IPv4"
        endpoints = [{"addresses": [address], "conditions": {"ready": True}}]
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
