"""
IP address and port rules several network kinds share (Service, Endpoints,
EndpointSlice), worded as upstream's ``k8s.io/apimachinery/pkg/util/validation`` and
``pkg/apis/core/validation`` word them.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Optional, Union

from platformd.model import fielderrors as fe
from platformd.model.meta import qualified_name

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

INVALID_IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
PORT_RANGE = "must be between 1 and 65535, inclusive"
_PORT_NAME_CHARS = re.compile(r"^[-a-z0-9]+$")
_ONE_LETTER = re.compile(r"[a-z]")
#: Upstream's ``supportedPortProtocols``.
PROTOCOLS = ("SCTP", "TCP", "UDP")


def parse_ip(text: str) -> Optional[IPAddress]:
    """
    ``text`` as upstream's ``netutils.ParseIPSloppy`` reads it (IPv4 parts with leading
    zeros are decimal), or None.  An IPv4-mapped IPv6 address stays IPv6.
    """
    if not isinstance(text, str) or not text:
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    parts = text.split(".")
    if len(parts) == 4 and all(p.isdigit() and len(p) <= 3 for p in parts):
        numbers = [int(p) for p in parts]
        if all(n < 256 for n in numbers):
            return ipaddress.IPv4Address(".".join(map(str, numbers)))
    return None


def family(ip: IPAddress) -> str:
    """``IPv4`` or ``IPv6`` (upstream's ``IPFamily``); an IPv4-mapped address is IPv6."""
    return "IPv4" if ip.version == 4 else "IPv6"


def is_ipv6_string(text: str) -> bool:
    """Upstream's ``netutils.IsIPv6String``: parses, and is not an IPv4 (or mapped) one."""
    ip = parse_ip(text)
    if ip is None:
        return False
    return ip.version == 6 and ip.ipv4_mapped is None


def ip_causes(path: str, value: str) -> list:
    """Upstream's ``IsValidIPForLegacyField``: one cause when ``value`` is no IP."""
    return [] if parse_ip(value) is not None else [fe.invalid(path, value, INVALID_IP)]


def non_special_ip(path: str, value: str) -> list:
    """Upstream's ``ValidateNonSpecialIP`` (Endpoints addresses, externalIPs)."""
    ip = parse_ip(value)
    if ip is None:
        return [fe.invalid(path, value, "must be a valid IP address")]
    mapped = getattr(ip, "ipv4_mapped", None)
    check = mapped or ip
    causes = []
    if check.is_unspecified:
        causes.append(fe.invalid(path, value, f"may not be unspecified ({value})"))
    if check.is_loopback:
        causes.append(fe.invalid(path, value,
                                 "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
    if check.is_link_local:
        causes.append(fe.invalid(path, value,
                                 "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
    if _link_local_multicast(check):
        causes.append(fe.invalid(path, value, "may not be in the link-local multicast range "
                                              "(224.0.0.0/24, ff02::/10)"))
    return causes


def _link_local_multicast(ip: IPAddress) -> bool:
    if ip.version == 4:
        return ip in ipaddress.ip_network("224.0.0.0/24")
    return ip.packed[0] == 0xff and ip.packed[1] & 0x0f == 0x02


def port_number_problems(port) -> list:
    """Upstream's ``IsValidPortNum``."""
    return [] if isinstance(port, int) and 1 <= port <= 65535 else [PORT_RANGE]


def port_name_problems(name: str) -> list:
    """Upstream's ``IsValidPortName`` (an IANA_SVC_NAME)."""
    problems = []
    if len(name) > 15:
        problems.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARS.match(name):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    elif not _ONE_LETTER.search(name):
        problems.append("must contain at least one letter (a-z)")
    if "--" in name:
        problems.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        problems.append("must not begin or end with a hyphen")
    return problems


def port_num_or_name(path: str, value) -> list:
    """Upstream's ``ValidatePortNumOrName`` for an IntOrString."""
    if isinstance(value, str):
        return [fe.invalid(path, value, p) for p in port_name_problems(value)]
    return [fe.invalid(path, value, p) for p in port_number_problems(value)]


def port_number_causes(path: str, number) -> list:
    """``IsValidPortNum`` of the port at ``path``, as a field error each."""
    return [fe.invalid(path, number, p) for p in port_number_problems(number)]


def protocol_causes(path: str, protocol: Optional[str]) -> list:
    """A port's protocol: required (None), else one of ``PROTOCOLS``.  Service and
    Endpoints ports pass an empty protocol as None (``len(Protocol) == 0``), an
    EndpointSlice only an absent one (its ``*Protocol`` is nil)."""
    if protocol is None:
        return [fe.required(path)]
    if protocol not in PROTOCOLS:
        return [fe.not_supported(path, protocol, PROTOCOLS)]
    return []


def app_protocol_causes(path: str, port: dict) -> list:
    """A port's ``appProtocol``, when given: a qualified name."""
    value = port.get("appProtocol")
    if value is None:
        return []
    return [fe.invalid(path, value, p) for p in qualified_name(value)]
