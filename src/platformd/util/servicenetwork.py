"""
The services' address ranges as the flags give them: ``--service-cluster-ip-range``
(one or two CIDRs, one per IP family, the primary first) and
``--service-node-port-range`` (``min-max`` or ``base+size``), checked as upstream's
``ServerRunOptions.Validate`` checks them.  The allocators over them are
``registry/serviceallocation.py``.
"""

from __future__ import annotations

import ipaddress
from typing import Union

import attrs

#: Upstream's ``--service-cluster-ip-range`` default (``kubeoptions.DefaultServiceIPCIDR``)
#: and ``--service-node-port-range`` default (``DefaultServiceNodePortRange``).
DEFAULT_SERVICE_IP_RANGE = "10.0.0.0/24"
DEFAULT_NODE_PORT_RANGE = "30000-32767"


def _range_offset(size: int, low: int, high: int, step: int) -> int:
    """Upstream's ``calculateRangeOffset``: ``min(max(low, size/step), high)``, 0 for a
    range of ``low`` or fewer."""
    if size <= low:
        return 0
    return min(max(low, size // step), high)


@attrs.frozen
class IPRange:
    """One ``--service-cluster-ip-range`` CIDR as upstream's ``ipallocator.Range``:
    offset 0 is the address after the network's; IPv4 leaves out the broadcast
    address, IPv6 holds at most 65536 addresses."""

    network: Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

    @property
    def family(self) -> str:
        return "IPv4" if self.network.version == 4 else "IPv6"

    @property
    def spec(self) -> str:
        return str(self.network)

    @property
    def base(self) -> int:
        return int(self.network.network_address) + 1

    @property
    def size(self) -> int:
        total = self.network.num_addresses
        if self.network.version == 6:
            total = min(total, 65536)
        else:
            total -= 1
        return max(0, total - 1)

    @property
    def offset(self) -> int:
        return _range_offset(self.network.num_addresses, 16, 256, 16)

    def offset_of(self, text: str) -> int:
        """The bitmap offset of the address, or -1 when outside the range."""
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            return -1
        if ip.version != self.network.version or ip not in self.network:
            return -1
        offset = int(ip) - self.base
        return offset if 0 <= offset < self.size else -1

    def address(self, offset: int) -> str:
        return str(ipaddress.ip_address(self.base + offset))

    def not_in_range(self, text: str) -> str:
        return (f"the provided IP ({text}) is not in the valid range. The range of valid "
                f"IPs is {self.spec}")

    @property
    def first(self) -> str:
        """The address of the API server's own Service: the first of the range."""
        return self.address(0)


@attrs.frozen
class PortRange:
    """``--service-node-port-range`` (``utilnet.PortRange``), both ends included."""

    base: int
    size: int

    @classmethod
    def parse(cls, text: str) -> "PortRange":
        """``min-max`` or ``base+size`` (upstream's ``PortRange.Set``)."""
        text = text.strip()
        try:
            if "+" in text:
                low, _, count = text.partition("+")
                base, size = int(low), int(count)
            elif "-" in text:
                low, _, high = text.partition("-")
                base, size = int(low), int(high) - int(low) + 1
            else:
                base, size = int(text), 1
        except ValueError:
            raise ValueError(f"unable to parse port range: {text}") from None
        if not (0 <= base <= 65535 and 0 < size and base + size - 1 <= 65535):
            raise ValueError(f"range {text} is not a valid port range")
        return cls(base, size)

    @property
    def spec(self) -> str:
        return f"{self.base}-{self.base + self.size - 1}"

    @property
    def offset(self) -> int:
        return _range_offset(self.size, 16, 128, 32)

    def offset_of(self, port: int) -> int:
        offset = port - self.base
        return offset if 0 <= offset < self.size else -1

    def not_in_range(self) -> str:
        return (f"provided port is not in the valid range. The range of valid ports is "
                f"{self.spec}")


@attrs.frozen
class ServiceNetwork:
    """The flags: the service CIDRs (primary first) and the node port range."""

    ranges: tuple = (IPRange(ipaddress.ip_network(DEFAULT_SERVICE_IP_RANGE)),)
    node_ports: PortRange = PortRange(30000, 2768)

    @classmethod
    def parse(cls, cidrs: str = DEFAULT_SERVICE_IP_RANGE,
              node_ports: str = DEFAULT_NODE_PORT_RANGE) -> "ServiceNetwork":
        """From the flags' text; a ``ValueError`` in upstream's words when invalid
        (``ServerRunOptions.Validate``'s cluster IP checks)."""
        parts = [p.strip() for p in cidrs.split(",")] if cidrs.strip() else []
        if not parts:
            raise ValueError("--service-cluster-ip-range must contain at least one valid "
                             "cidr")
        if len(parts) > 2:
            raise ValueError("--service-cluster-ip-range must not contain more than two "
                             "entries")
        ranges = []
        for text in parts:
            try:
                network = ipaddress.ip_network(text, strict=False)
            except ValueError:
                raise ValueError(f"--service-cluster-ip-range: invalid CIDR address: "
                                 f"{text}") from None
            prefix_floor = 12 if network.version == 4 else 108
            bits = 32 if network.version == 4 else 128
            if network.prefixlen < prefix_floor:
                raise ValueError(
                    f"specified --service-cluster-ip-range is too large; for {bits}-bit "
                    f"addresses, the mask must be >= {prefix_floor}")
            ranges.append(IPRange(network))
        if len(ranges) == 2 and ranges[0].family == ranges[1].family:
            raise ValueError("--service-cluster-ip-range[0] and "
                             "--service-cluster-ip-range[1] must be of different IP family")
        try:
            ports = PortRange.parse(node_ports)
        except ValueError as e:
            raise ValueError(f"--service-node-port-range: {e}") from None
        return cls(tuple(ranges), ports)
