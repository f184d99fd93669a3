"""
Upstream's ``kubernetes.urls`` library (``library/urls.go``): ``url``, ``isURL`` and a
URL's ``getScheme``, ``getHost``, ``getHostname``, ``getPort``, ``getEscapedPath``,
``getQuery``, with Go's ``net/url`` read here as far as these need: ``ParseRequestURI``
decides what is a URL (absolute, or an absolute path; no fragment split off) and its
error is upstream's (``URL parse error during conversion from string: parse "x":
invalid URI for request``); the parts are ``url.Parse``'s (the fragment split off).
A URL is a ``kubernetes.URL`` holding its text.
"""

from __future__ import annotations

import re
from typing import Optional
from urllib.parse import unquote_to_bytes

from platformd.cel.library import opaque
from platformd.cel.library.overloads import Implementation, Library, Overload, parses
from platformd.goformat.gotext import go_quote

_SCHEME_FIRST = re.compile(r"[A-Za-z]")
_PORT = re.compile(r":[0-9]*")
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
#: Bytes Go's ``shouldEscape(c, encodePath)`` leaves alone.
_PATH_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                       b"-_.~$&+,/:;=@")
_VALID_ENCODED = _PATH_SAFE | frozenset(b"!'()*[]%")


def _scheme(raw: str) -> tuple:
    """Go's ``getScheme``: (scheme, rest)."""
    for i, char in enumerate(raw):
        if char.isascii() and char.isalpha():
            continue
        if char.isascii() and (char.isdigit() or char in "+-."):
            if i == 0:
                return "", raw
            continue
        if char == ":":
            if i == 0:
                raise ValueError("missing protocol scheme")
            return raw[:i], raw[i + 1:]
        return "", raw
    return "", raw


def _host(authority: str) -> str:
    """Go's ``parseAuthority``/``parseHost`` checks; the host (userinfo dropped)."""
    host = authority[authority.rfind("@") + 1:]
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            raise ValueError("missing ']' in host")
        rest = host[end + 1:]
        if rest and not _PORT.fullmatch(rest):
            raise ValueError(f"invalid port {go_quote(rest)} after host")
    else:
        colon = host.rfind(":")
        if colon >= 0 and not _PORT.fullmatch(host[colon:]):
            raise ValueError(f"invalid port {go_quote(host[colon:])} after host")
    _check_escapes(host)
    return host


def _check_escapes(text: str) -> None:
    """Go's ``unescape``: every ``%`` starts two hex digits."""
    bad = _ESCAPE.search(text)
    if bad:
        raise ValueError(f"invalid URL escape {go_quote(text[bad.start():bad.start() + 3])}")


def _parse(raw: str, request: bool) -> dict:
    """Go's ``parse(rawURL, viaRequest)``: scheme, host, path, query; ``ValueError``."""
    if any(ord(c) < 0x20 or ord(c) == 0x7f for c in raw):
        raise ValueError("net/url: invalid control character in URL")
    if raw == "" and request:
        raise ValueError("empty url")
    out = {"scheme": "", "host": "", "path": "", "query": ""}
    if raw == "*":
        out["path"] = "*"
        return out
    scheme, rest = _scheme(raw)
    out["scheme"] = scheme.lower()
    if rest.endswith("?") and rest.count("?") == 1:
        rest = rest[:-1]
    else:
        rest, _, out["query"] = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            return out  # opaque
        if request:
            raise ValueError("invalid URI for request")
        if ":" in rest.partition("/")[0]:
            raise ValueError("first path segment in URL cannot contain colon")
    if (scheme or not request and not rest.startswith("///")) and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        out["host"], rest = _host(authority), slash + path
    _check_escapes(rest)
    out["path"] = rest
    return out


def parse(raw: str) -> dict:
    """``url(raw)``'s parts; ``ValueError`` with upstream's message."""
    try:
        _parse(raw, True)
        before, _, _fragment = raw.partition("#")
        return _parse(before, False)
    except ValueError as error:
        raise ValueError(f"URL parse error during conversion from string: parse "
                         f"{go_quote(raw)}: {error}") from None


def _parts(url) -> dict:
    return parse(opaque.text(url))


def _split_host_port(host: str) -> tuple:
    """Go's ``splitHostPort``."""
    port = ""
    colon = host.rfind(":")
    if colon >= 0 and _PORT.fullmatch(host[colon:]):
        host, port = host[:colon], host[colon + 1:]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def _escaped_path(url) -> str:
    """Go's ``EscapedPath``: the path as written when it is a valid encoding, else the
    decoded path escaped again."""
    raw = _parts(url)["path"]
    data = raw.encode()
    if all(b in _VALID_ENCODED for b in data):
        return raw
    decoded = unquote_to_bytes(raw)
    return "".join(chr(b) if b in _PATH_SAFE else f"%{b:02X}" for b in decoded)


def _unescape_query(text: str) -> Optional[str]:
    if _ESCAPE.search(text):
        return None
    try:
        return unquote_to_bytes(text.replace("+", " ")).decode("utf-8", "surrogateescape")
    except ValueError:
        return None


def _query(url) -> dict:
    """Go's ``Query()``: ``ParseQuery`` keeping what parses (no ``;`` pairs, no bad
    escapes)."""
    out: dict = {}
    for pair in _parts(url)["query"].split("&"):
        if not pair or ";" in pair:
            continue
        key, _, value = pair.partition("=")
        key_text, value_text = _unescape_query(key), _unescape_query(value)
        if key_text is None or value_text is None:
            continue
        out.setdefault(key_text, []).append(value_text)
    return out


_U = opaque.URL
LIBRARY = Library(
    "kubernetes.urls",
    (Overload("string_to_url", "url", ("string",), _U),
     Overload("url_get_scheme", "getScheme", (_U,), "string", member=True),
     Overload("url_get_host", "getHost", (_U,), "string", member=True),
     Overload("url_get_hostname", "getHostname", (_U,), "string", member=True),
     Overload("url_get_port", "getPort", (_U,), "string", member=True),
     Overload("url_get_escaped_path", "getEscapedPath", (_U,), "string", member=True),
     Overload("url_get_query", "getQuery", (_U,), "map<string, list<string>>", member=True),
     Overload("is_url_string", "isURL", ("string",), "bool")),
    (Implementation("url", ("dyn",), lambda raw: (parse(raw), opaque.make(_U, raw))[1]),
     Implementation("isURL", ("dyn",), parses(lambda raw: _parse(raw, True))),
     Implementation("getScheme", ("dyn",), lambda u: _parts(u)["scheme"], member=True),
     Implementation("getHost", ("dyn",), lambda u: _parts(u)["host"], member=True),
     Implementation("getHostname", ("dyn",),
                    lambda u: _split_host_port(_parts(u)["host"])[0], member=True),
     Implementation("getPort", ("dyn",), lambda u: _split_host_port(_parts(u)["host"])[1],
                    member=True),
     Implementation("getEscapedPath", ("dyn",), _escaped_path, member=True),
     Implementation("getQuery", ("dyn",), _query, member=True)))
