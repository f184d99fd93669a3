"""
Upstream's ``kubernetes.net.ip`` and ``net.cidr`` libraries (``library/ip.go``,
``cidr.go``) over Go's ``net/netip``: ``ip``, ``isIP``, ``ip.isCanonical``, ``family``,
``isUnspecified``, ``isLoopback``, ``isLinkLocalMulticast``, ``isLinkLocalUnicast``,
``isGlobalUnicast``, ``string(ip)``; ``cidr``, ``isCIDR``, ``containsIP``,
``containsCIDR`` (a value or a string), ``ip()``, ``masked``, ``prefixLength``,
``string(cidr)``.  Zones and IPv4-mapped IPv6 addresses are refused as upstream refuses
them, with its messages; ``netip``'s own reason for a malformed address is ``unable to
parse IP`` here whatever it is (Go names a finer one for some, ``IPv4 field has value
>255``).  An IP is a ``net.IP`` holding ``Addr.String()`` (RFC 5952 for IPv6), a CIDR
a ``net.CIDR`` holding ``Prefix.String()``, so ``==`` is netip's.
"""

from __future__ import annotations

import ipaddress

from platformd.cel.library import opaque
from platformd.cel.library.overloads import Implementation, Library, Overload, parses
from platformd.goformat import gonetip
from platformd.goformat.gotext import go_quote


def _go_text(address) -> str:
    """netip's ``Addr.String()``: IPv6 with the longest run of two or more zero groups
    (the first of equals) written ``::``."""
    if address.version == 4:
        return str(address)
    groups = [int.from_bytes(address.packed[i:i + 2], "big") for i in range(0, 16, 2)]
    best, best_len, i = -1, 1, 0
    while i < 8:
        j = i
        while j < 8 and groups[j] == 0:
            j += 1
        if j - i > best_len:
            best, best_len = i, j - i
        i = max(j, i + 1)
    text = [format(g, "x") for g in groups]
    if best < 0:
        return ":".join(text)
    return ":".join(text[:best]) + "::" + ":".join(text[best + best_len:])


def parse_ip(raw: str):
    """``parseIPAddr``: an address without zone, not IPv4-mapped; ``ValueError``."""
    try:
        packed, zone = gonetip.parse_addr(raw)
    except ValueError as error:
        raise ValueError(f"IP Address {go_quote(raw)} parse error during conversion from "
                         f"string: {error}") from None
    if zone:
        raise ValueError(f"IP address {go_quote(raw)} with zone value is not allowed")
    address = ipaddress.ip_address(packed)
    if address.version == 6 and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {go_quote(raw)} is not allowed")
    return address


_CIDR_ERROR = "network address parse error during conversion from string: "


def parse_cidr(raw: str):
    """``parseCIDR``: (address, bits); ``ValueError`` with upstream's message."""
    try:
        packed, bits = gonetip.parse_prefix(raw)
    except ValueError as error:
        raise ValueError(f"{_CIDR_ERROR}{error}") from None
    address = ipaddress.ip_address(packed)
    if address.version == 6 and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {go_quote(raw)} is not allowed")
    return address, bits


def _to_cidr(raw: str):
    """``stringToCIDR``: ``parseCIDR``'s error said after the same words again."""
    try:
        return parse_cidr(raw)
    except ValueError as error:
        raise ValueError(f"{_CIDR_ERROR}{error}") from None


def _ip(address):
    return opaque.make(opaque.IP, _go_text(address))


def _cidr(address, bits: int):
    return opaque.make(opaque.CIDR, f"{_go_text(address)}/{bits}")


def _address(ip):
    return ipaddress.ip_address(opaque.text(ip))


def _prefix(cidr) -> tuple:
    text, _, bits = opaque.text(cidr).rpartition("/")
    return ipaddress.ip_address(text), int(bits)


def _network(cidr):
    address, bits = _prefix(cidr)
    return ipaddress.ip_network(f"{address}/{bits}", strict=False)


def _is_global_unicast(address) -> bool:
    """netip's ``IsGlobalUnicast``: not unspecified, loopback, multicast, link-local
    unicast or (IPv4) the broadcast address; private addresses are global."""
    if address.version == 4 and address == ipaddress.IPv4Address("255.255.255.255"):
        return False
    return not (address.is_unspecified or address.is_loopback or address.is_multicast
                or _link_local_unicast(address))


def _link_local_unicast(address) -> bool:
    net = "169.254.0.0/16" if address.version == 4 else "fe80::/10"
    return address in ipaddress.ip_network(net)


def _link_local_multicast(address) -> bool:
    net = "224.0.0.0/24" if address.version == 4 else "ff02::/16"
    return address in ipaddress.ip_network(net)


