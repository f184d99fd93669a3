"""
Upstream's ``kubernetes.Semver`` library at version 1 (``library/semverlib.go`` over
``blang/semver/v4``): ``semver``, ``isSemver`` (each with an optional ``normalize``
flag: a leading ``v`` dropped, leading zeros removed, a missing minor or patch added),
``major``, ``minor``, ``patch`` and the comparisons; ``Parse``'s checks and messages are
blang's (``No Major.Minor.Patch elements found``, ``Invalid character(s) found in major
number "x"`` ...).  A version is a ``kubernetes.Semver`` holding it without its build
metadata, which ``Compare`` (and so ``==``) ignores.
"""

from __future__ import annotations

from platformd.cel.library import opaque
from platformd.cel.library.overloads import (Implementation, Library, Overload, comparisons,
                                             parses, sign)
from platformd.goformat.gotext import go_quote

_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") | _NUMBERS
_UINT64 = (1 << 64) - 1


def _uint(text: str) -> int:
    """``strconv.ParseUint(text, 10, 64)``."""
    if not text:
        raise ValueError(f'strconv.ParseUint: parsing {go_quote(text)}: invalid syntax')
    value = int(text)
    if value > _UINT64:
        raise ValueError(f'strconv.ParseUint: parsing {go_quote(text)}: value out of range')
    return value


def _number(text: str, name: str) -> int:
    if not set(text) <= _NUMBERS:
        raise ValueError(f"Invalid character(s) found in {name.lower()} number "
                         f"{go_quote(text)}")
    if len(text) > 1 and text[0] == "0":
        raise ValueError(f"{name} number must not contain leading zeroes {go_quote(text)}")
    return _uint(text)


def _prerelease(text: str):
    if not text:
        raise ValueError("Prerelease is empty")
    if set(text) <= _NUMBERS:
        if len(text) > 1 and text[0] == "0":
            raise ValueError("Numeric PreRelease version must not contain leading zeroes "
                             f"{go_quote(text)}")
        return _uint(text)
    if set(text) <= _ALPHANUM:
        return text
    raise ValueError(f"Invalid character(s) found in prerelease {go_quote(text)}")


def parse(text: str) -> tuple:
    """blang's ``Parse``: (major, minor, patch, prerelease identifiers)."""
    if not text:
        raise ValueError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "Major"), _number(parts[1], "Minor")
    patch, _, build = parts[2].partition("+")
    patch, dash, pre = patch.partition("-")
    patch_number = _number(patch, "Patch")
    prerelease = tuple(_prerelease(p) for p in pre.split(".")) if dash else ()
    if "+" in parts[2]:
        for piece in build.split("."):
            if not piece:
                raise ValueError("Buildstr is empty")
            if not set(piece) <= _ALPHANUM:
                raise ValueError(f"Invalid character(s) found in build meta data "
                                 f"{go_quote(piece)}")
    return major, minor, patch_number, prerelease


def normalize_and_parse(text: str) -> tuple:
    """``normalizeAndParse``."""
    text = text[1:] if text.startswith("v") else text
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or part[0] not in _NUMBERS:
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))


def _parsed(text: str, normalize: bool = False) -> tuple:
    return normalize_and_parse(text) if normalize else parse(text)


def _semver(text: str, normalize: bool = False):
    major, minor, patch, pre = _parsed(text, normalize)
    canonical = f"{major}.{minor}.{patch}"
    if pre:
        canonical += "-" + ".".join(str(p) for p in pre)
    return opaque.make(opaque.SEMVER, canonical)


def _version(value) -> tuple:
    return parse(opaque.text(value))


def _compare_pre(a: tuple, b: tuple) -> int:
    if not a or not b:
        return sign(len(b) - len(a)) if a or b else 0
    for x, y in zip(a, b):
        if x == y:
            continue
        if isinstance(x, int) != isinstance(y, int):
            return -1 if isinstance(x, int) else 1
        return sign((x > y) - (x < y))
    return sign(len(a) - len(b))


def compare(a, b) -> int:
    """blang's ``Compare``: -1, 0 or 1 (build metadata ignored)."""
    x, y = _version(a), _version(b)
    if x[:3] != y[:3]:
        return -1 if x[:3] < y[:3] else 1
    return _compare_pre(x[3], y[3])


_S = opaque.SEMVER
LIBRARY = Library(
    "kubernetes.Semver",
    (Overload("string_to_semver", "semver", ("string",), _S),
     Overload("string_bool_to_semver", "semver", ("string", "bool"), _S),
     Overload("is_semver_string", "isSemver", ("string",), "bool"),
     Overload("is_semver_string_bool", "isSemver", ("string", "bool"), "bool"),
     *comparisons("semver", _S),
     Overload("semver_major", "major", (_S,), "int", member=True),
     Overload("semver_minor", "minor", (_S,), "int", member=True),
     Overload("semver_patch", "patch", (_S,), "int", member=True)),
    (Implementation("semver", ("dyn",), _semver),
     Implementation("semver", ("dyn", "dyn"), _semver),
     Implementation("isSemver", ("dyn",), parses(_parsed)),
     Implementation("isSemver", ("dyn", "dyn"), parses(_parsed)),
     Implementation("major", ("dyn",), lambda v: _version(v)[0], member=True),
     Implementation("minor", ("dyn",), lambda v: _version(v)[1], member=True),
     Implementation("patch", ("dyn",), lambda v: _version(v)[2], member=True)))
