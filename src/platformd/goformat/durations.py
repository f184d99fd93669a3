"""Go-style durations on the command line (``5m``, ``90s``, ``1h30m``, ``250ms``), and as Go's
``time.ParseDuration`` reads and ``Duration.String`` writes them in configuration files."""

import re

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")  # ASCII digits, as Go


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError naming the problem."""
    text = text.strip()
    if not text:
        raise ValueError("empty duration")
    if text == "0":
        return 0.0  # Go's time.ParseDuration: "0" alone needs no unit
    pos, total = 0, 0.0
    while pos < len(text):
        m = _PART.match(text, pos)  # anchored: a search would be quadratic in the length
        if m is None:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"invalid duration {text!r} (examples: 5m, 90s, 1h30m)")
    return total


#: The longest ``time.Duration``: int64 nanoseconds.
_MAX_SECONDS = ((1 << 63) - 1) / 1e9


def go_parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` for the units ``durations.parse_duration`` knows, with a
    sign and a bare ``0``; ValueError otherwise, and for a duration past int64
    nanoseconds (about 292 years), which Go calls invalid."""
    sign = -1.0 if text.startswith("-") else 1.0
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0.0
    seconds = parse_duration(body)
    if seconds > _MAX_SECONDS:
        raise ValueError(f"invalid duration {text!r}: past int64 nanoseconds")
    return sign * seconds


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
