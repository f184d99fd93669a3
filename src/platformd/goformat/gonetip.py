"""
Go's ``net/netip`` parsers, step by step, for their error messages: ``ParseAddr``
(``ParseAddr("1.2.3.4.5"): IPv4 address too long``, ``ParseAddr("2001:db8:::68"): each
colon-separated field must have at least one digit (at ":68")``) and ``ParsePrefix``
(``netip.ParsePrefix("x"): no '/'``).  Addresses are answered as their bytes (4 or 16)
and zone, for ``ipaddress`` to take over.
"""

from __future__ import annotations

from platformd.goformat.gotext import go_quote


def _error(text: str, message: str, at: str = "") -> ValueError:
    where = f" (at {go_quote(at)})" if at else ""
    return ValueError(f"ParseAddr({go_quote(text)}): {message}{where}")


def _ipv4_fields(text: str, start: int, end: int) -> bytes:
    """``parseIPv4Fields`` of ``text[start:end]``."""
    s = text[start:end]
    fields: list = []
    value, digits = 0, 0
    for i, char in enumerate(s):
        if "0" <= char <= "9":
            if digits == 1 and value == 0:
                raise _error(text, "IPv4 field has octet with leading zero")
            value = value * 10 + ord(char) - 48
            digits += 1
            if value > 255:
                raise _error(text, "IPv4 field has value >255")
        elif char == ".":
            if i == 0 or i == len(s) - 1 or s[i - 1] == ".":
                raise _error(text, "IPv4 field must have at least one digit", s[i:])
            if len(fields) == 3:
                raise _error(text, "IPv4 address too long")
            fields.append(value)
            value, digits = 0, 0
        else:
            raise _error(text, "unexpected character", s[i:])
    if len(fields) < 3:
        raise _error(text, "IPv4 address too short")
    return bytes(fields + [value])


def _ipv6(text: str) -> tuple:
    """``parseIPv6``: (16 bytes, zone)."""
    s, zone = text, ""
    if "%" in s:
        s, _, zone = s.partition("%")
        if not zone:
            raise _error(text, "zone must be a non-empty string")
    ip = bytearray(16)
    ellipsis = -1
    if s.startswith("::"):
        ellipsis, s = 0, s[2:]
        if not s:
            return bytes(ip), zone
    i = 0
    while i < 16:
        off, acc = 0, 0
        while off < len(s) and s[off] in "0123456789abcdefABCDEF":
            acc = (acc << 4) + int(s[off], 16)
            if off > 3:
                raise _error(text, "each group must have 4 or less digits", s)
            if acc > 0xFFFF:
                raise _error(text, "IPv6 field has value >=2^16", s)
            off += 1
        if off == 0:
            raise _error(text, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                raise _error(text, "embedded IPv4 address must replace the final 2 fields "
                                   "of the address", s)
            if i + 4 > 16:
                raise _error(text, "too many hex fields to fit an embedded IPv4 at the end "
                                   "of the address", s)
            end = len(text) - (len(zone) + 1 if zone else 0)
            ip[i:i + 4] = _ipv4_fields(text, end - len(s), end)
            s, i = "", i + 4
            break
        ip[i], ip[i + 1] = acc >> 8, acc & 0xFF
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise _error(text, "unexpected character, want colon", s)
        if len(s) == 1:
            raise _error(text, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise _error(text, "multiple :: in address", s)
            ellipsis, s = i, s[1:]
            if not s:
                break
    if s:
        raise _error(text, "trailing garbage after address", s)
    if i < 16:
        if ellipsis < 0:
            raise _error(text, "address string too short")
        n = 16 - i
        ip[ellipsis + n:16] = ip[ellipsis:i]
        ip[ellipsis:ellipsis + n] = bytes(n)
    elif ellipsis >= 0:
        raise _error(text, "the :: must expand to at least one field of zeros", s)
    return bytes(ip), zone


def parse_addr(text: str) -> tuple:
    """``netip.ParseAddr``: (4 or 16 bytes, zone); ``ValueError`` with Go's message."""
    for char in text:
        if char == ".":
            return _ipv4_fields(text, 0, len(text)), ""
        if char == ":":
            return _ipv6(text)
        if char == "%":
            raise _error(text, "missing IPv6 address")
    raise _error(text, "unable to parse IP")


def parse_prefix(text: str) -> tuple:
    """``netip.ParsePrefix``: (address bytes, bits); ``ValueError`` with Go's message."""
    def error(message: str) -> ValueError:
        return ValueError(f"netip.ParsePrefix({go_quote(text)}): {message}")

    slash = text.rfind("/")
    if slash < 0:
        raise error("no '/'")
    try:
        address, zone = parse_addr(text[:slash])
    except ValueError as problem:
        raise error(str(problem)) from None
    if zone:
        raise error("IPv6 zones cannot be present in a prefix")
    bits = text[slash + 1:]
    if len(bits) > 1 and not "1" <= bits[0] <= "9" or not bits.isascii() or \
            not bits.lstrip("+-").isdigit() or bits[0] in "+-":
        raise error(f"bad bits after slash: {go_quote(bits)}")
    if int(bits) > len(address) * 8:
        raise error("prefix length out of range")
    return address, int(bits)