def _is_canonical(raw: str) -> bool:
    return _go_text(parse_ip(raw)) == raw


def _contains_ip(cidr, other) -> bool:
    address = parse_ip(other) if isinstance(other, str) else _address(other)
    network = _network(cidr)
    return address.version == network.version and address in network


def _contains_cidr(cidr, other) -> bool:
    address, bits = _to_cidr(other) if isinstance(other, str) else _prefix(other)
    mine, my_bits = _prefix(cidr)
    if address.version != mine.version or my_bits > bits:
        return False
    return ipaddress.ip_network(f"{address}/{my_bits}", strict=False) == _network(cidr)


def _string(value) -> str:
    """``string()`` of an IP or a CIDR (one implementation: both are messages)."""
    if opaque.kind(value) not in (opaque.IP, opaque.CIDR):
        raise TypeError("no such overload")
    return opaque.text(value)


def _ip_function(value):
    """``ip(<string>)`` and ``<cidr>.ip()``: both take one argument."""
    if isinstance(value, str):
        return _ip(parse_ip(value))
    return _ip(_prefix(value)[0])


def _ip_test(test):
    return lambda ip: test(_address(ip))


_I, _C = opaque.IP, opaque.CIDR
IP_LIBRARY = Library(
    "kubernetes.net.ip",
    (Overload("string_to_ip", "ip", ("string",), _I),
     Overload("ip_family", "family", (_I,), "int", member=True),
     Overload("ip_is_canonical", "ip.isCanonical", ("string",), "bool"),
     Overload("ip_is_unspecified", "isUnspecified", (_I,), "bool", member=True),
     Overload("ip_is_loopback", "isLoopback", (_I,), "bool", member=True),
     Overload("ip_is_link_local_multicast", "isLinkLocalMulticast", (_I,), "bool",
              member=True),
     Overload("ip_is_link_local_unicast", "isLinkLocalUnicast", (_I,), "bool", member=True),
     Overload("ip_is_global_unicast", "isGlobalUnicast", (_I,), "bool", member=True),
     Overload("is_ip", "isIP", ("string",), "bool"),
     Overload("ip_to_string", "string", (_I,), "string")),
    (Implementation("ip", ("dyn",), _ip_function),
     Implementation("family", ("dyn",), lambda ip: _address(ip).version, member=True),
     Implementation("ip.isCanonical", ("dyn",), _is_canonical),
     Implementation("isUnspecified", ("dyn",), _ip_test(lambda a: a.is_unspecified),
                    member=True),
     Implementation("isLoopback", ("dyn",), _ip_test(lambda a: a.is_loopback), member=True),
     Implementation("isLinkLocalMulticast", ("dyn",), _ip_test(_link_local_multicast),
                    member=True),
     Implementation("isLinkLocalUnicast", ("dyn",), _ip_test(_link_local_unicast),
                    member=True),
     Implementation("isGlobalUnicast", ("dyn",), _ip_test(_is_global_unicast), member=True),
     Implementation("isIP", ("dyn",), parses(parse_ip)),
     Implementation("string", (_I,), _string)))

CIDR_LIBRARY = Library(
    "net.cidr",
    (Overload("string_to_cidr", "cidr", ("string",), _C),
     Overload("cidr_contains_ip_string", "containsIP", (_C, "string"), "bool", member=True),
     Overload("cidr_contains_ip_ip", "containsIP", (_C, _I), "bool", member=True),
     Overload("cidr_contains_cidr_string", "containsCIDR", (_C, "string"), "bool",
              member=True),
     Overload("cidr_contains_cidr", "containsCIDR", (_C, _C), "bool", member=True),
     Overload("cidr_ip", "ip", (_C,), _I, member=True),
     Overload("cidr_prefix_length", "prefixLength", (_C,), "int", member=True),
     Overload("cidr_masked", "masked", (_C,), _C, member=True),
     Overload("is_cidr", "isCIDR", ("string",), "bool"),
     Overload("cidr_to_string", "string", (_C,), "string")),
    (Implementation("cidr", ("dyn",), lambda raw: _cidr(*_to_cidr(raw))),
     Implementation("containsIP", ("dyn", "dyn"), _contains_ip, member=True),
     Implementation("containsCIDR", ("dyn", "dyn"), _contains_cidr, member=True),
     Implementation("ip", ("dyn",), _ip_function, member=True),
     Implementation("prefixLength", ("dyn",), lambda c: _prefix(c)[1], member=True),
     Implementation("masked", ("dyn",),
                    lambda c: _cidr(_network(c).network_address, _prefix(c)[1]), member=True),
     Implementation("isCIDR", ("dyn",), parses(parse_cidr))))
