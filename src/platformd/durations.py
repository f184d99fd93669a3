"""Go-style durations on the command line (``5m``, ``90s``, ``1h30m``, ``250ms``), and as Go's
``time.ParseDuration`` reads and ``Duration.String`` writes them in configuration files."""

import re

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError naming the problem."""
    text = text.strip()
    if not text:
        raise ValueError("empty duration")
    if text == "0":
        return 0.0  # Go's time.ParseDuration: "0" alone needs no unit
    pos, total = 0, 0.0
    for m in _PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"invalid duration {text!r} (examples: 5m, 90s, 1h30m)")
    return total


def go_parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` for the units ``durations.parse_duration`` knows, with a
    sign and a bare ``0``; ValueError otherwise."""
    sign = -1.0 if text.startswith("-") else 1.0
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0.0
    return sign * parse_duration(body)


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()``: ``45s``, ``1m0s``, ``1h30m0s``, ``500ms``, ``-30s``."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign, ns = ("-" if ns < 0 else ""), abs(ns)
    if ns < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if ns >= size:
                return sign + _fraction(ns, size) + unit
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    out = f"{hours}h" if hours else ""
    if hours or minutes:
        out += f"{minutes}m"
    return sign + out + _fraction(rest, 10**9) + "s"


def _fraction(value: int, size: int) -> str:
    whole, part = divmod(value, size)
    if not part:
        return str(whole)
    return f"{whole}." + str(part).rjust(len(str(size)) - 1, "0").rstrip("0")
